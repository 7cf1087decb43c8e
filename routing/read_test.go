package routing

import (
	"context"
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/balance"
	"github.com/duckraft/duckraft/wal"
)

func TestSplitTable(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT * FROM t":                  "t",
		"select * from main.t;":            "main.t",
		` SELECT  *  FROM "my ""t"" x" `:   `"my ""t"" x"`,
		"SELECT * FROM db.main.lineitem\n": "db.main.lineitem",
	} {
		if got, ok := splitTable(sqltext.Parse(sql)); !ok || got != want {
			t.Errorf("%q: %q %v, want %q", sql, got, ok, want)
		}
	}
	for _, sql := range []string{"SELECT * FROM t WHERE a = 1", "SELECT a FROM t", "SELECT * FROM t ORDER BY a",
		"SELECT * FROM t LIMIT 5", "SELECT * FROM t, u", "SELECT * FROM read_csv('x')"} {
		if got, ok := splitTable(sqltext.Parse(sql)); ok {
			t.Errorf("%q split as %q", sql, got)
		}
	}
}

func TestSplitSetting(t *testing.T) {
	if n, ok, err := splitSetting(sqltext.Parse("SET duckraft_split_scan = 3")); !ok || err != nil || n != 3 {
		t.Errorf("got %d %v %v", n, ok, err)
	}
	if _, ok, err := splitSetting(sqltext.Parse("set duckraft_split_scan to '99'")); !ok || err == nil {
		t.Errorf("99 shares accepted: %v %v", ok, err)
	}
	if _, ok, _ := splitSetting(sqltext.Parse("SET threads = 3")); ok {
		t.Error("another setting recognised")
	}
}

// fakeStore is a follower at a fixed applied index.
type fakeStore struct {
	applied uint64
	leader  string
}

func (f fakeStore) Execute(context.Context, wal.Command) (*wal.Result, error) {
	return nil, replication.ErrNotLeader
}
func (f fakeStore) Prove(context.Context, wal.Command, []sqltext.Statement) error {
	return replication.ErrNotLeader
}
func (f fakeStore) IsLeader() bool                               { return false }
func (f fakeStore) LeaderID() string                             { return f.leader }
func (f fakeStore) AppliedThrough() uint64                       { return f.applied }
func (f fakeStore) CommitIndex() uint64                          { return f.applied }
func (f fakeStore) WaitForApplied(context.Context, uint64) error { return nil }
func (f fakeStore) ReadIndex(context.Context) (uint64, error)    { return 0, replication.ErrNotLeader }

type fakeDir []Peer

func (d fakeDir) QuackAddr(id string) (string, bool) {
	for _, p := range d {
		if p.ID == id {
			return p.QuackAddr, true
		}
	}
	return "", false
}
func (d fakeDir) Peers() []Peer { return append([]Peer(nil), d...) }

// testReader is the reader of node self, which sees the nodes of dir.
func testReader(dir fakeDir, self string, router bool) *reader {
	return &reader{members: &members{id: self, router: router, dir: dir, store: fakeStore{applied: 100, leader: "v1"},
		bal: balance.New(), maxStaleness: 10, load: func() uint64 { return 0 }}}
}

func TestPickPrefersReplicasAndSticks(t *testing.T) {
	dir := fakeDir{
		{ID: "v1", Applied: 100},
		{ID: "v2", Applied: 100},
		{ID: "r1", Replica: true, Applied: 100},
		{ID: "r2", Replica: true, Applied: 50}, // far behind
	}
	e := testReader(dir, "v2", false)
	st := &sessionState{}
	p, req, ok := e.pick(st, Session, 90, map[string]bool{})
	if !ok || p.ID != "r1" || req.After != 90 {
		t.Fatalf("session read picked %s %+v %v, want r1 after 90", p.ID, req, ok)
	}
	// A failed try falls back without moving the session's home.
	p, _, _ = e.pick(st, Session, 90, map[string]bool{"r1": true})
	if p.ID != "v2" || st.home != "r1" {
		t.Fatalf("fallback picked %s, home %s; want v2 (self) and home r1", p.ID, st.home)
	}
	// Load on r1 from this node is not enough to leave it...
	e.members.bal.Counter("r1").Add(3)
	if p, _, _ = e.pick(st, Session, 90, map[string]bool{}); p.ID != "r1" {
		t.Fatalf("sticky read picked %s", p.ID)
	}
	// ...much more is.
	e.members.bal.Counter("r1").Add(10)
	if p, _, _ = e.pick(st, Session, 90, map[string]bool{}); p.ID == "r1" || st.home == "r1" {
		t.Fatalf("overloaded home kept: %s", p.ID)
	}
	if p, req, _ := e.pick(st, Strong, 0, map[string]bool{}); p.ID != "v1" || !req.Strong {
		t.Fatalf("strong read picked %s %+v", p.ID, req)
	}
	// A router never picks itself.
	r := testReader(append(dir, Peer{ID: "me", Replica: true, Applied: 100}), "me", true)
	for range 20 {
		if p, _, _ := r.pick(&sessionState{}, Any, 0, map[string]bool{}); p.ID == "me" {
			t.Fatal("router picked itself")
		}
	}
}
