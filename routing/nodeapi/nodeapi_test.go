package nodeapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/tokens"
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

// TestEveryCodeRoundTrips: an error wrapping any code's sentinel, answered
// by a handler, comes back from the client with that code, wrapping the
// same sentinel and with the same message; the index of behind and pinned
// answers survives too. This is the one encoding a forwarded write, a
// transfer, a removal and a session lookup answer with.
func TestEveryCodeRoundTrips(t *testing.T) {
	const node = "node-credential"
	srv := httptest.NewServer(WriteHandler(node, func(_ context.Context, cmd wal.Command) (*wal.Result, error) {
		code := outcome.Code(cmd.Entry.(wal.Statement).SQL)
		if code == CodeBehind {
			return nil, &Error{Code: code, Index: 42, Message: "node n1 is at 42"}
		}
		return nil, fmt.Errorf("node n1 refused %s: %w", code, code.Err())
	}))
	defer srv.Close()
	c := &Client{Node: node}
	for _, code := range outcome.Codes() {
		t.Run(string(code), func(t *testing.T) {
			_, err := c.Write(context.Background(), strings.TrimPrefix(srv.URL, "http://"), wal.Command{Entry: wal.Statement{SQL: string(code)}})
			want := fmt.Sprintf("node n1 refused %s: %v", code, code.Err())
			if code == CodeBehind {
				want = "node n1 is at 42"
			}
			e, ok := AsError(err)
			switch {
			case !ok || e.Code != code:
				t.Fatalf("came back as %#v (%v), want code %s", e, err, code)
			case !errors.Is(err, code.Err()):
				t.Errorf("%v does not wrap %v", err, code.Err())
			case err.Error() != want:
				t.Errorf("message %q, want %q", err.Error(), want)
			case code == CodeBehind && e.Index != 42:
				t.Errorf("index %d, want 42", e.Index)
			}
			// The same code in a Quack answer's header.
			se := &client.ServerError{Message: want, Code: e.ErrorCode()}
			if !errors.Is(se, code.Err()) || CodeOf(se) != code {
				t.Errorf("as a Quack answer: %#v wraps %v, code %q", se, errors.Unwrap(se), CodeOf(se))
			}
		})
	}
}

// TestClientAndHandlers runs the client against the handlers over HTTP.
func TestClientAndHandlers(t *testing.T) {
	const token, node = "tok", "node-credential"
	creds := Credentials{Tokens: (&tokens.Set{}).Add(token, tokens.Read), Node: node}
	var applied []wal.Command
	mux := http.NewServeMux()
	mux.Handle(StatusPath, StatusHandler(creds, func(context.Context) (Status, error) {
		return Status{ID: "n1", LeaderID: "n2"}, nil
	}))
	mux.Handle(HashPath, HashHandler(creds, func(context.Context) (StateHash, error) {
		return StateHash{Index: 5, Hash: "abc"}, nil
	}))
	mux.Handle(TransferPath, TransferHandler(creds, func(to string) (Transfer, error) {
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

// TestCredentials: status and hash answer every client token and the node
// credential; leadership transfer an admin token and the node credential,
// refusing lower roles as forbidden; forwarded writes only the node
// credential, so a client holding even an admin token cannot forward a raw
// batch past the checks of its statements.
func TestCredentials(t *testing.T) {
	const node = "node-credential"
	const readTok, writeTok, adminTok = "read-token", "write-token", "admin-token"
	creds := Credentials{Tokens: (&tokens.Set{}).Add(readTok, tokens.Read).Add(writeTok, tokens.Write).Add(adminTok, tokens.Admin), Node: node}
	mux := http.NewServeMux()
	mux.Handle(StatusPath, StatusHandler(creds, func(context.Context) (Status, error) {
		return Status{ID: "n1"}, nil
	}))
	mux.Handle(HashPath, HashHandler(creds, func(context.Context) (StateHash, error) {
		return StateHash{Index: 1}, nil
	}))
	transfers := 0
	mux.Handle(TransferPath, TransferHandler(creds, func(string) (Transfer, error) {
		transfers++
		return Transfer{From: "n1"}, nil
	}))
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
	const ok, unauthorized, forbidden = "", CodeUnauthorized, CodeForbidden
	for _, tc := range []struct {
		name                  string
		client                *Client
		read, write, transfer Code
	}{
		{"read token", &Client{Token: readTok}, ok, unauthorized, forbidden},
		{"write token", &Client{Token: writeTok}, ok, unauthorized, forbidden},
		{"admin token", &Client{Token: adminTok}, ok, unauthorized, ok},
		{"read token as node credential", &Client{Token: readTok, Node: readTok}, ok, unauthorized, forbidden},
		{"admin token as node credential", &Client{Node: adminTok}, ok, unauthorized, ok},
		{"node credential", &Client{Node: node}, ok, ok, ok},
		{"wrong", &Client{Token: "x", Node: "y"}, unauthorized, unauthorized, unauthorized},
		{"a token's prefix", &Client{Token: adminTok[:5]}, unauthorized, unauthorized, unauthorized},
		{"none", &Client{}, unauthorized, unauthorized, unauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error, want Code) {
				t.Helper()
				switch {
				case want == ok && err != nil:
					t.Errorf("%s: %v", what, err)
				case want != ok && CodeOf(err) != want:
					t.Errorf("%s: %v, want %s", what, err, want)
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
			check("write to a node without a node credential", err, unauthorized)
		})
	}
	if applied != 1 {
		t.Errorf("%d writes applied, want 1 (the node credential's)", applied)
	}
	if transfers != 3 {
		t.Errorf("%d transfers ran, want 3 (admin token twice, node credential)", transfers)
	}
}

// TestRequireStatus: refusals carry their code and HTTP status, a
// forbidden one names the role needed and never the token.
func TestRequireStatus(t *testing.T) {
	const secret = "write-token-secret"
	creds := Credentials{Tokens: (&tokens.Set{}).Add(secret, tokens.Write)}
	h := Require(creds, tokens.Admin, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran for a refused request")
	})
	for _, tc := range []struct {
		auth   string
		status int
		code   Code
	}{
		{"Bearer " + secret, http.StatusForbidden, CodeForbidden},
		{"Bearer other", http.StatusUnauthorized, CodeUnauthorized},
		{secret, http.StatusUnauthorized, CodeUnauthorized},
		{"Basic " + secret, http.StatusUnauthorized, CodeUnauthorized},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/x", nil)
		req.Header.Set("Authorization", tc.auth)
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != tc.status || rec.Header().Get(ErrorHeader) != string(tc.code) || strings.Contains(body, secret) {
			t.Errorf("%s: %d %q %q", tc.code, rec.Code, rec.Header().Get(ErrorHeader), body)
		}
		if tc.code == CodeForbidden && !strings.Contains(body, "needs the admin role; this token has the write role") {
			t.Errorf("forbidden answer %q does not name the role", body)
		}
	}
}
