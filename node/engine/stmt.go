package engine

import (
	"context"
	"errors"
	"fmt"

	bindings "github.com/duckdb/duckdb-go-bindings"
)

// Stmt is a prepared statement of a Conn: DuckDB parses and plans it once,
// so running it again costs only binding and execution. Like its Conn it is
// used by one goroutine at a time, and it must be closed.
type Stmt struct {
	c     *Conn
	stmt  bindings.PreparedStatement
	stype StatementType
	names []string
}

// Prepare prepares sql, which must hold exactly one statement. Like any
// statement it closes the connection's open Result. Errors are those Exec
// would report for the same text.
func (c *Conn) Prepare(sql string) (*Stmt, error) {
	q, err := c.begin(context.Background())
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	defer c.end(q)
	ext, n, err := c.extract(sql)
	if err != nil {
		return nil, err
	}
	defer bindings.DestroyExtracted(&ext)
	if n != 1 {
		return nil, fmt.Errorf("prepare: need exactly one statement, got %d", n)
	}
	s := &Stmt{c: c}
	if bindings.PrepareExtractedStatement(c.conn, ext, 0, &s.stmt) == bindings.StateError {
		err := newError(bindings.PrepareError(s.stmt), bindings.ErrorTypeInvalid)
		bindings.DestroyPrepare(&s.stmt)
		return nil, err
	}
	s.stype = statementTypes[bindings.PreparedStatementType(s.stmt)]
	s.names = make([]string, int(bindings.PreparedStatementColumnCount(s.stmt)))
	for i := range s.names {
		s.names[i] = bindings.PreparedStatementColumnName(s.stmt, bindings.IdxT(i))
	}
	return s, nil
}

// StatementType is the kind of the prepared statement.
func (s *Stmt) StatementType() StatementType { return s.stype }

// Names are the names of the columns the statement returns: "Count" for an
// INSERT, UPDATE or DELETE without RETURNING.
func (s *Stmt) Names() []string { return s.names }

// Exec binds args (as Conn.Exec does) and runs the statement to completion,
// discarding its rows. It reports the rows an INSERT, UPDATE or DELETE
// without RETURNING changed (DuckDB's count row), else 0. Cancelling ctx
// interrupts it.
func (s *Stmt) Exec(ctx context.Context, args ...any) (int64, error) {
	if s.stmt.Ptr == nil {
		return 0, errors.New("exec: statement is closed")
	}
	q, err := s.c.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	defer s.c.end(q)
	n, err := s.c.execPrepared(s.stmt, args)
	return n, withCtx(ctx, s.c.explain(q, err))
}

// Close releases the statement. It is idempotent.
func (s *Stmt) Close() {
	bindings.DestroyPrepare(&s.stmt)
}

// ParamKind is the type DuckDB bound a parameter of a prepared statement
// to, for the few types whose Go values Exec binds exactly as DuckDB typed
// them (ParamTypes); every other type, and any type carrying an alias, is
// ParamOther.
type ParamKind uint8

// Parameter kinds.
const (
	ParamOther ParamKind = iota
	ParamTinyInt
	ParamSmallInt
	ParamInteger
	ParamBigInt
	ParamUTinyInt
	ParamUSmallInt
	ParamUInteger
	ParamUBigInt
	ParamDecimal
	ParamVarchar
)

var paramKinds = map[bindings.Type]ParamKind{
	bindings.TypeTinyInt: ParamTinyInt, bindings.TypeSmallInt: ParamSmallInt,
	bindings.TypeInteger: ParamInteger, bindings.TypeBigInt: ParamBigInt,
	bindings.TypeUTinyInt: ParamUTinyInt, bindings.TypeUSmallInt: ParamUSmallInt,
	bindings.TypeUInteger: ParamUInteger, bindings.TypeUBigInt: ParamUBigInt,
	bindings.TypeDecimal: ParamDecimal, bindings.TypeVarchar: ParamVarchar,
}

// ParamType is the type of one parameter; Width and Scale are set for
// ParamDecimal.
type ParamType struct {
	Kind         ParamKind
	Width, Scale uint8
}

// ParamTypes are the types DuckDB resolved for the statement's parameters
// when it prepared it (for INSERT … VALUES, the target columns' types). A
// value bound with exactly its parameter's type is used as it is; one of
// another type makes DuckDB bind and plan the statement again on every
// Exec.
func (s *Stmt) ParamTypes() []ParamType {
	if s.stmt.Ptr == nil {
		return nil
	}
	out := make([]ParamType, int(bindings.NParams(s.stmt)))
	for i := range out {
		lt := bindings.ParamLogicalType(s.stmt, bindings.IdxT(i+1))
		kind := paramKinds[bindings.GetTypeId(lt)]
		if bindings.LogicalTypeGetAlias(lt) != "" {
			kind = ParamOther
		}
		out[i].Kind = kind
		if kind == ParamDecimal {
			out[i].Width, out[i].Scale = bindings.DecimalWidth(lt), bindings.DecimalScale(lt)
		}
		bindings.DestroyLogicalType(&lt)
	}
	return out
}

// Decimal is an argument bound as DECIMAL(Width, Scale) holding
// Value / 10^Scale, for widths up to 18 (DuckDB stores those in 64 bits).
type Decimal struct {
	Width, Scale uint8
	Value        int64
}
