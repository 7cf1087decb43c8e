package node_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

const (
	readToken  = "read-token-0123456789"
	writeToken = "write-token-0123456789"
	adminToken = "admin-token-0123456789"
)

// roleSet is a Set of one token per role, as a tokens file gives it.
func roleSet(t *testing.T) *tokens.Set {
	t.Helper()
	s, err := tokens.Parse(strings.NewReader("read " + readToken + "\nwrite " + writeToken + "\nadmin " + adminToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startRoleServer serves a database whose sessions authenticate against a
// keyring of roleSet, with an Executor that is not LocalExecutor (so that
// read sessions are admitted; the statements of this file's tests are
// reads, appends and insert streams, which the server checks itself).
func startRoleServer(t *testing.T) (string, *node.Server, *tokens.Keyring) {
	t.Helper()
	keys := tokens.NewKeyring(roleSet(t))
	addr, srv := startServer(t, func(c *node.Config) {
		c.Authenticator = node.KeyringAuth{Keyring: keys}
		c.Executor = &probeExecutor{}
	})
	return addr, srv, keys
}

func count(t *testing.T, c *client.Conn, table string) int64 {
	t.Helper()
	return queryRows(t, c, "SELECT count(*) FROM "+table)[0][0].(int64)
}

func wantPermissionError(t *testing.T, err error, what string) {
	t.Helper()
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != string(outcome.Forbidden) || !strings.Contains(se.Message, "needs the write role") {
		t.Fatalf("%s: got %v (%#v), want a Permission Error with code %s", what, err, se, string(outcome.Forbidden))
	}
}

// TestReadTokenCannotAppend: a read token's APPEND (Q1) and insert stream
// (Q3's PREPARE of scan_data_from_quack_client and SEND_DATA) are refused
// with a Permission Error and add no row; a write token's go through.
func TestReadTokenCannotAppend(t *testing.T) {
	addr, _, _ := startRoleServer(t)
	admin := connectWith(t, addr, wire.Q1, adminToken)
	exec(t, admin, "CREATE TABLE a(i INTEGER)")
	chunk, err := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(1)}, {int32(2)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			reader := connectWith(t, addr, g, readToken)
			before := count(t, admin, "a")
			wantPermissionError(t, reader.Append(context.Background(), "main", "a", chunk), "append")
			if got := count(t, admin, "a"); got != before {
				t.Fatalf("a refused append added %d rows", got-before)
			}
			// Reading stays allowed, and the session stays usable.
			if got := count(t, reader, "a"); got != before {
				t.Fatalf("the reader counts %d rows, want %d", got, before)
			}
			writer := connectWith(t, addr, g, writeToken)
			if err := writer.Append(context.Background(), "main", "a", chunk); err != nil {
				t.Fatalf("write token's append: %v", err)
			}
			if got := count(t, admin, "a"); got != before+2 {
				t.Fatalf("after the write token's append %d rows, want %d", got, before+2)
			}
		})
	}
}

// TestRemovedTokenEndsSession: a session whose token is no longer in the
// keyring is refused at its next request, with code unauthorized, and
// ended; a token whose role changed gets the new role at its next request.
func TestRemovedTokenEndsSession(t *testing.T) {
	addr, srv, keys := startRoleServer(t)
	for _, g := range generations {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			keys.Replace(roleSet(t))
			writer := connectWith(t, addr, g, writeToken)
			reader := connectWith(t, addr, g, readToken)
			exec(t, writer, "SELECT 1")
			sessions := srv.SessionCount()

			// The write token is removed, the read token becomes admin.
			keys.Replace((&tokens.Set{}).Add(readToken, tokens.Admin))
			_, err := writer.Exec(context.Background(), "SELECT 1")
			var se *client.ServerError
			if !errors.As(err, &se) || se.Code != string(outcome.Unauthorized) || se.Message != node.ErrAuthentication.Error() {
				t.Fatalf("a removed token's session ran on: %v (%#v)", err, se)
			}
			if got := srv.SessionCount(); got != sessions-1 {
				t.Fatalf("%d sessions after the removed token's request, want %d", got, sessions-1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c, err := client.Connect(ctx, addr, client.Options{Token: writeToken, Generation: g}); err == nil {
				c.Close()
				t.Fatal("a removed token opened a session")
			}
			chunk, _ := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(7)}})
			exec(t, reader, "CREATE TABLE IF NOT EXISTS promoted(i INTEGER)")
			if err := reader.Append(context.Background(), "main", "promoted", chunk); err != nil {
				t.Fatalf("the promoted token's append: %v", err)
			}
			// And back to read: refused at once, in the same session.
			keys.Replace((&tokens.Set{}).Add(readToken, tokens.Read))
			wantPermissionError(t, reader.Append(context.Background(), "main", "promoted", chunk), "append after demotion")
		})
	}
}

