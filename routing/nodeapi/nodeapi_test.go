package nodeapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/wal"
)

func TestReadHeaderRoundTrip(t *testing.T) {
	for _, r := range []Read{{Strong: true}, {After: 0}, {After: 42}, {At: 7}} {
		got, ok, err := ReadFrom(r.Header())
		if !ok || err != nil || got != r {
			t.Errorf("%+v: parsed %+v %v %v", r, got, ok, err)
		}
	}
	if _, ok, err := ReadFrom(http.Header{}); ok || err != nil {
		t.Errorf("no header: %v %v", ok, err)
	}
	for _, v := range []string{"after x", "at 0", "strong 1", "later 5", "after", "after -1"} {
		if _, _, err := ReadFrom(http.Header{ReadHeader: {v}}); CodeOf(err) != CodeBadRequest {
			t.Errorf("%q: %v, want a bad request", v, err)
		}
	}
}

func TestErrorCodeRoundTrip(t *testing.T) {
	for _, e := range []*Error{{Code: CodeNotLeader, Message: "m"}, {Code: CodePinned, Index: 99, Message: "p"}} {
		// As a Quack client sees it.
		got, ok := AsError(&client.ServerError{Message: e.Message, Code: e.ErrorCode()})
		if !ok || *got != *e {
			t.Errorf("%+v came back as %+v", e, got)
		}
	}
	if _, ok := AsError(&client.ServerError{Message: "Catalog Error: no table"}); ok {
		t.Error("an error without a code has one")
	}
	if _, ok := AsError(&client.ServerError{Message: "x", Code: "pinned x"}); ok {
		t.Error("a malformed code was accepted")
	}
}

