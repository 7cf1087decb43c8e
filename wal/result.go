package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/duckraft/duckraft/node/wire"
)

// Result is what applying one command produced. The leader returns it to
// the client's node, and every node keeps the returned rows with the
// command's idempotency key, so a retried command answers as the first
// application did.
type Result struct {
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
func (r *Result) Rows() ([][]any, error) {
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

// recordResult is the type byte of an encoded Result.
const recordResult = 'R'

// MarshalBinary encodes the result as the leader answers a forwarded
// write: a version byte, a type byte, the index, the row count, the
// replayed flag, the returned rows (AppendReturning), and a CRC-32C.
func (r *Result) MarshalBinary() ([]byte, error) {
	dst := []byte{Version, recordResult}
	dst = binary.AppendUvarint(dst, r.Index)
	dst = binary.AppendVarint(dst, r.RowsChanged)
	replayed := byte(0)
	if r.Replayed {
		replayed = 1
	}
	dst = append(dst, replayed)
	dst, err := r.AppendReturning(dst)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst, castagnoli)), nil
}

// DecodeResult decodes what MarshalBinary wrote, checking the version, the
// checksum and every length and count against the input before allocating.
func DecodeResult(data []byte) (*Result, error) {
	if len(data) < headerLen+trailerLen {
		return nil, fmt.Errorf("%w: %d bytes is shorter than header and checksum", ErrCorrupt, len(data))
	}
	if data[0] != Version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrVersion, data[0], Version)
	}
	body, tail := data[:len(data)-trailerLen], data[len(data)-trailerLen:]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(tail); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if body[1] != recordResult {
		return nil, fmt.Errorf("%w: record type %#x, want result", ErrCorrupt, body[1])
	}
	d := decoder{buf: body, off: headerLen}
	r := &Result{Index: d.uvarint("index"), RowsChanged: d.varint("rows changed")}
	switch d.byte("replayed") {
	case 0:
	case 1:
		r.Replayed = true
	default:
		d.fail("replayed flag is not 0 or 1")
	}
	d.returning(r)
	if d.err == nil && d.off != len(d.buf) {
		d.fail("%d trailing bytes", len(d.buf)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// AppendReturning appends the returned rows of r to dst: the column names,
// their types and the chunks, each length-prefixed. Nodes store this with
// the idempotency key, so its layout is part of the on-disk format.
func (r *Result) AppendReturning(dst []byte) ([]byte, error) {
	if len(r.Types) != len(r.Columns) {
		return nil, fmt.Errorf("%w: %d column names but %d types", ErrInvalid, len(r.Columns), len(r.Types))
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Columns)))
	for i, name := range r.Columns {
		dst = appendString(dst, name)
		t, err := wire.AppendLogicalType(nil, &r.Types[i], wire.Q3)
		if err != nil {
			return nil, fmt.Errorf("encode result type %d: %w", i, err)
		}
		dst = appendBytes(dst, t)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Chunks)))
	for _, c := range r.Chunks {
		dst = appendBytes(dst, c)
	}
	return dst, nil
}

// DecodeReturning reads what AppendReturning wrote into r's Columns, Types
// and Chunks. The chunks do not alias b.
func DecodeReturning(b []byte, r *Result) error {
	d := decoder{buf: b}
	d.returning(r)
	if d.err == nil && d.off != len(d.buf) {
		d.fail("%d trailing bytes", len(d.buf)-d.off)
	}
	if d.err != nil {
		return fmt.Errorf("decode returned rows: %w", d.err)
	}
	return nil
}

func (d *decoder) returning(r *Result) {
	n := d.count("result columns")
	for i := 0; i < n && d.err == nil; i++ {
		r.Columns = append(r.Columns, d.string("column name"))
		enc := d.bytes("column type", math.MaxUint64)
		if d.err != nil {
			return
		}
		t, err := wire.DecodeLogicalType(wire.NewReader(enc), wire.Limits{})
		if err != nil {
			d.fail("column type %d: %v", i, err)
			return
		}
		r.Types = append(r.Types, t)
	}
	n = d.count("result chunks")
	for i := 0; i < n && d.err == nil; i++ {
		if c := d.bytes("result chunk", math.MaxUint64); d.err == nil {
			r.Chunks = append(r.Chunks, append([]byte(nil), c...))
		}
	}
}
