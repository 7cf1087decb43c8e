package engine

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// openTest opens an in-memory database closed at the end of the test.
func openTest(t testing.TB) *DB {
	t.Helper()
	db, err := Open("", Options{Threads: 2})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// connect opens a connection closed at the end of the test.
func connect(t testing.TB, db *DB) *Conn {
	t.Helper()
	c, err := db.Connect()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exec runs statements and fails the test on error.
func exec(t testing.TB, c *Conn, sql string, args ...any) int64 {
	t.Helper()
	n, err := c.Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
	return n
}

// collect runs sql and returns the result types and a deep copy of every
// chunk, since chunks are only valid until the next Next.
func collect(t testing.TB, c *Conn, sql string) ([]wire.LogicalType, []*wire.DataChunk) {
	t.Helper()
	res, err := c.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	defer res.Close()
	var chunks []*wire.DataChunk
	for {
		chunk, err := res.Next()
		if err != nil {
			t.Fatalf("next %q: %v", sql, err)
		}
		if chunk == nil {
			return res.Types(), chunks
		}
		chunks = append(chunks, cloneChunk(chunk))
	}
}

func cloneChunk(c *wire.DataChunk) *wire.DataChunk {
	out := &wire.DataChunk{Rows: c.Rows}
	for _, v := range c.Columns {
		out.Columns = append(out.Columns, cloneVector(v))
	}
	return out
}

func cloneVector(v *wire.Vector) *wire.Vector {
	out := *v
	out.Validity = clone(v.Validity)
	out.Data = clone(v.Data)
	out.Offsets = clone(v.Offsets)
	out.Bytes = clone(v.Bytes)
	out.Entries = clone(v.Entries)
	out.Children = nil
	for _, c := range v.Children {
		out.Children = append(out.Children, cloneVector(c))
	}
	return &out
}

func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}

// str returns row i of a string-like vector.
func str(v *wire.Vector, i int) string {
	return string(v.Bytes[v.Offsets[i]:v.Offsets[i+1]])
}

// rssBytes is the process's resident set size, from /proc/self/statm.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	fields := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(fields[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
