package routing

import (
	"fmt"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// staticRows is a result held in memory: what a write returns.
type staticRows struct {
	names  []string
	types  []wire.LogicalType
	chunks []*wire.DataChunk
}

func (r *staticRows) Names() []string           { return r.names }
func (r *staticRows) Types() []wire.LogicalType { return r.types }
func (r *staticRows) Close()                    {}

func (r *staticRows) Next() (*wire.DataChunk, error) {
	if len(r.chunks) == 0 {
		return nil, nil
	}
	c := r.chunks[0]
	r.chunks = r.chunks[1:]
	return c, nil
}

// remoteRows streams a result from another node's Quack server. Toward a
// client of the generation the remote session speaks, its chunks pass
// through as they came, checked by the client (client.Options.Encoded) but
// never decoded; toward another generation each is decoded and encoded
// again.
type remoteRows struct{ *client.Rows }

func (r remoteRows) Next() (*wire.DataChunk, error) { return r.NextChunk() }

// NextEncoded implements node.EncodedRows.
func (r remoteRows) NextEncoded(g wire.Generation) ([]byte, int, *wire.Buffer, error) {
	if g == r.Generation() {
		return r.Rows.NextEncoded()
	}
	c, err := r.NextChunk()
	if c == nil || err != nil {
		return nil, 0, nil, err
	}
	enc, err := wire.AppendDataChunk(nil, c, g)
	return enc, c.Rows, nil, err
}

// successRows is DuckDB's answer to BEGIN, COMMIT, SET and the like: one
// BOOLEAN column "Success" and no rows.
func successRows() node.Rows {
	return &staticRows{names: []string{"Success"}, types: []wire.LogicalType{{ID: wire.TypeBoolean}}}
}

// countRows is DuckDB's answer to a write: a BIGINT "Count", with one row
// when the count is known.
func countRows(n *int64) node.Rows {
	r := &staticRows{names: []string{"Count"}, types: []wire.LogicalType{{ID: wire.TypeBigInt}}}
	if n != nil {
		v, _ := wire.NewVector(wire.LogicalType{ID: wire.TypeBigInt}, []any{*n})
		r.chunks = []*wire.DataChunk{{Rows: 1, Columns: []*wire.Vector{v}}}
	}
	return r
}

// resultRows turns what the leader applied into the statement's result.
func resultRows(res *wal.Result) (node.Rows, error) {
	if len(res.Columns) == 0 {
		n := res.RowsChanged
		return countRows(&n), nil
	}
	r := &staticRows{names: res.Columns, types: res.Types}
	for i, enc := range res.Chunks {
		c, err := wire.DecodeDataChunk(wire.NewReader(enc), wire.Limits{})
		if err != nil {
			return nil, fmt.Errorf("decode result chunk %d: %w", i, err)
		}
		r.chunks = append(r.chunks, c)
	}
	return r, nil
}
