// Package wal defines the replicated write-ahead entries that the Raft log
// carries and their binary encoding. A Raft log entry holds one Batch; a
// Batch holds the Commands that the leader packed together (group commit);
// each Command wraps one Entry: a Statement, an Append, a Txn, a NoOp, or
// one of the staging entries that load a large transaction's rows ahead of
// its commit (Stage, Staged, Unstage).
//
// The package knows nothing of Raft or DuckDB, and carries SQL text without
// reading it (package node/sqltext does): replication applies what is
// decoded here.
package wal

import (
	"fmt"
	"math"
	"time"
)

// MaxKeyLen bounds an idempotency key: a client-chosen string or a 16-byte id.
const MaxKeyLen = 256

// Kind identifies an Entry on the wire.
type Kind uint8

// Entry kinds. The values are part of the encoding and never change.
const (
	KindStatement Kind = 1
	KindAppend    Kind = 2
	KindTxn       Kind = 3
	KindNoOp      Kind = 4
	KindStage     Kind = 5
	KindStaged    Kind = 6
	KindUnstage   Kind = 7
)

func (k Kind) String() string {
	switch k {
	case KindStatement:
		return "statement"
	case KindAppend:
		return "append"
	case KindTxn:
		return "txn"
	case KindNoOp:
		return "noop"
	case KindStage:
		return "stage"
	case KindStaged:
		return "staged"
	case KindUnstage:
		return "unstage"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one replicated unit of work. It is implemented by Statement,
// Append, Txn, NoOp, Stage, Staged and Unstage only.
type Entry interface {
	Kind() Kind
}

// Statement is one SQL statement with its positional parameters, already
// made deterministic by the leader.
type Statement struct {
	SQL    string
	Params []Param
	// Returning asks the applier to collect the rows the statement produces
	// (INSERT … RETURNING) instead of only counting changed rows.
	Returning bool
}

// Append bulk-loads one encoded DataChunk into a table.
type Append struct {
	Schema, Table string
	// Parents are the schemas Schema is nested in (DuckDB 2.0), outermost
	// first; none for a schema of the database.
	Parents []string
	// Chunk is a wire DataChunk in the Q3 layout; wal treats it as opaque.
	Chunk []byte
}

// Txn is an explicit client transaction: its entries apply atomically, all or
// none. It holds Statements, Appends and Staged entries only.
type Txn struct {
	Entries []Entry
}

// NoOp applies nothing. Proposing one and waiting for it orders the caller
// after every earlier entry.
type NoOp struct{}

// Kind implements Entry.
func (Statement) Kind() Kind { return KindStatement }

// Kind implements Entry.
func (Append) Kind() Kind { return KindAppend }

// Path is the schema's path: Parents, then Schema.
func (a Append) Path() []string {
	return append(a.Parents[:len(a.Parents):len(a.Parents)], a.Schema)
}

// Stage loads rows of an open client transaction ahead of its commit: it
// appends Chunks to the staging table of part Part of stage ID, creating the
// table (typed as the chunks) with the first one. The rows stay invisible
// to clients until a Staged entry moves them into their table, so a large
// insert travels as many bounded log entries and still commits atomically.
type Stage struct {
	// ID names the client transaction's stages, random per transaction.
	ID uint64
	// Part is the run of consecutive appends to one table it belongs to.
	Part uint32
	// Offset is the number of rows staged in the part before this entry;
	// the applier refuses an entry that does not continue the part, so a
	// lost or failed Stage cannot leave a gap.
	Offset uint64
	// Chunks are wire DataChunks in the Q3 layout, all of the same types.
	Chunks [][]byte
}

// Staged, inside the transaction's Txn, moves the rows staged in part Part
// of stage ID into its table and drops the stage. Rows is how many the
// part must hold; any other count fails the transaction.
type Staged struct {
	ID            uint64
	Part          uint32
	Rows          uint64
	Schema, Table string
	// Parents are the schemas Schema is nested in, as in Append.
	Parents []string
}

// Unstage drops the stages of ID last written before IdleBefore (unix
// microseconds): a rolled-back or abandoned transaction's. A client's
// rollback sends math.MaxInt64; the leader's sweep of forgotten stages an
// older time, so a stage still being loaded is kept.
type Unstage struct {
	ID         uint64
	IdleBefore int64
}

// Kind implements Entry.
func (Stage) Kind() Kind { return KindStage }

// Kind implements Entry.
func (Staged) Kind() Kind { return KindStaged }

// Path is the target schema's path: Parents, then Schema.
func (s Staged) Path() []string {
	return append(s.Parents[:len(s.Parents):len(s.Parents)], s.Schema)
}

// Kind implements Entry.
func (Unstage) Kind() Kind { return KindUnstage }

// Kind implements Entry.
func (Txn) Kind() Kind { return KindTxn }

// Kind implements Entry.
func (NoOp) Kind() Kind { return KindNoOp }

// Command is what a client write becomes on the leader.
type Command struct {
	// Timestamp is the leader's clock (unix microseconds) when it accepted
	// the write; it stands in for now() on every node.
	Timestamp int64
	// Key is an optional idempotency key: a second command with the same key
	// is not applied again and gets the first one's result.
	Key []byte
	// Entry is the work itself.
	Entry Entry
}

// Batch is the payload of one Raft log entry: the commands the leader packed
// together, applied in order.
type Batch struct {
	Commands []Command
}

// ParamType identifies the type of a Param. The values are part of the
// encoding and never change.
type ParamType uint8

// Parameter types.
const (
	ParamNull      ParamType = 0
	ParamBool      ParamType = 1
	ParamInt64     ParamType = 2
	ParamUint64    ParamType = 3
	ParamFloat64   ParamType = 4
	ParamString    ParamType = 5
	ParamBlob      ParamType = 6
	ParamTimestamp ParamType = 7 // microseconds since the unix epoch, UTC
	ParamDate      ParamType = 8 // days since the unix epoch
	ParamUUID      ParamType = 9 // 16 bytes, big-endian as in RFC 4122
)

func (t ParamType) String() string {
	switch t {
	case ParamNull:
		return "null"
	case ParamBool:
		return "bool"
	case ParamInt64:
		return "int64"
	case ParamUint64:
		return "uint64"
	case ParamFloat64:
		return "float64"
	case ParamString:
		return "string"
	case ParamBlob:
		return "blob"
	case ParamTimestamp:
		return "timestamp"
	case ParamDate:
		return "date"
	case ParamUUID:
		return "uuid"
	}
	return fmt.Sprintf("paramtype(%d)", uint8(t))
}

// Param is one typed scalar parameter of a Statement. The zero Param is NULL.
// Build one with the constructors below or ParamOf.
type Param struct {
	typ ParamType
	num uint64 // bool, integers, timestamp, date, float64 bits
	str string // string, blob, uuid bytes
}

// Null returns a NULL parameter.
func Null() Param { return Param{} }

// Bool returns a BOOLEAN parameter.
func Bool(v bool) Param {
	p := Param{typ: ParamBool}
	if v {
		p.num = 1
	}
	return p
}

// Int64 returns a BIGINT parameter.
func Int64(v int64) Param { return Param{typ: ParamInt64, num: uint64(v)} }

// Uint64 returns a UBIGINT parameter.
func Uint64(v uint64) Param { return Param{typ: ParamUint64, num: v} }

// Float64 returns a DOUBLE parameter.
func Float64(v float64) Param { return Param{typ: ParamFloat64, num: math.Float64bits(v)} }

// String returns a VARCHAR parameter.
func String(v string) Param { return Param{typ: ParamString, str: v} }

// Blob returns a BLOB parameter.
func Blob(v []byte) Param { return Param{typ: ParamBlob, str: string(v)} }

// Timestamp returns a TIMESTAMP parameter of unix microseconds.
func Timestamp(micros int64) Param { return Param{typ: ParamTimestamp, num: uint64(micros)} }

// Date returns a DATE parameter of days since the unix epoch.
func Date(days int32) Param { return Param{typ: ParamDate, num: uint64(int64(days))} }

// UUID returns a UUID parameter.
func UUID(v [16]byte) Param { return Param{typ: ParamUUID, str: string(v[:])} }

// ParamOf converts a Go value to a Param: nil, bool, signed and unsigned
// integers, float32/64, string, []byte, time.Time (as a timestamp) and
// [16]byte (as a UUID).
func ParamOf(v any) (Param, error) {
	switch v := v.(type) {
	case nil:
		return Null(), nil
	case Param:
		return v, nil
	case bool:
		return Bool(v), nil
	case int:
		return Int64(int64(v)), nil
	case int8:
		return Int64(int64(v)), nil
	case int16:
		return Int64(int64(v)), nil
	case int32:
		return Int64(int64(v)), nil
	case int64:
		return Int64(v), nil
	case uint:
		return Uint64(uint64(v)), nil
	case uint8:
		return Uint64(uint64(v)), nil
	case uint16:
		return Uint64(uint64(v)), nil
	case uint32:
		return Uint64(uint64(v)), nil
	case uint64:
		return Uint64(v), nil
	case float32:
		return Float64(float64(v)), nil
	case float64:
		return Float64(v), nil
	case string:
		return String(v), nil
	case []byte:
		return Blob(v), nil
	case time.Time:
		return Timestamp(v.UnixMicro()), nil
	case [16]byte:
		return UUID(v), nil
	}
	return Param{}, fmt.Errorf("%w: unsupported parameter type %T", ErrInvalid, v)
}

// Type returns the parameter's type.
func (p Param) Type() ParamType { return p.typ }

// Value returns the parameter as a Go value for binding: nil, bool, int64,
// uint64, float64, string, []byte, time.Time (UTC, for timestamps and dates)
// or a canonical UUID string.
func (p Param) Value() any {
	switch p.typ {
	case ParamBool:
		return p.num != 0
	case ParamInt64:
		return int64(p.num)
	case ParamUint64:
		return p.num
	case ParamFloat64:
		return math.Float64frombits(p.num)
	case ParamString:
		return p.str
	case ParamBlob:
		return []byte(p.str)
	case ParamTimestamp:
		return time.UnixMicro(int64(p.num)).UTC()
	case ParamDate:
		return time.Unix(int64(p.num)*86400, 0).UTC()
	case ParamUUID:
		b := []byte(p.str)
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	return nil
}

func (p Param) String() string {
	if p.typ == ParamNull {
		return "NULL"
	}
	return fmt.Sprintf("%v::%s", p.Value(), p.typ)
}
