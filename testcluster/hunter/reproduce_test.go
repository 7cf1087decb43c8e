package hunter

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/testcluster"
)

// reproducers are the divergence classes the hunter found on main at
// 5595e15, each reduced to the fewest statements (FINDINGS.md). Every write
// must either be refused or leave the replicas equal.
var reproducers = []struct {
	name  string
	setup []string
	write string
}{
	{"quoted now() in INSERT VALUES", []string{"CREATE TABLE r(s VARCHAR)"}, `INSERT INTO r VALUES (CAST("now"() AS VARCHAR))`},
	{"qualified now() in INSERT SELECT", []string{"CREATE TABLE r(s VARCHAR)"}, "INSERT INTO r SELECT CAST(main.now() AS VARCHAR)"},
	{"quoted random() in UPDATE", []string{"CREATE TABLE r AS SELECT range AS i, 0.0::DOUBLE AS x FROM range(10)"}, `UPDATE r SET x = "random"()`},
	{"qualified random() in UPDATE", []string{"CREATE TABLE r AS SELECT range AS i, 0.0::DOUBLE AS x FROM range(10)"}, "UPDATE r SET x = system.main.random()"},
	{"quoted transaction_timestamp() in UPDATE WHERE", []string{"CREATE TABLE r AS SELECT range AS i FROM range(10)"}, `DELETE FROM r WHERE i < epoch_us("transaction_timestamp"()) % 10`},
	{"quoted uuid() in CREATE TABLE AS", nil, `CREATE TABLE r AS SELECT "uuid"() AS u`},
	{"quoted get_current_time() in CREATE TABLE AS", nil, `CREATE TABLE r AS SELECT CAST("get_current_time"() AS VARCHAR) AS s`},
	{"quoted random() in a column DEFAULT", []string{`CREATE TABLE r(i INTEGER, x DOUBLE DEFAULT "random"())`}, "INSERT INTO r(i) VALUES (1)"},
	{"quoted random() in ALTER … SET DEFAULT", []string{"CREATE TABLE r(i INTEGER, x DOUBLE)", `ALTER TABLE r ALTER COLUMN x SET DEFAULT "random"()`}, "INSERT INTO r(i) VALUES (1)"},
	{"quoted random() in a generated column", []string{`CREATE TABLE r(i INTEGER, g DOUBLE GENERATED ALWAYS AS ("random"()))`}, "INSERT INTO r(i) VALUES (1)"},
	{"quoted random() in a macro used by UPDATE", []string{"CREATE TABLE r AS SELECT range AS i, 0.0::DOUBLE AS x FROM range(10)", `CREATE MACRO rm() AS "random"()`}, "UPDATE r SET x = rm()"},
	{"quoted random() in a view read by UPDATE", []string{"CREATE TABLE r AS SELECT range AS i, 0.0::DOUBLE AS x FROM range(10)", `CREATE VIEW rv AS SELECT "random"() AS x`}, "UPDATE r SET x = (SELECT x FROM rv)"},
	{"USING SAMPLE in INSERT SELECT", []string{"CREATE TABLE r AS SELECT range AS i FROM range(100)"}, "INSERT INTO r SELECT i + 100 FROM r USING SAMPLE 5 ROWS"},
	{"TABLESAMPLE in UPDATE WHERE", []string{"CREATE TABLE r AS SELECT range AS i, 0 AS x FROM range(100)"}, "UPDATE r SET x = 1 WHERE i IN (SELECT i FROM r TABLESAMPLE reservoir(10 ROWS))"},
	{"USING SAMPLE in CREATE TABLE AS", []string{"CREATE TABLE src AS SELECT range AS i FROM range(100)"}, "CREATE TABLE r AS SELECT * FROM src USING SAMPLE 20% (bernoulli)"},
	{"node-local table function in INSERT SELECT", []string{"CREATE TABLE r(s VARCHAR)"}, "INSERT INTO r SELECT CAST(x AS VARCHAR) FROM duckdb_connection_count() x"},
	{"quoted txid_current() in CREATE TABLE AS", nil, `CREATE TABLE r AS SELECT "txid_current"() AS x`},
	{"quoted current_transaction_id() in CREATE TABLE AS", nil, `CREATE TABLE r AS SELECT "current_transaction_id"() AS x`},
	{"pragma_database_size() in CREATE TABLE AS", nil, "CREATE TABLE r AS SELECT * FROM pragma_database_size()"},
	{"duckdb_tables() in CREATE TABLE AS", []string{"CREATE TABLE src(i INTEGER)"}, "CREATE TABLE r AS SELECT * FROM duckdb_tables()"},
	{"duckdb_memory() in CREATE TABLE AS", nil, "CREATE TABLE r AS SELECT * FROM duckdb_memory()"},
}

