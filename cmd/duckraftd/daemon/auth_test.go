package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// TestNodeAPICredentials: no client token, not even an admin one, can
// forward a raw batch to the leader's write endpoint; read and write
// tokens cannot move leadership, admin tokens (--token among them) can; a
// member holding the node credential of the cluster key can do both,
// whether the key was generated or given; the credential an earlier
// release derived from the token is refused like any client's.
func TestNodeAPICredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	const token = "client-token"
	const readTok, writeTok, adminTok = "read-token-0123456789", "write-token-0123456789", "admin-token-0123456789"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("read "+readTok+"\nwrite "+writeTok+"\nadmin "+adminTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"generated key", nil},
		{"key given", []byte("0123456789abcdef0123456789abcdef")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Start(Config{ID: "n1", DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
				GossipAddr: freeAddr(t), Token: token, TokensFile: file, ClusterKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if _, err := d.store.WaitForLeader(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			member := clusterkey.NodeAPI(d.clusterKey)
			if tc.key != nil && member != clusterkey.NodeAPI(tc.key) {
				t.Fatal("the node does not use the key given")
			}
			write := func(c *nodeapi.Client, table string) error {
				_, err := c.Write(ctx, d.QuackAddr(), wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE " + table + "(x INTEGER)"}})
				return err
			}
			type client struct {
				name     string
				c        *nodeapi.Client
				transfer nodeapi.Code // the code of its transfer; a single node has no voter to hand over to
			}
			outsiders := []client{
				{"read token", &nodeapi.Client{Token: readTok}, nodeapi.CodeForbidden},
				{"write token", &nodeapi.Client{Token: writeTok}, nodeapi.CodeForbidden},
				{"write token as node credential", &nodeapi.Client{Token: writeTok, Node: writeTok}, nodeapi.CodeForbidden},
				{"admin token", &nodeapi.Client{Token: adminTok}, nodeapi.CodeNoSuchVoter},
				{"--token", &nodeapi.Client{Token: token}, nodeapi.CodeNoSuchVoter},
				{"--token as node credential", &nodeapi.Client{Token: token, Node: token}, nodeapi.CodeNoSuchVoter},
				{"wrong", &nodeapi.Client{Token: "wrong-token-0123456789"}, nodeapi.CodeUnauthorized},
				{"credential derived from the token", &nodeapi.Client{Node: clusterkey.NodeAPI(tokenDerivedKey(t, token))}, nodeapi.CodeUnauthorized},
			}
			for _, c := range outsiders {
				if err := write(c.c, "outsider"); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
					t.Errorf("%s: forwarded write: %v, want %s", c.name, err, nodeapi.CodeUnauthorized)
				}
				if _, err := c.c.TransferLeadership(ctx, d.QuackAddr(), ""); nodeapi.CodeOf(err) != c.transfer {
					t.Errorf("%s: transfer: %v, want %s", c.name, err, c.transfer)
				}
				if err := c.c.Leave(ctx, d.QuackAddr()); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
					t.Errorf("%s: leave: %v, want %s", c.name, err, nodeapi.CodeUnauthorized)
				}
			}
			select {
			case <-d.Done():
				t.Fatalf("an outsider's leave stopped the node: %v", d.Err())
			default:
			}
			// An operator's removal of the leader itself is refused: it
			// would leave the cluster without the node that must commit it.
			if _, err := (&nodeapi.Client{Token: token}).Remove(ctx, d.QuackAddr(), "n1"); nodeapi.CodeOf(err) != nodeapi.CodeBadRequest {
				t.Errorf("removal of the leader: %v, want %s", err, nodeapi.CodeBadRequest)
			}
			if _, err := (&nodeapi.Client{Token: "guess"}).Remove(ctx, d.QuackAddr(), "n2"); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
				t.Errorf("removal with a wrong token: %v, want %s", err, nodeapi.CodeUnauthorized)
			}
			if got := query(t, d, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'outsider'"); got != int64(0) {
				t.Errorf("an outsider's forwarded write was applied")
			}
			// Every client token reads status and hash, for the CLI.
			for _, tok := range []string{token, readTok, writeTok, adminTok} {
				if _, err := (&nodeapi.Client{Token: tok}).Status(ctx, d.QuackAddr()); err != nil {
					t.Errorf("status with a client token: %v", err)
				}
				if _, err := (&nodeapi.Client{Token: tok}).Hash(ctx, d.QuackAddr()); err != nil {
					t.Errorf("hash with a client token: %v", err)
				}
			}
			if _, err := (&nodeapi.Client{Node: member}).TransferLeadership(ctx, d.QuackAddr(), ""); nodeapi.CodeOf(err) != nodeapi.CodeNoSuchVoter {
				t.Errorf("member's transfer: %v, want %s", err, nodeapi.CodeNoSuchVoter)
			}
			if err := write(&nodeapi.Client{Node: member}, "member"); err != nil {
				t.Errorf("member's forwarded write: %v", err)
			}
			if got := query(t, d, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'member'"); got != int64(1) {
				t.Errorf("the member's forwarded write was not applied")
			}
		})
	}
}
