package replication

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// A literal INSERT costs the applier a prepare (parse, bind, plan: ~0.7 ms
// of a 2.2–2.9 ms apply on DuckDB 2.0) for a few µs of work, and the
// common write repeats one text shape with other values. So the applier
// keeps a prepared statement per shape (the text with its literals
// replaced by $1, $2, …) on its connection and runs a statement of a known
// shape by binding the literals' values.
//
// This is the applier's own business: the log carries the client's text
// as before, every node parameterizes it the same way, and a node with an
// empty cache (restarted, restored) reaches the same state the slow way.
// The statement must leave exactly what the literal text leaves:
//
//   - Only INSERT INTO t [(columns)] VALUES (…)[, (…)] whose values are
//     unsigned integer or decimal numbers (at most 18 digits, optionally
//     preceded by a minus), plain '…' strings, NULL, TRUE, FALSE or
//     DEFAULT; the last four stay in the shape's text as written.
//   - A value is bound only with exactly the type DuckDB gave its
//     parameter (the target column's), and only where the literal converts
//     to it without rounding or failing: an integer into a column of an
//     integer type it fits, an integer or a decimal with no more fraction
//     digits than the scale into a DECIMAL of width ≤ 18 it fits, a string
//     without NUL bytes and of valid UTF-8 into a VARCHAR. A value of
//     exactly the parameter's type is stored as it is, and DuckDB does not
//     bind the statement again; anything else runs the literal text.
//   - A statement that fails on the prepared path is run again as literal
//     text (errPrepared: the command's transaction is rolled back and
//     retried), so every error a client sees, and every node records, is
//     the literal text's.
//   - The cache is dropped whenever the catalog may change: before any
//     statement that is not INSERT, UPDATE or DELETE, any entry that is not
//     a Statement or an Append, every rollback of the apply connection and
//     every snapshot restore. A statement prepared against a catalog a
//     rollback undid is never run.
//
// TestPreparedShapesMatchLiterals runs each accepted case both ways
// against DuckDB and compares results, errors and state hashes.

// maxShapes bounds the prepared statements kept per apply connection.
const maxShapes = 64

// maxLiteralDigits keeps every number within int64 and within the 18
// digits DuckDB makes a DECIMAL literal of.
const maxLiteralDigits = 18

// errPrepared marks the failure of a statement run on the prepared path:
// the command is applied again with its literal text, whose error (if any)
// is the one the log records.
var errPrepared = errors.New("prepared shape failed")

// literal is one value of a shaped statement as written.
type literal struct {
	str    bool   // a string; else a number
	neg    bool   // the number had a minus
	digits string // the number's integer digits, or the string's value
	frac   string // the number's fraction digits
}

// shaped is a statement split into its shape and its literals.
type shaped struct {
	shape string
	lits  []literal
}

// shapeOf parameterizes st if it is of the accepted form (see above).
func shapeOf(st sqltext.Statement) (shaped, bool) {
	sig, k, ok := insertValuesHead(st)
	if !ok {
		return shaped{}, false
	}
	var b strings.Builder
	b.WriteString(normalize(sig[:k+1]))
	var lits []literal
	for k++; ; {
		if k >= len(sig) || !sig[k].IsPunct('(') {
			return shaped{}, false
		}
		b.WriteString(" (")
		for k++; ; {
			t := sig[k]
			switch {
			case t.Kind == sqltext.TokIdent && (t.Is("null") || t.Is("true") || t.Is("false") || t.Is("default")):
				b.WriteString(strings.ToUpper(t.Text))
			case t.Kind == sqltext.TokOp && t.Text == "-" && k+1 < len(sig) && sig[k+1].Kind == sqltext.TokNumber:
				l, ok := numberLiteral(sig[k+1].Text)
				if !ok {
					return shaped{}, false
				}
				l.neg = true
				lits = append(lits, l)
				fmt.Fprintf(&b, "$%d", len(lits))
				k++
			case t.Kind == sqltext.TokNumber:
				l, ok := numberLiteral(t.Text)
				if !ok {
					return shaped{}, false
				}
				lits = append(lits, l)
				fmt.Fprintf(&b, "$%d", len(lits))
			case t.Kind == sqltext.TokString:
				l, ok := stringLiteral(t.Text)
				if !ok {
					return shaped{}, false
				}
				lits = append(lits, l)
				fmt.Fprintf(&b, "$%d", len(lits))
			default:
				return shaped{}, false
			}
			k++
			if k >= len(sig) {
				return shaped{}, false
			}
			if sig[k].IsPunct(')') {
				b.WriteByte(')')
				k++
				break
			}
			if !sig[k].IsPunct(',') || k+1 >= len(sig) {
				return shaped{}, false
			}
			b.WriteString(", ")
			k++
		}
		if k == len(sig) {
			break
		}
		if !sig[k].IsPunct(',') {
			return shaped{}, false
		}
		b.WriteByte(',')
		k++
	}
	if len(lits) == 0 {
		return shaped{}, false
	}
	return shaped{shape: b.String(), lits: lits}, true
}

