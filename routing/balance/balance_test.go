package balance

import (
	"testing"
	"time"
)

func TestCost(t *testing.T) {
	for _, c := range []struct {
		name     string
		peer     Peer
		inflight int64
		want     int64
	}{
		{"idle replica", Peer{ID: "r", Replica: true, Applied: 1000}, 0, 0},
		{"idle follower", Peer{ID: "f", Applied: 1000}, 0, followerCost},
		{"idle leader", Peer{ID: "l", Leader: true, Applied: 1000}, 0, leaderCost},
		{"this node", Peer{ID: "self", Replica: true, Applied: 1000}, 0, -selfBonus},
		{"gossiped load and own requests", Peer{ID: "r", Replica: true, Applied: 1000, Load: 2}, 3, 5},
		{"lagging 250 entries", Peer{ID: "r", Replica: true, Applied: 750}, 0, 2},
		{"ahead of the known maximum", Peer{ID: "r", Replica: true, Applied: 2000}, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := New()
			b.Counter(c.peer.ID).Add(c.inflight)
			if got := b.Cost(c.peer, "self", 1000); got != c.want {
				t.Fatalf("Cost = %d, want %d", got, c.want)
			}
		})
	}
}

func TestCheapestSpreadsTies(t *testing.T) {
	b := New()
	peers := []Peer{{ID: "a", Replica: true}, {ID: "b", Replica: true}, {ID: "c"}}
	seen := map[string]int{}
	for range 200 {
		p, cost := b.Cheapest(peers, "self", 0)
		if cost != 0 {
			t.Fatalf("cheapest cost %d, want 0", cost)
		}
		seen[p.ID]++
	}
	// Each of the two tied replicas is chosen with probability 1/2; 200
	// draws miss one with probability 2^-199.
	if seen["a"] == 0 || seen["b"] == 0 || seen["c"] != 0 {
		t.Fatalf("choices %v: want both replicas and never the follower", seen)
	}
}

func TestSuspectExpires(t *testing.T) {
	b := New()
	now := time.Now()
	b.Suspect("a")
	if !b.Suspected("a", now) {
		t.Fatal("a just failed but is not suspected")
	}
	if b.Suspected("b", now) {
		t.Fatal("b never failed but is suspected")
	}
	if b.Suspected("a", now.Add(SuspectFor+time.Second)) {
		t.Fatal("a is still suspected after SuspectFor")
	}
}