// TestReproducers sends each reproducer to one 3-node cluster: every
// one diverged at 5595e15 (FINDINGS.md); each must now be refused or
// converge.
func TestReproducers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	h := start(t, Config{Seed: 1})
	for _, rc := range reproducers {
		t.Run(rc.name, func(t *testing.T) {
			for _, sql := range rc.setup {
				if f := h.send(Statement{SQL: sql, Placement: "setup"}); f != nil {
					t.Fatalf("setup %s: %s", sql, f.Detail)
				}
				if e := h.last[len(h.last)-1].Err; e != "" {
					t.Logf("setup refused (the write may fail too): %s: %s", sql, e)
				}
			}
			f := h.send(Statement{SQL: rc.write, Placement: "write"})
			if e := h.last[len(h.last)-1].Err; e != "" {
				t.Logf("refused: %s", e)
			}
			if f != nil {
				t.Errorf("%s: %s: %s", rc.write, f.Kind, f.Detail)
				if f.Kind != Divergence {
					t.FailNow()
				}
			}
			if !h.reset() {
				t.Fatal("the nodes differ after dropping every object")
			}
		})
	}
}

// A node killed after an ALTER TABLE that stores an expression (SET
// DEFAULT, ADD COLUMN … DEFAULT, TYPE … USING) must start again. DuckDB
// 1.5.6 cannot replay such an ALTER from its own write-ahead log ("Calling
// DatabaseManager::GetDefaultDatabase with no default database set"), even
// for SET DEFAULT 1 + 2: the hunter found a follower that never came back
// from its restore.
func TestNodeRestartsAfterAlterWithExpression(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	for _, alter := range []string{
		"ALTER TABLE r ALTER COLUMN i SET DEFAULT 1 + 2",
		"ALTER TABLE r ADD COLUMN d INTEGER DEFAULT abs(1)",
		"ALTER TABLE r ALTER COLUMN i TYPE BIGINT USING abs(i)",
	} {
		t.Run(alter, func(t *testing.T) {
			h := start(t, Config{Seed: 1})
			for _, sql := range []string{"CREATE TABLE r(i INTEGER)", alter, "INSERT INTO r(i) VALUES (1)"} {
				if f := h.send(Statement{SQL: sql}); f != nil {
					t.Fatalf("%s: %s", sql, f.Detail)
				}
				if e := h.last[len(h.last)-1].Err; e != "" {
					t.Fatalf("%s: %s", sql, e)
				}
			}
			var follower *testcluster.Node
			for _, n := range h.c.Nodes {
				if st, err := n.Status(); err == nil && st.State != "Leader" {
					follower = n
					break
				}
			}
			if follower == nil {
				t.Fatal("no follower")
			}
			follower.Kill()
			follower.Restart(t)
			h.conns[follower] = nil
			if f := h.converge(); f != nil {
				t.Fatalf("after restarting %s: %s", follower.ID, f.Detail)
			}
		})
	}
}

