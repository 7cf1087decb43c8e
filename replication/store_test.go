package replication

import (
	"context"
	"errors"
	"testing"

	"github.com/duckraft/duckraft/wal"
)

func TestSingleNode(t *testing.T) {
	nodes := startCluster(t, 1, nil)
	s := nodes[0].store
	mustExec(t, s, stmt("CREATE TABLE t(id INTEGER PRIMARY KEY, name VARCHAR)"))
	res := mustExec(t, s, stmt("INSERT INTO t VALUES (?, ?), (?, ?)", 1, "a", 2, "b"))
	if res.RowsChanged != 2 {
		t.Fatalf("rows changed = %d, want 2", res.RowsChanged)
	}
	if s.AppliedIndex() < res.Index {
		t.Fatalf("applied %d < result index %d", s.AppliedIndex(), res.Index)
	}
	ret := mustExec(t, s, wal.Command{Entry: wal.Statement{SQL: "INSERT INTO t VALUES ($1, $2) RETURNING id, name",
		Params: []wal.Param{wal.Int64(3), wal.String("it's")}, Returning: true}})
	rows, err := ret.Rows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != int32(3) || rows[0][1] != "it's" || ret.RowsChanged != 1 {
		t.Fatalf("returning rows = %v (changed %d)", rows, ret.RowsChanged)
	}
	if got := queryInt(t, nodes[0].db, "SELECT count(*) FROM t"); got != 3 {
		t.Fatalf("count = %d, want 3", got)
	}
	if _, err := s.Execute(context.Background(), stmt("COMMIT")); !errors.Is(err, ErrRefused) {
		t.Fatalf("COMMIT: err = %v, want ErrRefused", err)
	}
	if _, err := s.ReadIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
}
