package replication

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/duckraft/duckraft/node/wire"
)

// ExecResult is what applying one command produced.
type ExecResult struct {
	// Index is the Raft log index of the entry that applied the command; a
	// client that reads at or after it sees its write. For a replayed
	// command it is the index of the first application.
	Index uint64
	// RowsChanged is the number of rows inserted, updated or deleted, summed
	// over the entries of a Txn.
	RowsChanged int64
	// Columns, Types and Chunks hold the rows of a Statement with Returning
	// set (the last such statement of a Txn); Chunks are wire DataChunks
	// encoded in the Q3 layout.
	Columns []string
	Types   []wire.LogicalType
	Chunks  [][]byte
	// Replayed reports that the command's idempotency key had been applied
	// before: nothing was applied this time and this is the first result.
	Replayed bool
}

// Rows decodes Chunks into rows of Go values.
func (r *ExecResult) Rows() ([][]any, error) {
	var rows [][]any
	for i, enc := range r.Chunks {
		c, err := wire.DecodeDataChunk(wire.NewReader(enc), wire.Limits{})
		if err != nil {
			return nil, fmt.Errorf("decode result chunk %d: %w", i, err)
		}
		for row := range c.Rows {
			vals := make([]any, len(c.Columns))
			for col, v := range c.Columns {
				if vals[col], err = v.Value(row); err != nil {
					return nil, fmt.Errorf("result chunk %d row %d column %d: %w", i, row, col, err)
				}
			}
			rows = append(rows, vals)
		}
	}
	return rows, nil
}

// encodeReturning serializes the returned rows of r for the idempotency
// table: the column names, their types and the chunks.
func encodeReturning(r *ExecResult) ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(r.Columns)))
	for i, name := range r.Columns {
		b = appendLenBytes(b, []byte(name))
		t, err := wire.AppendLogicalType(nil, &r.Types[i], wire.Q3)
		if err != nil {
			return nil, fmt.Errorf("encode result type %d: %w", i, err)
		}
		b = appendLenBytes(b, t)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Chunks)))
	for _, c := range r.Chunks {
		b = appendLenBytes(b, c)
	}
	return b, nil
}

// decodeReturning is the inverse of encodeReturning.
func decodeReturning(b []byte, r *ExecResult) error {
	rd := byteReader{b: b}
	n := rd.uvarint()
	for i := uint64(0); i < n && rd.err == nil; i++ {
		r.Columns = append(r.Columns, string(rd.bytes()))
		t, err := wire.DecodeLogicalType(wire.NewReader(rd.bytes()), wire.Limits{})
		if err != nil && rd.err == nil {
			rd.err = err
		}
		r.Types = append(r.Types, t)
	}
	n = rd.uvarint()
	for i := uint64(0); i < n && rd.err == nil; i++ {
		r.Chunks = append(r.Chunks, append([]byte(nil), rd.bytes()...))
	}
	if rd.err != nil {
		return fmt.Errorf("decode stored result: %w", rd.err)
	}
	return nil
}

func appendLenBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// byteReader reads uvarints and length-prefixed byte strings; the first
// error sticks.
type byteReader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (r *byteReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *byteReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
