package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// passthroughTypes are node's typeCases (node/types_test.go): a literal
// of every DuckDB 2.0 type but TUPLE.
var passthroughTypes = []struct{ sqlType, literal string }{
	{"BOOLEAN", "true"}, {"TINYINT", "-128"}, {"SMALLINT", "-32768"}, {"INTEGER", "-2147483648"},
	{"BIGINT", "-9223372036854775808"}, {"HUGEINT", "'-170141183460469231731687303715884105728'"},
	{"UTINYINT", "255"}, {"USMALLINT", "65535"}, {"UINTEGER", "4294967295"}, {"UBIGINT", "18446744073709551615"},
	{"UHUGEINT", "'340282366920938463463374607431768211455'"}, {"FLOAT", "1.5"}, {"DOUBLE", "3.141592653589793"},
	{"DECIMAL(4,1)", "123.4"}, {"DECIMAL(9,2)", "1234567.89"}, {"DECIMAL(18,3)", "'123456789012345.678'"},
	{"DECIMAL(38,10)", "'1234567890123456789012345678.0123456789'"},
	{"VARCHAR", "'a string longer than twelve bytes'"}, {"BLOB", `'\xDE\xAD\xBE\xEF'`}, {"BIT", "'010110'"},
	{"BIGNUM", "'-123456789012345678901234567890'"}, {"DATE", "'2024-02-29'"}, {"TIME", "'12:34:56.789012'"},
	{"TIMESTAMP_S", "'2024-02-29 12:34:56'"}, {"TIMESTAMP_MS", "'2024-02-29 12:34:56.789'"},
	{"TIMESTAMP", "'2024-02-29 12:34:56.789012'"}, {"TIMESTAMP_NS", "'2024-02-29 12:34:56.789012345'"},
	{"TIMESTAMPTZ", "'2024-02-29 12:34:56.789012+00'"}, {"TIMETZ", "'12:34:56+05:30'"},
	{"INTERVAL", "INTERVAL '1 year 2 months 3 days 04:05:06.789'"}, {"UUID", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"},
	{"ENUM('sad', 'ok', 'happy')", "'happy'"}, {"INTEGER[]", "[1, NULL, 3]"},
	{"VARCHAR[][]", "[['a'], [], NULL, ['b', NULL]]"}, {"STRUCT(a INTEGER, b VARCHAR)", "{'a': 1, 'b': NULL}"},
	{"MAP(VARCHAR, INTEGER)", "MAP {'k1': 1, 'k2': NULL}"}, {"INTEGER[3]", "[1, 2, NULL]"},
	{"UNION(i INTEGER, s VARCHAR)", "'text'"},
	{"STRUCT(l INTEGER[], m MAP(INTEGER, VARCHAR))", "{'l': [1, 2], 'm': MAP {1: 'x'}}"},
	{"TIME_NS", "'12:34:56.789012345'"}, {"GEOMETRY", "'POINT (1 2)'"}, {"VARIANT", "42"},
	{"VARIANT", "{'a': [1, 2], 'b': 'x'}"},
}

// encodedScan reads sql at addr in generation g and returns the chunks as
// the server sent them.
func encodedScan(t *testing.T, addr string, g wire.Generation, sql string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+addr, client.Options{Token: testcluster.Token, Generation: g, Encoded: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := c.Query(ctx, sql)
	if err != nil {
		t.Fatalf("Q%d %s at %s: %v", g, sql, addr, err)
	}
	defer rows.Close()
	var out [][]byte
	for {
		enc, _, _, err := rows.NextEncoded()
		if err != nil {
			t.Fatalf("Q%d %s at %s: %v", g, sql, addr, err)
		}
		if enc == nil {
			return out
		}
		out = append(out, enc)
	}
}

// TestRouterPassesChunksThrough reads a column of every type, 5,000 rows
// with NULLs, through a router whose nodes sit behind bandwidth proxies,
// with Q1 and Q3 clients. The router forwards the nodes' chunks without
// decoding them, so what its clients get must be byte-equal both to what
// the old path (decode, then encode for the client) makes of them and to
// the same query answered straight by a node.
func TestRouterPassesChunksThrough(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true, QuackCap: 200_000_000})
	r := c.StartRouter(t)
	w := r.Client(t)
	ctx := context.Background()
	for i, tc := range passthroughTypes {
		sql := fmt.Sprintf("CREATE TABLE t%d(id INTEGER, v %s); INSERT INTO t%d SELECT i, CASE WHEN i %% 7 = 0 THEN NULL ELSE (%s)::%s END FROM range(5000) r(i)",
			i, tc.sqlType, i, tc.literal, tc.sqlType)
		if _, err := w.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", tc.sqlType, err)
		}
	}
	c.WaitConverged(t, 60*time.Second)
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		for i, tc := range passthroughTypes {
			t.Run(fmt.Sprintf("Q%d/%s", g, tc.sqlType), func(t *testing.T) {
				sql := fmt.Sprintf("SELECT * FROM t%d ORDER BY id", i)
				via := encodedScan(t, r.QuackAddr, g, sql)
				direct := encodedScan(t, c.Nodes[0].QuackAddr, g, sql)
				rows := 0
				for k, enc := range via {
					dec, err := wire.DecodeDataChunk(wire.NewReader(enc), wire.Limits{})
					if err != nil {
						t.Fatalf("chunk %d: %v", k, err)
					}
					rows += dec.Rows
					again, err := wire.AppendDataChunk(nil, dec, g)
					if err != nil || !bytes.Equal(again, enc) {
						t.Fatalf("chunk %d: forwarded bytes differ from decoded and re-encoded ones (%v)", k, err)
					}
				}
				if rows != 5000 {
					t.Errorf("%d rows through the router, want 5000", rows)
				}
				if !bytes.Equal(bytes.Join(via, nil), bytes.Join(direct, nil)) {
					t.Errorf("the router's chunks differ from the node's own (%d and %d chunks)", len(via), len(direct))
				}
			})
		}
	}
}

