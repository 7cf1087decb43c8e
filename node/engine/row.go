package engine

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoRows is returned by QueryRow when the query yields no row.
var ErrNoRows = errors.New("query returned no rows")

// QueryRow runs sql like Query and returns the first row of its last
// statement, one value per column as wire.Vector.Value decodes it (nil for
// NULL, int64 for BIGINT, string for VARCHAR, ...), or ErrNoRows when there
// is none. Further rows are neither read nor reported. The values are Go
// copies, not views of DuckDB's memory, so they stay valid after the call;
// the Result is closed before QueryRow returns, so unlike Query's ctx, this
// ctx needs to cover the call only.
//
// It is for the small internal queries of the node itself (a setting, a
// count, an applied index), which would otherwise each open a Result and
// read its first chunk by hand.
func (c *Conn) QueryRow(ctx context.Context, sql string) ([]any, error) {
	res, err := c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	chunk, err := res.Next()
	if err != nil {
		return nil, err
	}
	if chunk == nil {
		return nil, ErrNoRows
	}
	row := make([]any, len(chunk.Columns))
	for i, col := range chunk.Columns {
		if row[i], err = col.Value(0); err != nil {
			return nil, fmt.Errorf("column %d (%s): %w", i+1, res.Names()[i], err)
		}
	}
	return row, nil
}

// QueryStrings runs sql like Query and returns the first column of every
// row of its last statement, in result order; an empty result gives nil.
// The column must decode as a Go string (VARCHAR, CHAR or ENUM), otherwise
// the call fails; a NULL becomes "". Other columns are ignored.
//
// It is for catalog queries that list names or statements, such as
// duckdb_functions() or duckdb_tables(). Every row is held in memory, so
// the result must be small.
func (c *Conn) QueryStrings(ctx context.Context, sql string) ([]string, error) {
	res, err := c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	if len(res.Names()) == 0 {
		return nil, errors.New("query strings: the statement returns no column")
	}
	var out []string
	for {
		chunk, err := res.Next()
		if err != nil {
			return nil, err
		}
		if chunk == nil {
			return out, nil
		}
		col := chunk.Columns[0]
		for i := range chunk.Rows {
			v, err := col.Value(i)
			if err != nil {
				return nil, fmt.Errorf("query strings: row %d: %w", len(out)+1, err)
			}
			s, ok := v.(string)
			if !ok && v != nil {
				return nil, fmt.Errorf("query strings: column %s is %s, not a string", res.Names()[0], res.Types()[0].String())
			}
			out = append(out, s)
		}
	}
}
