package engine

import (
	"context"
	"errors"
	"fmt"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/wire"
)

// StatementType is the kind of statement that produced a Result; it mirrors
// the C API's duckdb_statement_type.
type StatementType uint8

// Statement types.
const (
	StatementInvalid StatementType = iota
	StatementSelect
	StatementInsert
	StatementUpdate
	StatementExplain
	StatementDelete
	StatementPrepare
	StatementCreate
	StatementExecute
	StatementAlter
	StatementTransaction
	StatementCopy
	StatementAnalyze
	StatementVariableSet
	StatementCreateFunc
	StatementDrop
	StatementExport
	StatementPragma
	StatementVacuum
	StatementCall
	StatementSet
	StatementLoad
	StatementRelation
	StatementExtension
	StatementLogicalPlan
	StatementAttach
	StatementDetach
	StatementMulti
	StatementCopyDatabase
	StatementUpdateExtensions
	StatementMergeInto
)

var statementTypes = map[bindings.StatementType]StatementType{
	bindings.StatementTypeSelect:           StatementSelect,
	bindings.StatementTypeInsert:           StatementInsert,
	bindings.StatementTypeUpdate:           StatementUpdate,
	bindings.StatementTypeExplain:          StatementExplain,
	bindings.StatementTypeDelete:           StatementDelete,
	bindings.StatementTypePrepare:          StatementPrepare,
	bindings.StatementTypeCreate:           StatementCreate,
	bindings.StatementTypeExecute:          StatementExecute,
	bindings.StatementTypeAlter:            StatementAlter,
	bindings.StatementTypeTransaction:      StatementTransaction,
	bindings.StatementTypeCopy:             StatementCopy,
	bindings.StatementTypeAnalyze:          StatementAnalyze,
	bindings.StatementTypeVariableSet:      StatementVariableSet,
	bindings.StatementTypeCreateFunc:       StatementCreateFunc,
	bindings.StatementTypeDrop:             StatementDrop,
	bindings.StatementTypeExport:           StatementExport,
	bindings.StatementTypePragma:           StatementPragma,
	bindings.StatementTypeVacuum:           StatementVacuum,
	bindings.StatementTypeCall:             StatementCall,
	bindings.StatementTypeSet:              StatementSet,
	bindings.StatementTypeLoad:             StatementLoad,
	bindings.StatementTypeRelation:         StatementRelation,
	bindings.StatementTypeExtension:        StatementExtension,
	bindings.StatementTypeLogicalPlan:      StatementLogicalPlan,
	bindings.StatementTypeAttach:           StatementAttach,
	bindings.StatementTypeDetach:           StatementDetach,
	bindings.StatementTypeMulti:            StatementMulti,
	bindings.StatementTypeCopyDatabase:     StatementCopyDatabase,
	bindings.StatementTypeUpdateExtensions: StatementUpdateExtensions,
	bindings.StatementTypeMergeInto:        StatementMergeInto,
}

var statementNames = [...]string{
	"INVALID", "SELECT", "INSERT", "UPDATE", "EXPLAIN", "DELETE", "PREPARE", "CREATE", "EXECUTE",
	"ALTER", "TRANSACTION", "COPY", "ANALYZE", "VARIABLE_SET", "CREATE_FUNC", "DROP", "EXPORT",
	"PRAGMA", "VACUUM", "CALL", "SET", "LOAD", "RELATION", "EXTENSION", "LOGICAL_PLAN", "ATTACH",
	"DETACH", "MULTI", "COPY_DATABASE", "UPDATE_EXTENSIONS", "MERGE_INTO",
}

func (t StatementType) String() string {
	if int(t) < len(statementNames) {
		return statementNames[t]
	}
	return fmt.Sprintf("StatementType(%d)", t)
}

// Result is the streaming result of a Query. It belongs to the goroutine
// that uses its Conn and must be closed; running another statement on the
// Conn closes it.
type Result struct {
	ctx   context.Context
	c     *Conn
	q     *query
	stmt  bindings.PreparedStatement
	res   bindings.Result
	chunk bindings.DataChunk

	names   []string
	types   []wire.LogicalType
	stype   StatementType
	changed int64
	readers []*reader
	out     wire.DataChunk

	err    error
	done   bool
	closed bool
}