// TestDemotedDuringInsertStream: a Q3 insert stream opened with a write
// role and closed after the token lost it applies nothing.
func TestDemotedDuringInsertStream(t *testing.T) {
	addr, _, keys := startRoleServer(t)
	admin := connectWith(t, addr, wire.Q1, adminToken)
	exec(t, admin, "CREATE TABLE s(i INTEGER)")
	_, data := postBytes(t, addr, encode(t, wire.Q3, wire.Header{Type: wire.MsgConnectionRequest},
		&wire.ConnectionRequest{AuthString: writeToken, MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: 60}))
	h, _, err := wire.DecodeMessage(data, wire.Q3, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	id := h.ConnectionID
	q3 := func(m wire.Message) (int, wire.Message) {
		status, data := postBytes(t, addr, encode(t, wire.Q3, wire.Header{Type: m.Type(), ConnectionID: id}, m))
		if status != http.StatusOK {
			return status, nil
		}
		_, msg, err := wire.DecodeMessage(data, wire.Q3, wire.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return status, msg
	}
	chunk, _ := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(1)}})
	insert := &wire.PrepareRequest{SQL: "INSERT INTO s SELECT * FROM scan_data_from_quack_client('st1', NULL::STRUCT(col0 INTEGER), ordered := true)",
		QueryUUID: wire.Hugeint{Lower: 9}, InlineRows: wire.Idx(0)}
	if _, msg := q3(insert); msg == nil || msg.Type() != wire.MsgPrepareResponse {
		t.Fatalf("prepare: %+v", msg)
	}
	if _, msg := q3(&wire.SendDataRequest{StreamID: "st1", BatchIndex: wire.Idx(1), Chunks: []*wire.DataChunk{chunk}}); msg == nil || msg.Type() != wire.MsgSendDataResponse {
		t.Fatalf("data batch: %+v", msg)
	}
	keys.Replace((&tokens.Set{}).Add(writeToken, tokens.Read).Add(adminToken, tokens.Admin))
	status, msg := q3(&wire.SendDataRequest{StreamID: "st1", TotalBatches: wire.Idx(1)})
	wantError(t, status, msg, "needs the write role")
	if got := count(t, admin, "s"); got != 0 {
		t.Fatalf("a demoted token's stream inserted %d rows", got)
	}
	// The stream is gone: closing it again finds nothing.
	status, msg = q3(&wire.SendDataRequest{StreamID: "st1", TotalBatches: wire.Idx(1)})
	wantError(t, status, msg, "No active data stream")
}

// TestLocalExecutorAdmitsNoReadToken: LocalExecutor runs every text as it
// comes, so a server running it refuses read tokens at the handshake
// rather than let them write.
func TestLocalExecutorAdmitsNoReadToken(t *testing.T) {
	keys := tokens.NewKeyring(roleSet(t))
	addr, _ := startServer(t, func(c *node.Config) { c.Authenticator = node.KeyringAuth{Keyring: keys} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, g := range generations {
		c, err := client.Connect(ctx, addr, client.Options{Token: readToken, Generation: g})
		if err == nil {
			c.Close()
			t.Fatalf("Q%d: a read token opened a session on a LocalExecutor", g)
		}
		wantPermissionErrorText(t, err)
		w := connectWith(t, addr, g, writeToken)
		exec(t, w, "SELECT 1")
	}
}

func wantPermissionErrorText(t *testing.T, err error) {
	t.Helper()
	if !strings.Contains(err.Error(), "needs the write role") {
		t.Fatalf("got %v, want a Permission Error", err)
	}
}