// A client cannot turn on DuckDB's profiler for a node's replication. The
// hunter found that a write reading enable_profiling() is replicated and
// runs on every node's applier: afterwards every node printed the profile
// of every statement it applied to its output, and with a save_location
// (which the node cannot write: file access is off) every later write
// failed on every node ("unknown DuckDB error") until one read
// disable_profiling().
func TestClientCannotEnableProfiling(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	for _, sql := range []string{
		"CREATE TABLE p AS SELECT * FROM enable_profiling()",
		"CREATE TABLE p AS SELECT * FROM enable_profiling(save_location := '" + filepath.Join(t.TempDir(), "profile.json") + "', format := 'json')",
	} {
		t.Run(sql, func(t *testing.T) {
			h := start(t, Config{Seed: 1})
			if _, err := h.conn(h.c.Nodes[1]).Exec(t.Context(), sql); err == nil {
				t.Errorf("accepted on %s", h.c.Nodes[1].ID)
			}
			if _, err := h.conn(h.c.Nodes[2]).Exec(t.Context(), "CREATE TABLE after AS SELECT 42 AS answer"); err != nil {
				t.Fatalf("a write after it: %v", err)
			}
			if f := h.converge(); f != nil {
				t.Fatal(f.Detail)
			}
			for _, n := range h.c.Nodes {
				if strings.Contains(n.Log(), "Query Profiling Information") {
					t.Errorf("%s printed profiles of the statements it applied", n.ID)
				}
			}
		})
	}
}

// One write must not stall every node's applier. The hunter's statement
// CAST(x AS VARCHAR) FROM test_all_types(use_large_bignum := true) x got no
// answer in 60 s: DuckDB takes minutes to print the largest BIGNUM, the
// write is replicated as SQL, and every node's applier (and a restarted
// node's replay) runs it while every later write waits.
func TestOneWriteCannotStallTheAppliers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	h := start(t, Config{Seed: 1})
	slow := "CREATE TABLE big AS SELECT bignum::VARCHAR AS s FROM test_all_types(use_large_bignum := true)"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	_, err := h.conn(h.c.Nodes[0]).Exec(ctx, slow)
	cancel()
	t.Logf("%s: %v", slow, err)
	ctx, cancel = context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if _, err := h.conn(h.c.Nodes[1]).Exec(ctx, "CREATE TABLE after AS SELECT 42 AS answer"); err != nil {
		t.Fatalf("a write after it: %v", err)
	}
	if f := h.converge(); f != nil {
		t.Fatal(f.Detail)
	}
}

// A follower catches up from a snapshot holding a table with a generated
// column. The hunter's follower restore found it failing for good on main:
// "restore: append to main.gen59: table has 4 columns, chunk has 5": the
// snapshot carries the generated column's values, which an append cannot
// take, and the leader sends the same snapshot again and again.
func TestSnapshotRestoresGeneratedColumns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	h := start(t, Config{Seed: 1})
	for _, sql := range []string{
		"CREATE TABLE g(i INTEGER, j INTEGER GENERATED ALWAYS AS (i + 1))",
		"INSERT INTO g(i) SELECT range FROM range(10)",
	} {
		if _, err := h.conn(h.c.Nodes[0]).Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if f := h.converge(); f != nil {
		t.Fatal(f.Detail)
	}
	l := h.c.Leader()
	follower := h.c.Others(l)[0]
	follower.Kill()
	h.down = follower
	// More entries than the nodes keep after a snapshot (clusterArgs), so
	// that the follower can only catch up from one.
	for i := range 150 {
		if _, err := h.conn(l).Exec(t.Context(), fmt.Sprintf("INSERT INTO t0 VALUES (%d, 1, 'x', 1)", 5000+i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // a snapshot interval (clusterArgs) and then some
	follower.Restart(t)
	h.down = nil
	if f := h.converge(); f != nil {
		t.Fatalf("%s did not catch up: %s", follower.ID, f.Detail)
	}
}

// A generated column is computed when it is read, so nextval in one
// advances the sequence of the node that reads: found by a hunt on the
// binder branch, where sequence functions are allowed in writes. Strong
// reads run on the leader, so three of them leave its sequence, and the
// column's values, ahead of the followers'.
func TestGeneratedColumnWithNextval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	h := start(t, Config{Seed: 1})
	conn := h.conn(h.c.WaitForLeader(t, 20*time.Second))
	for _, sql := range []string{
		"SET duckraft_consistency = 'strong'",
		"CREATE SEQUENCE sq",
		"CREATE TABLE g(i INTEGER, j BIGINT GENERATED ALWAYS AS (nextval('sq')))",
		"INSERT INTO g(i) VALUES (1)",
		"SELECT * FROM g", "SELECT * FROM g", "SELECT * FROM g",
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Logf("%s: %v (refused: fine)", sql, err)
		}
	}
	if f := h.converge(); f != nil {
		t.Fatal(f.Detail)
	}
}
