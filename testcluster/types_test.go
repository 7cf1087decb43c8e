package testcluster_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// duckDB2TypesOnCluster (TestSharedCluster): DuckDB 2.0's types (VARIANT
// alone and in a list, TUPLE, TIMESTAMPTZ_NS, GEOMETRY) read from a
// follower and appended back through it, by a Q3 client (SEND_DATA) and a
// Q1 client (APPEND, without TIMESTAMPTZ_NS, which DuckDB 1.5 lacks): every
// node holds the client's rows and the state hashes agree. Malformed values
// a client can send (a VARIANT whose string runs past its data, a TIMETZ
// with every bit set, which DuckDB itself would misread or die on) are
// errors, and every node keeps answering.
func duckDB2TypesOnCluster(t *testing.T, c *testcluster.Cluster) {
	leader := c.WaitForLeader(t, 10*time.Second)
	follower := c.Others(leader)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conns := map[wire.Generation]*client.Conn{}
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		conn, err := client.Connect(ctx, "quack:"+follower.QuackAddr, client.Options{Token: testcluster.Token, Generation: g})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns[g] = conn
	}
	q3 := conns[wire.Q3]
	exec(t, q3, `CREATE TABLE src AS SELECT i,
		CASE WHEN i = 2 THEN NULL ELSE ('{"a": [' || i || ', "a string longer than twelve bytes"], "b": {"c": null}}')::JSON::VARIANT END AS v,
		CASE WHEN i = 2 THEN NULL ELSE [i::VARIANT, NULL, {'k': 'x'}::VARIANT] END AS l,
		CASE WHEN i = 2 THEN NULL ELSE ROW(i, 'x') END AS tu,
		CASE WHEN i = 2 THEN NULL ELSE TIMESTAMPTZ_NS '2024-02-29 12:34:56.789012345+00' END AS ts,
		CASE WHEN i = 2 THEN NULL ELSE 'POINT (1 2)'::GEOMETRY END AS g
		FROM range(3) r(i)`)
	columns := map[wire.Generation]string{wire.Q1: "v, l, tu, g", wire.Q3: "v, l, tu, ts, g"}
	var variantType wire.LogicalType
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		conn, dst := conns[g], fmt.Sprintf("dst_q%d", g)
		exec(t, q3, fmt.Sprintf("CREATE TABLE %s AS SELECT %s FROM src WHERE false", dst, columns[g]))
		c.WaitConverged(t, 10*time.Second)
		rows, err := conn.Query(ctx, "SELECT "+columns[g]+" FROM src ORDER BY i")
		if err != nil {
			t.Fatal(err)
		}
		chunk, err := rows.NextChunk()
		rows.Close()
		if err != nil || chunk == nil || chunk.Rows != 3 {
			t.Fatalf("Q%d scan: %v, %v", g, chunk, err)
		}
		variantType = chunk.Columns[0].Type
		if err := conn.Append(ctx, "main", dst, chunk); err != nil {
			t.Fatalf("Q%d append: %v", g, err)
		}
		// The append went through the other session: wait for the
		// follower to apply it.
		c.WaitConverged(t, 10*time.Second)
		digest := func(table string) []any {
			return rowsOf(t, q3, fmt.Sprintf("SELECT count(*), sum(hash(r))::VARCHAR FROM (SELECT %s FROM %s) r", columns[g], table))[0]
		}
		if got, want := digest(dst), digest("src"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Q%d: appended rows %v, source %v", g, got, want)
		}
	}
	c.WaitConverged(t, 10*time.Second)

	// Malformed values, each an error from the leader's checks.
	exec(t, q3, "CREATE TABLE bad(v VARIANT, tz TIMETZ)")
	c.WaitConverged(t, 10*time.Second)
	// The wire builder has no VARIANT values: build the internal STRUCT.
	variant := func(row any) *wire.Vector {
		v, err := wire.NewVector(wire.LogicalType{ID: wire.TypeStruct, Fields: variantType.Fields}, []any{row})
		if err != nil {
			t.Fatal(err)
		}
		v.Type = variantType
		return v
	}
	// One VARCHAR value whose length (127) runs past the row's 2 bytes.
	badVariant := variant([]any{[]any{}, []any{}, []any{[]any{uint8(16), uint32(0)}}, []byte{0x7f, 'x'}})
	nullVariant := variant(nil)
	nullTZ, err := wire.NewVector(wire.LogicalType{ID: wire.TypeTimeTZ}, []any{nil})
	if err != nil {
		t.Fatal(err)
	}
	badTZ := &wire.Vector{Type: wire.LogicalType{ID: wire.TypeTimeTZ}, Count: 1, Data: binary.LittleEndian.AppendUint64(nil, ^uint64(0))}
	for _, bad := range []struct {
		name string
		cols []*wire.Vector
		want string
	}{
		{"VARIANT string past its data", []*wire.Vector{badVariant, nullTZ}, "string beyond the data"},
		{"TIMETZ with every bit set", []*wire.Vector{nullVariant, badTZ}, "outside a day"},
	} {
		for g, conn := range conns {
			err := conn.Append(ctx, "main", "bad", &wire.DataChunk{Rows: 1, Columns: bad.cols})
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("Q%d %s: %v, want an error with %q", g, bad.name, err, bad.want)
			}
		}
	}
	c.WaitConverged(t, 10*time.Second)
	for _, n := range c.Nodes {
		conn, err := client.Connect(ctx, "quack:"+n.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q3})
		if err != nil {
			t.Fatal(err)
		}
		if got := rowsOf(t, conn, "SELECT count(*) FROM bad"); got[0][0] != int64(0) {
			t.Errorf("%s holds %v rows of the malformed appends", n.ID, got[0][0])
		}
		if got := rowsOf(t, conn, "SELECT v::VARCHAR FROM dst_q3 WHERE v IS NOT NULL ORDER BY 1 LIMIT 1"); len(got) != 1 {
			t.Errorf("%s reads %v", n.ID, got)
		}
		conn.Close()
	}
}
