package ducklake

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
)

// Backend is the server a DuckLake client keeps its catalog in: a duckraft
// node over Quack, or, for comparison, a DuckDB database in this process.
type Backend interface {
	// Query runs a whole text, as the Quack server runs a PREPARE's SQL,
	// and returns the rows of its last statement.
	Query(ctx context.Context, sql string) ([][]any, error)
	Close() error
}

// Quack is a Backend on one duckraft node: a Quack session of the
// generation DuckDB 2.0 speaks (Q3), as the quack extension opens one per
// attached catalog.
type Quack struct {
	Addr string
	conn *client.Conn
}

// DialQuack opens a Q3 session on the node at addr.
func DialQuack(ctx context.Context, addr, token string) (*Quack, error) {
	c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: token, Generation: wire.Q3})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return &Quack{Addr: addr, conn: c}, nil
}

// Query implements Backend.
func (q *Quack) Query(ctx context.Context, sql string) ([][]any, error) {
	rows, err := q.conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Close implements Backend.
func (q *Quack) Close() error { return q.conn.Close() }

// Local is a Backend on a DuckDB database in this process: the single
// DuckDB server a DuckLake catalog would otherwise live in, for the
// harness's reference runs and benchmarks.
type Local struct{ conn *engine.Conn }

// NewLocal opens a connection to db.
func NewLocal(db *engine.DB) (*Local, error) {
	c, err := db.Connect()
	if err != nil {
		return nil, err
	}
	return &Local{conn: c}, nil
}

// Query implements Backend.
func (l *Local) Query(ctx context.Context, sql string) ([][]any, error) {
	res, err := l.conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var out [][]any
	for {
		c, err := res.Next()
		if err != nil {
			return nil, err
		}
		if c == nil {
			return out, nil
		}
		for r := 0; r < c.Rows; r++ {
			row := make([]any, len(c.Columns))
			for i, col := range c.Columns {
				if row[i], err = col.Value(r); err != nil {
					return nil, err
				}
			}
			out = append(out, row)
		}
	}
}

// Close implements Backend.
func (l *Local) Close() error { return l.conn.Close() }

// answered reports whether err is the server's answer to a statement (an
// error DuckDB or duckraft raised), as opposed to a failure to reach it.
func answered(err error) bool {
	var se *client.ServerError
	var ee *engine.Error
	return errors.As(err, &se) || errors.As(err, &ee)
}

// unknownOutcome reports whether err says that a write may or may not
// have applied: duckraft's unknown_outcome, or no answer at all to a
// statement that commits.
func unknownOutcome(err error) bool {
	var se *client.ServerError
	return errors.As(err, &se) && se.Code == "unknown_outcome"
}

// retryOnError is DuckLakeTransaction::RetryOnError: the only errors its
// commit loop retries are those whose message names a primary key, a
// unique constraint, a conflict or concurrent access.
func retryOnError(err error) bool {
	m := strings.ToLower(err.Error())
	return strings.Contains(m, "primary key") || strings.Contains(m, "unique") ||
		strings.Contains(m, "conflict") || strings.Contains(m, "concurrent")
}

// The converters below read the Go values of wire.Vector.Value.

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint64:
		return int64(x), true
	case uint32:
		return int64(x), true
	case *big.Int:
		return x.Int64(), x.IsInt64()
	}
	return 0, false
}

func mustInt(v any) int64 {
	n, _ := asInt(v)
	return n
}

func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// structField returns the field name of a STRUCT value.
func structField(v any, name string) (any, bool) {
	if s, ok := v.(wire.Struct); ok {
		for _, f := range s {
			if f.Name == name {
				return f.Value, true
			}
		}
	}
	return nil, false
}

// where names the server b sends to, for traces.
func where(b Backend) string {
	if q, ok := b.(*Quack); ok {
		return q.Addr
	}
	return "this process"
}
