package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// TestNodeAPICredentials: a client holding only the token cannot forward a
// raw batch to the leader's write endpoint nor move leadership; a member
// holding the node credential of the cluster key can. With a cluster key
// of its own, the credential derived from the token is refused too.
func TestNodeAPICredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"key derived from the token", nil},
		{"cluster key of its own", []byte("0123456789abcdef0123456789abcdef")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const token = "client-token"
			d, err := Start(Config{ID: "n1", DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
				GossipAddr: freeAddr(t), Token: token, ClusterKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if _, err := d.store.WaitForLeader(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			member := clusterkey.NodeAPI(clusterkey.FromToken(token))
			if tc.key != nil {
				member = clusterkey.NodeAPI(tc.key)
			}
			write := func(c *nodeapi.Client, table string) error {
				_, err := c.Write(ctx, d.QuackAddr(), wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE " + table + "(x INTEGER)"}})
				return err
			}
			outsiders := []*nodeapi.Client{{Token: token}, {Token: token, Node: token}}
			if tc.key != nil {
				outsiders = append(outsiders, &nodeapi.Client{Token: token, Node: clusterkey.NodeAPI(clusterkey.FromToken(token))})
			}
			for i, c := range outsiders {
				if err := write(c, "outsider"); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
					t.Errorf("outsider %d: forwarded write: %v, want %s", i, err, nodeapi.CodeUnauthorized)
				}
				if _, err := c.TransferLeadership(ctx, d.QuackAddr(), ""); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
					t.Errorf("outsider %d: transfer: %v, want %s", i, err, nodeapi.CodeUnauthorized)
				}
				if err := c.Leave(ctx, d.QuackAddr()); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
					t.Errorf("outsider %d: leave: %v, want %s", i, err, nodeapi.CodeUnauthorized)
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
			// The client token still reads status and hash, for the CLI.
			if _, err := (&nodeapi.Client{Token: token}).Status(ctx, d.QuackAddr()); err != nil {
				t.Errorf("status with the client token: %v", err)
			}
			if _, err := (&nodeapi.Client{Token: token}).Hash(ctx, d.QuackAddr()); err != nil {
				t.Errorf("hash with the client token: %v", err)
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
