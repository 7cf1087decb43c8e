package cluster

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const testToken = "test-token"

// startGossip starts a gossip node on a free loopback port, shut down at cleanup.
func startGossip(t *testing.T, id, token string, timing Timing, status func() Status) *Gossip {
	t.Helper()
	g, err := NewGossip(Config{
		Meta:     Meta{ID: id, RaftAddr: "raft-" + id, QuackAddr: "quack-" + id},
		BindAddr: "127.0.0.1:0",
		Token:    token,
		Status:   status,
		Timing:   timing,
		Logger:   testLogger(t).With("node", id),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Shutdown() })
	return g
}

func join(t *testing.T, g *Gossip, via *Gossip) {
	t.Helper()
	if _, err := g.Join(via.Addr()); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or timeout passes, and returns how long it took.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func memberOf(g *Gossip, id string) (Member, bool) {
	for _, m := range g.Members() {
		if m.Meta.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

func hasState(g *Gossip, id string, s State) bool {
	m, ok := memberOf(g, id)
	return ok && m.State == s
}

func TestGossipMembershipAndFailure(t *testing.T) {
	var applied atomic.Uint64
	a := startGossip(t, "a", testToken, LoopbackTiming(), func() Status {
		return Status{AppliedIndex: applied.Load(), Leader: true, LeaderID: "a"}
	})
	b := startGossip(t, "b", testToken, LoopbackTiming(), nil)
	c := startGossip(t, "c", testToken, LoopbackTiming(), nil)
	events := a.Subscribe()
	join(t, b, a)
	join(t, c, a)

	nodes := []*Gossip{a, b, c}
	for _, g := range nodes {
		waitFor(t, 5*time.Second, "three alive members", func() bool {
			ms := g.Members()
			return len(ms) == 3 && ms[0].State == StateAlive && ms[1].State == StateAlive && ms[2].State == StateAlive
		})
		m, _ := memberOf(g, "b")
		if m.Meta.RaftAddr != "raft-b" || m.Meta.QuackAddr != "quack-b" || m.GossipAddr != b.Addr() {
			t.Fatalf("%s sees b as %+v", g.LocalMeta().ID, m)
		}
	}

	applied.Store(42)
	d := waitFor(t, 5*time.Second, "applied index 42 at c", func() bool {
		m, _ := memberOf(c, "a")
		return m.Meta.AppliedIndex == 42 && m.Meta.Leader && m.Meta.LeaderID == "a"
	})
	t.Logf("applied index reached c in %s", d)

	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, g := range []*Gossip{a, b} {
		waitFor(t, 5*time.Second, "c dead", func() bool { return hasState(g, "c", StateDead) })
	}
	t.Logf("failure of c detected on a and b in %s", time.Since(start))

	seen := map[EventKind]bool{}
	for len(events) > 0 {
		if e := <-events; e.Member.Meta.ID == "c" {
			seen[e.Kind] = true
		}
	}
	if !seen[EventJoin] || !seen[EventFail] {
		t.Fatalf("events for c on a: %v, want join and fail", seen)
	}
}

func TestGossipWrongKeyCannotJoin(t *testing.T) {
	a := startGossip(t, "a", testToken, LoopbackTiming(), nil)
	other := startGossip(t, "x", "another-token", LoopbackTiming(), nil)
	if _, err := other.Join(a.Addr()); err == nil {
		t.Fatal("join with another token succeeded")
	}
	time.Sleep(500 * time.Millisecond)
	if _, ok := memberOf(a, "x"); ok {
		t.Fatal("a knows x")
	}
	if len(other.Members()) != 1 {
		t.Fatalf("x knows %v", other.Members())
	}
}

func TestGossipRejoinOnNewAddress(t *testing.T) {
	tests := []struct {
		name  string
		leave bool
	}{
		{"after leaving", true},
		{"after failing", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := startGossip(t, "a", testToken, LoopbackTiming(), nil)
			b := startGossip(t, "b", testToken, LoopbackTiming(), nil)
			c := startGossip(t, "c", testToken, LoopbackTiming(), nil)
			join(t, b, a)
			join(t, c, a)
			waitFor(t, 5*time.Second, "c alive at a", func() bool { return hasState(a, "c", StateAlive) })
			want := StateDead
			if tt.leave {
				want = StateLeft
				if err := c.Leave(time.Second); err != nil {
					t.Fatal(err)
				}
			}
			c.Shutdown()
			waitFor(t, 5*time.Second, "c "+want.String()+" at a", func() bool { return hasState(a, "c", want) })
			left, _ := memberOf(a, "c")

			c2 := startGossip(t, "c", testToken, LoopbackTiming(), nil)
			if c2.Addr() == c.Addr() {
				t.Fatal("new c has the old address")
			}
			join(t, c2, b)
			for _, g := range []*Gossip{a, b} {
				waitFor(t, 5*time.Second, "c alive on its new address", func() bool {
					m, _ := memberOf(g, "c")
					return m.State == StateAlive && m.GossipAddr == c2.Addr() && m.LastChange.After(left.LastChange)
				})
			}
		})
	}
}

func TestNewGossipErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no id", Config{BindAddr: "127.0.0.1:0", Token: "t"}, "ID is empty"},
		{"no key", Config{Meta: Meta{ID: "a"}, BindAddr: "127.0.0.1:0"}, ErrNoKey.Error()},
		{"short key", Config{Meta: Meta{ID: "a"}, BindAddr: "127.0.0.1:0", Key: []byte("short")}, "5 bytes"},
		{"bad address", Config{Meta: Meta{ID: "a"}, BindAddr: "nowhere", Token: "t"}, "gossip address"},
		{"meta too large", Config{Meta: Meta{ID: "a", RaftAddr: strings.Repeat("x", 600)}, BindAddr: "127.0.0.1:0", Token: "t"}, "larger than 512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGossip(tt.cfg)
			if err == nil {
				g.Shutdown()
				t.Fatal("NewGossip succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewGossip = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestMemberlistLogLevels(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n", "level=DEBUG msg=\"Stream connection from=127.0.0.1:1\""},
		{"[INFO] memberlist: Marking c as failed\n", "level=INFO msg=\"Marking c as failed\""},
		{"[WARN] memberlist: Was able to connect\n", "level=WARN msg=\"Was able to connect\""},
		{"[ERR] memberlist: Failed push/pull\n", "level=ERROR msg=\"Failed push/pull\""},
		{"no prefix\n", "level=INFO msg=\"no prefix\""},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		l := newStdLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			Level:       slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
		})))
		l.Print(tt.line)
		if got := strings.TrimSpace(buf.String()); got != tt.want {
			t.Errorf("%q logged as %q, want %q", tt.line, got, tt.want)
		}
	}
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestFailureDetectionLAN measures how long memberlist's LAN defaults take to declare a
// node dead. It takes up to half a minute, so it runs only with DUCKRAFT_LAN_TIMING=1.
func TestFailureDetectionLAN(t *testing.T) {
	if os.Getenv("DUCKRAFT_LAN_TIMING") == "" {
		t.Skip("set DUCKRAFT_LAN_TIMING=1 to measure failure detection with LAN timing")
	}
	a := startGossip(t, "a", testToken, LANTiming(), nil)
	b := startGossip(t, "b", testToken, LANTiming(), nil)
	c := startGossip(t, "c", testToken, LANTiming(), nil)
	join(t, b, a)
	join(t, c, a)
	waitFor(t, 10*time.Second, "c alive at a and b", func() bool {
		return hasState(a, "c", StateAlive) && hasState(b, "c", StateAlive)
	})
	c.Shutdown()
	d := waitFor(t, 60*time.Second, "c dead at a and b", func() bool {
		return hasState(a, "c", StateDead) && hasState(b, "c", StateDead)
	})
	t.Logf("LAN timing: failure detected on a and b in %s", d)
}
