package routing

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/access"
	"github.com/duckraft/duckraft/wal"
)

// TestClientCannotReadInternalSchema: the applier's schema holds other
// clients' write results (keys) and the applied index; no client of any
// role reads it, in any spelling, through query(), query_table(), a
// pragma, the search path or a name computed while the statement runs, on
// the leader, a follower, a replica or a router. On main at 42d1571 a read
// token's SELECT * FROM _duckraft.keys answered with the rows.
func TestClientCannotReadInternalSchema(t *testing.T) {
	net := newInmemNet(t, "n1", "n2", "r1")
	for _, nd := range net.nodes {
		nd.sql(`INSERT INTO "` + replication.MetaSchema + `".keys VALUES (42)`)
		nd.sql("INSERT INTO t VALUES (1)")
	}
	attacks := []struct {
		sql  string
		want error
	}{
		{"SELECT * FROM _duckraft.keys", access.ErrHiddenSchema},
		{`SELECT * FROM "_DuckRaft"."KEYS"`, access.ErrHiddenSchema},
		{"FROM memory._duckraft.applied", access.ErrHiddenSchema},
		{"SELECT * FROM query('SELECT * FROM _duckraft.keys')", access.ErrHiddenSchema},
		{"SELECT * FROM query_table('_duckraft.keys')", access.ErrHiddenSchema},
		{`SELECT * FROM query_table(E'\x5fduckraft.keys')`, access.ErrHiddenSchema},
		{"SELECT * FROM query_table('_duck' || 'raft.keys')", access.ErrComputedName},
		{"SELECT * FROM pragma_storage_info('_duckraft.keys')", access.ErrHiddenSchema},
		{"SET search_path = 'main,_duckraft'", access.ErrHiddenSchema},
		{"SET search_path = '_duck' || 'raft'", access.ErrComputedName},
		{"BEGIN; SELECT * FROM _duckraft.keys; COMMIT", access.ErrHiddenSchema},
	}
	for _, via := range []*inmemNode{net.node("n1"), net.node("n2"), net.node("r1"), net.router(t)} {
		for _, role := range []tokens.Role{tokens.Read, tokens.Write, tokens.Admin} {
			s := via.sessionAs(t, role)
			for _, a := range attacks {
				_, err := run(t, via, s, a.sql)
				if !errors.Is(err, a.want) || engine.ExceptionType(err) != "Permission" {
					t.Errorf("%s, %s token: %s: %v, want a Permission Error wrapping %v", via.id, role, a.sql, err, a.want)
				}
			}
			// The refused SET left the search path alone.
			if _, err := run(t, via, s, "SELECT * FROM keys"); err == nil {
				t.Errorf("%s, %s token: keys resolves without the schema", via.id, role)
			}
			if got := countOf(t, mustRun(t, via, s, "SELECT count(*) FROM t")); got != 1 {
				t.Errorf("%s, %s token: t holds %d rows", via.id, role, got)
			}
		}
	}
}

// fileNode starts a one-node network whose database is a file in its own
// data directory, as duckraftd keeps it, with external access as given.
func fileNode(t *testing.T, external bool) (*inmemNode, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(filepath.Join(dir, "duckraft.db"), engine.Options{Threads: 1, AllowExternalAccess: external})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	n := &inmemNet{t: t, leader: "n1", keys: map[string]*wal.Result{}}
	nd := &inmemNode{net: n, id: "n1", db: db}
	nd.exec, err = New(Config{ID: "n1", Store: memStore{nd}, Directory: memDir{n}, Remote: inmemRemote{n}, DB: db, Token: "t",
		SessionWait: 100 * time.Millisecond, LeaderWait: 2 * time.Second, ProtectedPaths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.exec.Close() })
	nd.sql(`CREATE SCHEMA "` + replication.MetaSchema + `"`)
	nd.sql(`CREATE TABLE "` + replication.MetaSchema + `".applied(id INTEGER, idx UBIGINT)`)
	nd.sql(`INSERT INTO "` + replication.MetaSchema + `".applied VALUES (1, 0)`)
	nd.sql(`CREATE TABLE "` + replication.MetaSchema + `".keys(idx UBIGINT)`)
	nd.sql("CREATE TABLE t(id INTEGER)")
	nd.sql("CHECKPOINT")
	n.nodes = append(n.nodes, nd)
	return nd, dir
}

// TestClientCannotReachNodeFiles: a client reads and writes none of the
// node's own files (its DuckDB file, WAL, data directory, tokens file)
// through read_blob, read_text, glob, read_csv or COPY, with external
// access off as with it on. With it off, DuckDB itself lets any client
// read the database file and its WAL and overwrite them with COPY … TO
// (it keeps them in allowed_paths): on main at 42d1571 a write token's
// COPY (SELECT 'garbage') TO '<data>/duckraft.db' (USE_TMP_FILE false)
// replaced the node's database with eight bytes.
func TestClientCannotReachNodeFiles(t *testing.T) {
	for _, external := range []bool{false, true} {
		nd, dir := fileNode(t, external)
		outside := t.TempDir()
		other := filepath.Join(outside, "x.csv")
		if err := os.WriteFile(other, []byte("a\n1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		db := filepath.Join(dir, "duckraft.db")
		before, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		s := nd.sessionAs(t, tokens.Admin)
		for _, sql := range []string{
			"SELECT octet_length(content) FROM read_blob('" + db + "')",
			"SELECT octet_length(content) FROM read_blob('" + db + ".wal')",
			"SELECT content FROM read_text('" + dir + "/duckraft.db.wal')",
			"SELECT octet_length(content) FROM read_blob('" + dir + "/../data/duckraft.db')",
			"SELECT octet_length(content) FROM read_blob('file://" + db + "')",
			"SELECT file FROM glob('" + dir + "/*')",
			"SELECT count(*) FROM read_csv('" + dir + "/*.wal')",
			"SELECT * FROM read_duckdb('" + db + "')",
			"COPY (SELECT 'garbage') TO '" + db + "' (USE_TMP_FILE false, HEADER false)",
			"COPY (SELECT 'garbage') TO '" + db + ".wal' (USE_TMP_FILE false, HEADER false)",
			"INSERT INTO t SELECT octet_length(content) FROM read_blob('" + db + "')",
		} {
			if _, err := run(t, nd, s, sql); !errors.Is(err, access.ErrProtectedFile) {
				t.Errorf("external access %v: %s: %v, want ErrProtectedFile", external, sql, err)
			}
		}
		if _, err := run(t, nd, s, "SELECT octet_length(content) FROM read_blob('"+dir+"/'"+" || 'duckraft.db')"); !errors.Is(err, access.ErrComputedName) {
			t.Errorf("external access %v: a computed path: %v, want ErrComputedName", external, err)
		}
		after, err := os.ReadFile(db)
		if err != nil || !bytes.Equal(before, after) {
			t.Errorf("external access %v: the database file changed (%d bytes, then %d): %v", external, len(before), len(after), err)
		}
		// Files elsewhere stay as external access says.
		_, err = run(t, nd, s, "SELECT * FROM read_csv('"+other+"')")
		switch {
		case external && err != nil:
			t.Errorf("external access on: reading a file outside the data directory: %v", err)
		case !external && (err == nil || !strings.Contains(err.Error(), "disabled by configuration")):
			t.Errorf("external access off: reading a file outside the data directory: %v, want DuckDB's refusal", err)
		}
	}
}
