package clusterctl

import (
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/duckraft/duckraft/routing/nodeapi"
)

// TestServers: --server's first use replaces the default, later uses add
// to it, commas separate servers, and a use that names none is an error.
func TestServers(t *testing.T) {
	cases := []struct {
		name    string
		def     string
		args    []string
		want    []string
		wantErr string
	}{
		{"default", "quack:a,quack:b", nil, []string{"quack:a", "quack:b"}, ""},
		{"no default", "", nil, nil, ""},
		{"first use replaces the default", "quack:a", []string{"--server", "quack:x"}, []string{"quack:x"}, ""},
		{"repeated and comma-separated", "quack:a", []string{"--server", " quack:x, quack:y ", "--server=quack:z"}, []string{"quack:x", "quack:y", "quack:z"}, ""},
		{"empty entries dropped", "", []string{"--server", "quack:x,,"}, []string{"quack:x"}, ""},
		{"empty", "quack:a", []string{"--server", ""}, nil, "no server given"},
		{"only commas", "", []string{"--server", " , "}, nil, "no server given"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			s := NewServers(tc.def)
			fs.Var(&s, "server", "")
			err := fs.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.List(), tc.want) {
				t.Fatalf("servers %q, want %q", s.List(), tc.want)
			}
		})
	}
}

// TestAPIAddr: the node API listens beside Quack, over HTTPS wherever the
// Quack client would use TLS; a server that does not parse is an error
// naming it.
func TestAPIAddr(t *testing.T) {
	cases := []struct {
		server  string
		addr    string
		tls     bool
		wantErr string
	}{
		{"quack:127.0.0.1:9494", "127.0.0.1:9494", false, ""},
		{"quack://localhost:9504", "localhost:9504", false, ""},
		{"quack:db.example.com:443", "db.example.com:443", true, ""},
		{"quack:[::1]:9494", "[::1]:9494", false, ""},
		{"quack:", "", false, `--server "quack:"`},
		{"quack:h:port", "", false, "bad"},
	}
	for _, tc := range cases {
		t.Run(tc.server, func(t *testing.T) {
			addr, tls, err := APIAddr(tc.server)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || addr != tc.addr || tls != tc.tls {
				t.Fatalf("APIAddr = %q, %v, %v; want %q, %v", addr, tls, err, tc.addr, tc.tls)
			}
		})
	}
}

// A transfer asked right after an election started (the member knows no
// leader yet) waits for the new leader instead of failing. The member and
// the leader are one fake node API here; the CLI's TestTransferLeader hit
// this window about once in thirty runs.
func TestTransferLeaderWaitsForElection(t *testing.T) {
	var lookups atomic.Int32
	var addr string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case nodeapi.StatusPath:
			st := nodeapi.Status{ID: "n3", Members: []nodeapi.MemberStatus{{ID: "n2", QuackAddr: addr}}}
			if lookups.Add(1) > 3 {
				st.LeaderID = "n2"
			}
			json.NewEncoder(w).Encode(st)
		case nodeapi.TransferPath:
			json.NewEncoder(w).Encode(nodeapi.Transfer{From: "n2", LeaderID: "n1"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr = strings.TrimPrefix(srv.URL, "http://")

	res, err := TransferLeader(&nodeapi.Client{Token: "token"}, addr, "")
	if err != nil || res.From != "n2" || res.LeaderID != "n1" {
		t.Fatalf("transfer during an election: %+v, %v", res, err)
	}
	if n := lookups.Load(); n != 4 {
		t.Fatalf("%d status lookups, want 4 (three without a leader)", n)
	}
}