// numberLiteral reads digits[.digits] of at most maxLiteralDigits digits;
// exponents, hexadecimal, underscores and a bare point are left to DuckDB.
func numberLiteral(text string) (literal, bool) {
	whole, frac, point := strings.Cut(text, ".")
	if !allDigits(whole) || (point && !allDigits(frac)) || len(whole)+len(frac) > maxLiteralDigits {
		return literal{}, false
	}
	return literal{digits: whole, frac: frac}, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// stringLiteral reads a plain '…' string with ” escapes; prefixed and
// dollar-quoted strings are left to DuckDB.
func stringLiteral(text string) (literal, bool) {
	if len(text) < 2 || text[0] != '\'' || text[len(text)-1] != '\'' {
		return literal{}, false
	}
	v := strings.ReplaceAll(text[1:len(text)-1], "''", "'")
	if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
		return literal{}, false
	}
	return literal{str: true, digits: v}, true
}

// bindValue converts l to a Go value of exactly type t, or reports that it
// cannot without a rounding, a range check or a cast DuckDB would do
// differently.
func bindValue(l literal, t engine.ParamType) (any, bool) {
	if t.Kind == engine.ParamVarchar {
		return l.digits, l.str
	}
	if l.str {
		return nil, false
	}
	if t.Kind == engine.ParamDecimal {
		return decimalValue(l, t.Width, t.Scale)
	}
	if l.frac != "" {
		return nil, false
	}
	u, err := strconv.ParseUint(l.digits, 10, 64)
	if err != nil {
		return nil, false
	}
	v := int64(u) // maxLiteralDigits keeps u within int64
	if l.neg {
		v = -v
	}
	in := func(lo, hi int64) bool { return v >= lo && v <= hi }
	switch t.Kind {
	case engine.ParamTinyInt:
		return int8(v), in(-1<<7, 1<<7-1)
	case engine.ParamSmallInt:
		return int16(v), in(-1<<15, 1<<15-1)
	case engine.ParamInteger:
		return int32(v), in(-1<<31, 1<<31-1)
	case engine.ParamBigInt:
		return v, true
	case engine.ParamUTinyInt:
		return uint8(v), in(0, 1<<8-1)
	case engine.ParamUSmallInt:
		return uint16(v), in(0, 1<<16-1)
	case engine.ParamUInteger:
		return uint32(v), in(0, 1<<32-1)
	case engine.ParamUBigInt:
		return uint64(v), v >= 0
	}
	return nil, false
}

// decimalValue scales l to DECIMAL(width, scale) if it fits exactly.
func decimalValue(l literal, width, scale uint8) (any, bool) {
	if width > maxLiteralDigits || int(scale) > int(width) || len(l.frac) > int(scale) {
		return nil, false
	}
	whole := strings.TrimLeft(l.digits, "0")
	if len(whole) > int(width-scale) {
		return nil, false
	}
	digits := whole + l.frac + strings.Repeat("0", int(scale)-len(l.frac))
	if digits == "" {
		digits = "0"
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return nil, false
	}
	if l.neg {
		v = -v
	}
	return engine.Decimal{Width: width, Scale: scale, Value: v}, true
}

// shapeStmt is a prepared shape; types nil marks a shape that cannot run
// prepared (a parameter of another type, or not an INSERT counting rows).
type shapeStmt struct {
	shape string
	stmt  *engine.Stmt
	types []engine.ParamType
}

