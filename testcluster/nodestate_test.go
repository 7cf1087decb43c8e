package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// TestClientCannotReachNodeState: on three duckraftd processes, with
// external access off (the default) and on, no client reads the applier's
// schema (other clients' write results) or a node's own files, nor
// overwrites them, whatever its role, however it spells the name: each is
// refused with a Permission Error on every node, each node's database file
// is unchanged, and the nodes still agree. On main at 42d1571 a read
// token's SELECT * FROM _duckraft.keys answered with the rows, any client's
// read_blob of a node's database file or WAL answered with its bytes even
// with external access off, and an admin's COPY … TO the database file
// replaced it.
func TestClientCannotReachNodeState(t *testing.T) {
	for _, external := range []bool{false, true} {
		t.Run(fmt.Sprintf("external access %v", external), func(t *testing.T) {
			dir := t.TempDir()
			tokensFile := filepath.Join(dir, "tokens")
			if err := os.WriteFile(tokensFile, []byte("read "+readToken+"\nadmin "+adminToken+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(dir, "x.csv")
			if err := os.WriteFile(outside, []byte("a\n1\n2\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"--tokens", tokensFile}
			if external {
				args = append(args, "--allow-external-access")
			}
			c := testcluster.Start(t, 3, testcluster.Options{Args: args})
			leader := c.WaitForLeader(t, 30*time.Second)
			admin := connectAs(t, leader.QuackAddr, adminToken, wire.Q1)
			exec(t, admin, "CREATE TABLE t AS SELECT range AS i FROM range(10)")
			exec(t, admin, "INSERT INTO t VALUES (100) RETURNING i")
			exec(t, admin, "CHECKPOINT")
			c.WaitConverged(t, 30*time.Second)
			files := map[string][]byte{}
			for _, n := range c.Nodes {
				b, err := os.ReadFile(filepath.Join(n.Dir, "duckraft.db"))
				if err != nil {
					t.Fatal(err)
				}
				files[n.ID] = b
			}
			for _, n := range c.Nodes {
				db := filepath.Join(n.Dir, "duckraft.db")
				for _, token := range []string{readToken, adminToken} {
					conn := connectAs(t, n.QuackAddr, token, wire.Q1)
					for _, sql := range []string{
						"SELECT * FROM _duckraft.keys",
						`SELECT * FROM "_DUCKRAFT".keys`,
						"SELECT * FROM query_table('_duckraft.keys')",
						"SELECT * FROM query_table('_duck' || 'raft.keys')",
						"SELECT * FROM query('SELECT * FROM _duckraft.applied')",
						"SET search_path = 'main,_duckraft'",
						"SELECT octet_length(content) FROM read_blob('" + db + "')",
						"SELECT octet_length(content) FROM read_blob('" + db + ".wal')",
						"SELECT content FROM read_text('" + tokensFile + "')",
						"SELECT file FROM glob('" + n.Dir + "/raft/*')",
						"SELECT octet_length(content) FROM read_blob('" + n.Dir + "/../" + filepath.Base(n.Dir) + "/duckraft.db')",
					} {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						_, err := conn.Exec(ctx, sql)
						cancel()
						wantRefused(t, fmt.Sprintf("%s, token %.5s: %s", n.ID, token, sql), err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := connectAs(t, n.QuackAddr, adminToken, wire.Q1).Exec(ctx,
					"COPY (SELECT 'garbage') TO '"+db+"' (USE_TMP_FILE false, HEADER false)")
				cancel()
				wantRefused(t, n.ID+": COPY … TO its database file", err)
			}
			for _, n := range c.Nodes {
				if b, err := os.ReadFile(filepath.Join(n.Dir, "duckraft.db")); err != nil || len(b) < len(files[n.ID])/2 || bytes.HasPrefix(b, []byte("garbage")) {
					t.Errorf("%s: its database file was overwritten (%d bytes, was %d): %v", n.ID, len(b), len(files[n.ID]), err)
				}
			}
			// Files elsewhere are as --allow-external-access says.
			_, err := admin.Exec(context.Background(), "SELECT * FROM read_csv('"+outside+"')")
			if external != (err == nil) {
				t.Errorf("reading a file outside the data directory with external access %v: %v", external, err)
			}
			exec(t, admin, "INSERT INTO t VALUES (101)")
			c.WaitConverged(t, 30*time.Second)
			if got := queryInts(t, connectAs(t, c.Nodes[2].QuackAddr, readToken, wire.Q1), "SELECT count(*) FROM t"); got[0] != 12 {
				t.Errorf("t holds %d rows, want 12", got[0])
			}
		})
	}
}

// wantRefused checks that err is the node's refusal of a client statement
// that would reach the node's own state: code forbidden, duckraft's words.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != string(outcome.Forbidden) || !strings.HasPrefix(se.Message, "duckraft: ") {
		t.Errorf("%s: %v, want duckraft's refusal (code %s)", what, err, string(outcome.Forbidden))
	}
}
