package node_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

// probeExecutor runs statements locally, remembers the request header each
// statement arrived with, fails "SELECT 'coded'" with a coded error, and
// records which sessions ended.
type probeExecutor struct {
	node.LocalExecutor
	mu     sync.Mutex
	header http.Header
	ended  []string
}

type codedError struct{ code string }

func (e codedError) Error() string     { return "refused with a code" }
func (e codedError) ErrorCode() string { return e.code }

func (p *probeExecutor) Query(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	p.mu.Lock()
	p.header = node.RequestHeader(ctx)
	p.mu.Unlock()
	if sql == "SELECT 'coded'" {
		return nil, codedError{"pinned 42"}
	}
	if code, ok := strings.CutPrefix(sql, "-- refuse "); ok {
		return nil, fmt.Errorf("refused for the test: %w", outcome.Code(code).Err())
	}
	return p.LocalExecutor.Query(ctx, s, sql)
}

func (p *probeExecutor) EndSession(s *node.Session) {
	p.mu.Lock()
	p.ended = append(p.ended, s.ID())
	p.mu.Unlock()
}

func TestExecutorSeesRequestHeaderAndCodes(t *testing.T) {
	probe := &probeExecutor{}
	addr, _ := startServer(t, func(c *node.Config) { c.Executor = probe })
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		t.Run(fmt.Sprintf("Q%d", g), func(t *testing.T) {
			c := connect(t, addr, g)
			ctx := client.WithHeader(context.Background(), http.Header{"Duckraft-Read": {"after 7"}})
			if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			probe.mu.Lock()
			got := probe.header.Get("Duckraft-Read")
			probe.mu.Unlock()
			if got != "after 7" {
				t.Fatalf("executor saw Duckraft-Read %q, want %q", got, "after 7")
			}
			_, err := c.Exec(context.Background(), "SELECT 'coded'")
			var se *client.ServerError
			if !errors.As(err, &se) || se.Code != "pinned 42" || se.Message != "refused with a code" {
				t.Fatalf("coded error arrived as %#v (%v)", se, err)
			}
			// A plain SQL error has no code.
			_, err = c.Exec(context.Background(), "SELECT * FROM missing_table")
			if !errors.As(err, &se) || se.Code != "" {
				t.Fatalf("SQL error arrived as %#v (%v)", se, err)
			}
		})
	}
}

// TestEveryCodeReachesTheClient: an Executor's error that wraps any of
// outcome's sentinels is answered with the sentinel's code, and the Go
// client's error wraps the same sentinel, with the message intact.
func TestEveryCodeReachesTheClient(t *testing.T) {
	addr, _ := startServer(t, func(c *node.Config) { c.Executor = &probeExecutor{} })
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		c := connect(t, addr, g)
		for _, code := range outcome.Codes() {
			_, err := c.Exec(context.Background(), "-- refuse "+string(code))
			var se *client.ServerError
			want := "refused for the test: " + code.Err().Error()
			switch {
			case !errors.As(err, &se) || se.Code != string(code):
				t.Errorf("Q%d %s: arrived as %#v (%v)", g, code, se, err)
			case !errors.Is(err, code.Err()):
				t.Errorf("Q%d %s: %v does not wrap %v", g, code, err, code.Err())
			case se.Message != want:
				t.Errorf("Q%d %s: message %q, want %q", g, code, se.Message, want)
			}
		}
	}
}

func TestExecutorHearsSessionEnd(t *testing.T) {
	probe := &probeExecutor{}
	addr, srv := startServer(t, func(c *node.Config) { c.Executor = probe })
	c := connect(t, addr, wire.Q1)
	exec(t, c, "SELECT 1")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing the server ends the sessions still open.
	q3 := connect(t, addr, wire.Q3)
	exec(t, q3, "SELECT 1")
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// Both ends are reported before Close and the DISCONNECT's answer return.
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if len(probe.ended) != 2 {
		t.Fatalf("executor heard %d session ends, want 2 (one disconnect, one server close)", len(probe.ended))
	}
}