// TestClientAndHandlers runs the client against the handlers over HTTP.
func TestClientAndHandlers(t *testing.T) {
	const token, node = "tok", "node-credential"
	creds := Credentials{Client: token, Node: node}
	var applied []wal.Command
	mux := http.NewServeMux()
	mux.Handle(StatusPath, StatusHandler(creds, func(context.Context) (Status, error) {
		return Status{ID: "n1", LeaderID: "n2"}, nil
	}))
	mux.Handle(HashPath, HashHandler(creds, func(context.Context) (StateHash, error) {
		return StateHash{Index: 5, Hash: "abc"}, nil
	}))
	mux.Handle(TransferPath, TransferHandler(node, func(to string) (Transfer, error) {
		if to == "n9" {
			return Transfer{From: "n1", LeaderID: "n1"}, Errorf(CodeNoSuchVoter, "no voter %s", to)
		}
		return Transfer{From: "n1", LeaderID: to}, nil
	}))
	mux.Handle(WritePath, WriteHandler(node, func(_ context.Context, cmd wal.Command) (*wal.Result, error) {
		if s, ok := cmd.Entry.(wal.Statement); ok && s.SQL == "fail" {
			return nil, Errorf(CodeUnknownOutcome, "leadership lost")
		}
		applied = append(applied, cmd)
		return &wal.Result{Index: 7, RowsChanged: 1}, nil
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	c := &Client{Token: token, Node: node}

	if st, err := c.Status(ctx, addr); err != nil || st.ID != "n1" || st.LeaderID != "n2" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if h, err := c.Hash(ctx, addr); err != nil || h.Index != 5 || h.Hash != "abc" {
		t.Fatalf("Hash = %+v, %v", h, err)
	}
	if tr, err := c.TransferLeadership(ctx, addr, "n3"); err != nil || tr.LeaderID != "n3" {
		t.Fatalf("TransferLeadership = %+v, %v", tr, err)
	}
	if tr, err := c.TransferLeadership(ctx, addr, "n9"); CodeOf(err) != CodeNoSuchVoter || tr.LeaderID != "n1" {
		t.Fatalf("transfer to a non-voter = %+v, %v", tr, err)
	}
	cmd := wal.Command{Key: []byte("k"), Entry: wal.Txn{Entries: []wal.Entry{wal.Statement{SQL: "INSERT"},
		wal.Append{Schema: "main", Table: "t", Chunk: []byte{1}}}}}
	if res, err := c.Write(ctx, addr, cmd); err != nil || res.Index != 7 {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	if len(applied) != 1 || string(applied[0].Key) != "k" || len(applied[0].Entry.(wal.Txn).Entries) != 2 {
		t.Fatalf("the handler applied %+v", applied)
	}
	if _, err := c.Write(ctx, addr, wal.Command{Entry: wal.Statement{SQL: "fail"}}); CodeOf(err) != CodeUnknownOutcome {
		t.Fatalf("failed write: %v, want unknown outcome", err)
	}
	bad := &Client{Token: "wrong"}
	if _, err := bad.Status(ctx, addr); CodeOf(err) != CodeUnauthorized {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := bad.Write(ctx, addr, cmd); CodeOf(err) != CodeUnauthorized {
		t.Fatalf("wrong token, write: %v", err)
	}
	// A body that is not a wal batch is refused before anything applies.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+WritePath, strings.NewReader("not a batch"))
	req.Header.Set("Authorization", "Bearer "+node)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(ErrorHeader) != string(CodeBadRequest) {
		t.Fatalf("garbage write answered %s %q", resp.Status, resp.Header.Get(ErrorHeader))
	}
	// A node that is not there is unreachable, not a coded answer.
	srv.Close()
	if _, err := c.Write(ctx, addr, cmd); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("write to a closed server: %v", err)
	}
}

// TestCredentials: status and hash answer the client token and the node
// credential; forwarded writes and leadership transfer only the node
// credential, so a client holding the token cannot forward a raw batch.
func TestCredentials(t *testing.T) {
	const token, node = "tok", "node-credential"
	mux := http.NewServeMux()
	mux.Handle(StatusPath, StatusHandler(Credentials{Client: token, Node: node}, func(context.Context) (Status, error) {
		return Status{ID: "n1"}, nil
	}))
	mux.Handle(HashPath, HashHandler(Credentials{Client: token, Node: node}, func(context.Context) (StateHash, error) {
		return StateHash{Index: 1}, nil
	}))
	mux.Handle(TransferPath, TransferHandler(node, func(string) (Transfer, error) { return Transfer{From: "n1"}, nil }))
	applied := 0
	mux.Handle(WritePath, WriteHandler(node, func(context.Context, wal.Command) (*wal.Result, error) {
		applied++
		return &wal.Result{Index: 1}, nil
	}))
	// A node whose node credential is unset accepts no forwarded write,
	// not even one with an empty bearer.
	mux.Handle("/unset"+WritePath, http.StripPrefix("/unset", WriteHandler("", func(context.Context, wal.Command) (*wal.Result, error) {
		applied++
		return &wal.Result{}, nil
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	cmd := wal.Command{Entry: wal.Statement{SQL: "CREATE TABLE t(x INTEGER)"}}
	for _, tc := range []struct {
		name                  string
		client                *Client
		read, write, transfer bool
	}{
		{"client token", &Client{Token: token}, true, false, false},
		{"client token as node credential", &Client{Token: token, Node: token}, true, false, false},
		{"node credential", &Client{Node: node}, true, true, true},
		{"wrong", &Client{Token: "x", Node: "y"}, false, false, false},
		{"none", &Client{}, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error, want bool) {
				t.Helper()
				switch {
				case want && err != nil:
					t.Errorf("%s: %v", what, err)
				case !want && CodeOf(err) != CodeUnauthorized:
					t.Errorf("%s: %v, want %s", what, err, CodeUnauthorized)
				}
			}
			_, err := tc.client.Status(ctx, addr)
			check("status", err, tc.read)
			_, err = tc.client.Hash(ctx, addr)
			check("hash", err, tc.read)
			_, err = tc.client.Write(ctx, addr, cmd)
			check("write", err, tc.write)
			_, err = tc.client.TransferLeadership(ctx, addr, "")
			check("transfer", err, tc.transfer)
			_, err = tc.client.Write(ctx, addr+"/unset", cmd)
			check("write to a node without a node credential", err, false)
		})
	}
	if applied != 1 {
		t.Errorf("%d writes applied, want 1 (the node credential's)", applied)
	}
}
