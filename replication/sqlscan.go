package replication

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// The applier reads an entry's statements through the tokens that carry
// meaning (sqltext.Statement.Significant: not space or comments). An
// unterminated string, quoted identifier or comment is one token running to
// the end of the text; DuckDB reports the error.

// firstKeyword returns the first word of st, after any opening
// parentheses, upper-cased: the statement's keyword if it starts with one.
// The word is the first token's leading ASCII letters, digits and
// underscores (the whole token if it has none) because DuckDB runs
// COMMITé, which lexes as one identifier, as COMMIT.
func firstKeyword(st sqltext.Statement) string {
	for _, t := range st.Significant() {
		if t.IsPunct('(') {
			continue
		}
		w := t.Text
		if n := strings.IndexFunc(w, func(r rune) bool { return !isASCIIWordChar(r) }); n > 0 {
			w = w[:n]
		}
		return strings.ToUpper(w)
	}
	return ""
}

func isASCIIWordChar(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// hasWord reports whether the bare word w appears in st.
func hasWord(st sqltext.Statement, w string) bool {
	for _, t := range st.Significant() {
		if t.Is(w) {
			return true
		}
	}
	return false
}

// multipleStatements reports whether toks, the code of a statement, go on
// after a semicolon with more than semicolons.
func multipleStatements(toks []sqltext.Token) bool {
	semi := false
	for _, t := range toks {
		switch {
		case t.IsPunct(';'):
			semi = true
		case semi:
			return true
		}
	}
	return false
}

// refusedKeywords start statements that would break the apply transaction
// (transaction control) or change connection or process state that is not
// replicated (settings, prepared statements, attachments, extensions): a
// statement prepared on the applier's connection would be gone after a
// restart, so a later EXECUTE would run on some nodes and fail on others.
var refusedKeywords = map[string]bool{
	"BEGIN": true, "START": true, "COMMIT": true, "END": true, "ROLLBACK": true, "ABORT": true,
	"SET": true, "RESET": true, "USE": true, "PRAGMA": true,
	"PREPARE": true, "EXECUTE": true, "DEALLOCATE": true,
	"ATTACH": true, "DETACH": true, "INSTALL": true, "LOAD": true, "FORCE": true,
	"CHECKPOINT": true, "EXPORT": true, "IMPORT": true, "VACUUM": true,
}

// checkStatement refuses SQL the applier cannot run inside its batch
// transaction. It depends only on the text, so every node refuses the same
// statements.
func checkStatement(st sqltext.Statement) error {
	kw := firstKeyword(st)
	toks := st.Significant()
	switch {
	case kw == "":
		return fmt.Errorf("%w: empty statement", ErrRefused)
	case refusedKeywords[kw]:
		return fmt.Errorf("%w: %s statements are not replicated", ErrRefused, kw)
	case multipleStatements(toks):
		return fmt.Errorf("%w: one statement per entry", ErrRefused)
	case namesMetaSchema(toks):
		return fmt.Errorf("%w: schema %s holds the applier's own bookkeeping (applied index, idempotency keys); "+
			"a replicated statement may not name it", ErrRefused, metaSchema)
	}
	return nil
}

// namesMetaSchema reports whether toks, the code of a statement, name the
// FSM's schema, bare or quoted, in any case. A statement that dropped or altered its tables
// would make every node fail to record the batch and halt; one that wrote
// to them would corrupt the applied index. Strings and comments do not
// count, and a statement cannot reach a schema without naming it.
func namesMetaSchema(toks []sqltext.Token) bool {
	for _, t := range toks {
		switch t.Kind {
		case sqltext.TokIdent:
			if strings.EqualFold(t.Text, metaSchema) {
				return true
			}
		case sqltext.TokQuotedIdent:
			name := strings.TrimSuffix(strings.TrimPrefix(t.Text, `"`), `"`)
			if strings.EqualFold(strings.ReplaceAll(name, `""`, `"`), metaSchema) {
				return true
			}
		}
	}
	return false
}

// inlineParams replaces the ? and $n placeholders of st with SQL literals
// of params, for statements run through Conn.Query, which binds no
// parameters. A ? takes the next parameter. DuckDB reads ?n as $n, but the
// applier has always read it as ? followed by the number n, and every node
// must go on applying old log entries as it did.
func inlineParams(st sqltext.Statement, params []wal.Param) (string, error) {
	var b strings.Builder
	next := 0
	for _, t := range st.Tokens() {
		if t.Kind != sqltext.TokParam || t.Text[0] == '$' && !isDigit(t.Text[1]) {
			b.WriteString(t.Text)
			continue
		}
		var p int
		rest := ""
		if t.Text[0] == '?' {
			p, rest = next, t.Text[1:]
			next++
		} else {
			n, err := strconv.Atoi(t.Text[1:])
			if err != nil || n < 1 {
				return "", fmt.Errorf("bad parameter %q", t.Text)
			}
			p = n - 1
		}
		if p >= len(params) {
			return "", fmt.Errorf("statement refers to parameter %d of %d", p+1, len(params))
		}
		b.WriteString(sqlLiteral(params[p]))
		b.WriteString(rest)
	}
	return b.String(), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// sqlLiteral renders p as a typed SQL literal.
func sqlLiteral(p wal.Param) string {
	switch v := p.Value().(type) {
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10) + "::BIGINT"
	case uint64:
		return strconv.FormatUint(v, 10) + "::UBIGINT"
	case float64:
		switch {
		case math.IsNaN(v):
			return "'nan'::DOUBLE"
		case math.IsInf(v, 1):
			return "'inf'::DOUBLE"
		case math.IsInf(v, -1):
			return "'-inf'::DOUBLE"
		}
		return "'" + strconv.FormatFloat(v, 'g', -1, 64) + "'::DOUBLE"
	case string:
		lit := sqlquote.Literal(v)
		if p.Type() == wal.ParamUUID {
			lit += "::UUID"
		}
		return lit
	case []byte:
		var b strings.Builder
		b.WriteString("'")
		for _, c := range v {
			fmt.Fprintf(&b, `\x%02X`, c)
		}
		b.WriteString("'::BLOB")
		return b.String()
	case time.Time:
		if p.Type() == wal.ParamDate {
			return "DATE '" + v.Format("2006-01-02") + "'"
		}
		return "make_timestamp(" + strconv.FormatInt(v.UnixMicro(), 10) + "::BIGINT)"
	}
	return "NULL"
}