// newResult takes ownership of stmt and res.
func newResult(ctx context.Context, c *Conn, q *query, stmt bindings.PreparedStatement, res bindings.Result) (*Result, error) {
	r := &Result{
		ctx:  ctx,
		c:    c,
		q:    q,
		stmt: stmt,
		res:  res,
		// The prepared statement's type: DuckDB 2.0 reports EXECUTE as the
		// type of every prepared statement's result.
		stype: statementTypes[bindings.PreparedStatementType(stmt)],
		// Read before any fetch: for INSERT, UPDATE and DELETE DuckDB
		// answers from the (materialized) count row.
		changed: int64(bindings.RowsChanged(&res)),
	}
	n := int(bindings.ColumnCount(&r.res))
	r.names = make([]string, n)
	r.types = make([]wire.LogicalType, n)
	r.readers = make([]*reader, n)
	r.out.Columns = make([]*wire.Vector, n)
	for i := range n {
		r.names[i] = bindings.ColumnName(&r.res, bindings.IdxT(i))
		t, err := ownedWireType(bindings.ColumnLogicalType(&r.res, bindings.IdxT(i)))
		if err == nil {
			r.types[i] = t
			r.readers[i], err = newReader(t)
		}
		if err != nil {
			r.release()
			return nil, fmt.Errorf("result column %d (%s): %w", i+1, r.names[i], err)
		}
	}
	return r, nil
}

// Names are the result column names.
func (r *Result) Names() []string { return r.names }

// Types are the result column types.
func (r *Result) Types() []wire.LogicalType { return r.types }

// StatementType is the type of the statement that produced r.
func (r *Result) StatementType() StatementType { return r.stype }

// RowsChanged is the number of rows an INSERT, UPDATE or DELETE changed; 0
// for other statements.
func (r *Result) RowsChanged() int64 { return r.changed }

// Next returns the next chunk of rows, or nil and nil at the end. Empty
// chunks are skipped. The chunk and everything it references are valid only
// until the next call of Next or Close: fixed-width data, validity masks and
// list entries alias DuckDB's memory, and string buffers are reused.
func (r *Result) Next() (*wire.DataChunk, error) {
	if r.closed {
		return nil, errors.New("next: result is closed")
	}
	if r.err != nil || r.done {
		return nil, r.err
	}
	bindings.DestroyDataChunk(&r.chunk)
	if r.c.client {
		// A turn given back while the reader waited (Conn.Pause).
		if err := r.c.takeTurn(r.ctx); err != nil {
			return nil, r.fail(err)
		}
	}
	for {
		if r.c.interrupted(r.q) {
			return nil, r.fail(errInterrupted())
		}
		chunk := bindings.FetchChunk(r.res)
		if chunk.Ptr == nil {
			if msg := bindings.ResultError(&r.res); msg != "" {
				return nil, r.fail(newError(msg, bindings.ResultErrorType(&r.res)))
			}
			r.done = true
			return nil, nil
		}
		rows := int(bindings.DataChunkGetSize(chunk))
		if rows == 0 {
			bindings.DestroyDataChunk(&chunk)
			continue
		}
		r.chunk = chunk
		for i, rd := range r.readers {
			r.out.Columns[i] = rd.read(bindings.DataChunkGetVector(chunk, bindings.IdxT(i)), rows)
		}
		r.out.Rows = rows
		return &r.out, nil
	}
}

func (r *Result) fail(err error) error {
	r.err = withCtx(r.ctx, r.c.explain(r.q, err))
	return r.err
}

// Close releases the result and its DuckDB memory. It is idempotent.
func (r *Result) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.release()
	if r.c.res == r {
		r.c.res = nil
	}
	r.c.end(r.q)
}

func (r *Result) release() {
	bindings.DestroyDataChunk(&r.chunk)
	bindings.DestroyResult(&r.res)
	bindings.DestroyPrepare(&r.stmt)
}