// TestRouterPooledBodiesStayPrivate scans four tables at once through a
// router, in Q1 and Q3 sessions, some abandoning their result halfway,
// while the split scans of a fifth session share the nodes. The router
// forwards chunks from pooled body buffers that go back to the pool once
// written: a buffer released while still being written would show here as
// a row of another table, or of another batch, in some client's answer.
func TestRouterPooledBodiesStayPrivate(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Options{InProcess: true})
	r := c.StartRouter(t)
	w := r.Client(t)
	ctx := context.Background()
	const tables, rows = 4, 30000
	for k := range tables {
		sql := fmt.Sprintf("CREATE TABLE p%d AS SELECT i AS id, 'p%d-' || i || '-' || repeat('x', i %% 40) AS v FROM range(%d) r(i)", k, k, rows)
		if _, err := w.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitConverged(t, 60*time.Second)
	scan := func(g wire.Generation, k, stopAfter int, split bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		conn, err := client.Connect(ctx, "quack:"+r.QuackAddr, client.Options{Token: testcluster.Token, Generation: g})
		if err != nil {
			return err
		}
		defer conn.Close()
		if split {
			if _, err := conn.Exec(ctx, "SET duckraft_split_scan = 3"); err != nil {
				return err
			}
		}
		// Only the exact form SELECT * FROM t is split.
		res, err := conn.Query(ctx, fmt.Sprintf("SELECT * FROM p%d", k))
		if err != nil {
			return err
		}
		defer res.Close()
		seen := make([]bool, rows)
		n := 0
		for res.Next() {
			v, err := res.Values()
			if err != nil {
				return err
			}
			id, _ := v[0].(int64)
			if id < 0 || id >= rows || seen[id] {
				return fmt.Errorf("Q%d p%d: id %v out of range or seen twice", g, k, v[0])
			}
			if want := fmt.Sprintf("p%d-%d-%s", k, id, strings.Repeat("x", int(id%40))); v[1] != want {
				return fmt.Errorf("Q%d p%d: row %d is %q, want %q", g, k, id, v[1], want)
			}
			seen[id] = true
			if n++; n == stopAfter {
				return nil
			}
		}
		if err := res.Err(); err != nil {
			return err
		}
		if n != rows {
			return fmt.Errorf("Q%d p%d: %d rows, want %d", g, k, n, rows)
		}
		return nil
	}
	errs := make(chan error, 2*tables+1)
	var wg sync.WaitGroup
	for k := range tables {
		for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 4 {
					stop := 0
					if round%2 == 1 {
						stop = rows / 3
					}
					if err := scan(g, k, stop, false); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range tables {
			if err := scan(wire.Q1, k, 0, true); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