// shapeCache holds the prepared shapes of one apply connection, the least
// recently used first out. It is used under the FSM's applyMu. A nil cache
// prepares nothing: every statement runs as literal text.
type shapeCache struct {
	conn  *engine.Conn
	max   int
	order *list.List // of *shapeStmt, most recent at the front
	byKey map[string]*list.Element
	// sequences is 0 until the catalog was read since the last reset,
	// then 1 without sequences and 2 with (see run).
	sequences int
	// hits counts statements run prepared, for tests and benchmarks.
	hits uint64
}

func newShapeCache(conn *engine.Conn, max int) *shapeCache {
	return &shapeCache{conn: conn, max: max, order: list.New(), byKey: make(map[string]*list.Element)}
}

// reset closes every prepared shape: the catalog may have changed.
func (c *shapeCache) reset() {
	if c == nil {
		return
	}
	c.sequences = 0
	for e := c.order.Front(); e != nil; e = e.Next() {
		if s := e.Value.(*shapeStmt); s.stmt != nil {
			s.stmt.Close()
		}
	}
	c.order.Init()
	clear(c.byKey)
}

// get returns the prepared shape, preparing it if it is not kept; nil when
// it cannot be prepared now (the literal text will report why).
func (c *shapeCache) get(shape string) *shapeStmt {
	if e, ok := c.byKey[shape]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*shapeStmt)
	}
	st, err := c.conn.Prepare(shape)
	if err != nil {
		return nil
	}
	s := &shapeStmt{shape: shape}
	if st.StatementType() == engine.StatementInsert && len(st.Names()) == 1 && st.Names()[0] == "Count" {
		s.stmt, s.types = st, st.ParamTypes()
		for _, t := range s.types {
			if t.Kind == engine.ParamOther {
				s.types = nil
			}
		}
	}
	if s.types == nil {
		st.Close()
		s.stmt = nil
	}
	c.byKey[shape] = c.order.PushFront(s)
	if c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		o := old.Value.(*shapeStmt)
		delete(c.byKey, o.shape)
		if o.stmt != nil {
			o.stmt.Close()
		}
	}
	return s
}

// run applies s on the prepared path if it can: ok is false when it did
// nothing and the literal path must run. A failure wraps errPrepared.
func (c *shapeCache) run(ctx context.Context, s wal.Statement, text sqltext.Statement) (n int64, ok bool, err error) {
	if c == nil || len(s.Params) > 0 {
		return 0, false, nil
	}
	sh, ok := shapeOf(text)
	if !ok || c.hasSequences(ctx) {
		return 0, false, nil
	}
	ps := c.get(sh.shape)
	if ps == nil || ps.types == nil || len(ps.types) != len(sh.lits) {
		return 0, false, nil
	}
	args := make([]any, len(sh.lits))
	for i, l := range sh.lits {
		if args[i], ok = bindValue(l, ps.types[i]); !ok {
			return 0, false, nil
		}
	}
	n, err = ps.stmt.Exec(ctx, args...)
	if err != nil {
		return 0, true, fmt.Errorf("%w: %w", errPrepared, err)
	}
	c.hits++
	return n, true, nil
}

// hasSequences reports whether the database holds a sequence (or cannot
// tell). A statement that fails on the prepared path runs again as literal
// text, and its command's whole transaction with it, after a rollback that
// does not give back the values nextval drew: with a sequence anywhere (a
// DEFAULT, a trigger, another command of the batch) a node that ran the
// prepared path would draw more than one that did not, and diverge. So
// shapes are prepared only in a database without sequences; creating one
// is DDL, which resets the cache and the answer.
func (c *shapeCache) hasSequences(ctx context.Context) bool {
	if c.sequences == 0 {
		c.sequences = 2
		row, err := c.conn.QueryRow(ctx, "SELECT count(*) FROM duckdb_sequences()")
		if n, ok := firstInt(row); err == nil && ok && n == 0 {
			c.sequences = 1
		}
	}
	return c.sequences == 2
}

func firstInt(row []any) (int64, bool) {
	if len(row) == 0 {
		return 0, false
	}
	n, ok := row[0].(int64)
	return n, ok
}

// keepsCatalog reports whether a statement leaves the catalog as it was,
// so that the prepared shapes stay valid: an INSERT, UPDATE or DELETE.
// Every other statement, and every staging entry, drops them (fsm.applyEntry).
func keepsCatalog(text sqltext.Statement) bool {
	switch firstKeyword(text) {
	case "INSERT", "UPDATE", "DELETE":
		return true
	}
	return false
}
