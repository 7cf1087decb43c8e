package routing

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
)

// StatusPath serves a node's view of the cluster as JSON (GET, with the
// cluster token as a bearer token).
const StatusPath = "/duckraft/v1/status"

// Status is a node's view of itself and of the cluster.
type Status struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	LeaderID string `json:"leader_id"`
	Applied  uint64 `json:"applied_index"`
	Commit   uint64 `json:"commit_index"`
	// Reads counts the reads this node ran itself (its clients' and those
	// routed to it); Load is what it gossips as its load.
	Reads uint64 `json:"reads"`
	Load  uint64 `json:"load"`
	// Members are the nodes this node knows, from gossip and Raft.
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one node as seen from another.
type MemberStatus struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	State     string `json:"state"`
	RaftAddr  string `json:"raft_addr"`
	QuackAddr string `json:"quack_addr"`
	Applied   uint64 `json:"applied_index"`
	Lag       uint64 `json:"lag"`
	Load      int    `json:"load"`
	Leader    bool   `json:"leader"`
	// InRaft and Voter describe the member's place in the Raft
	// configuration, as the reporting node knows it.
	InRaft bool `json:"in_raft"`
	Voter  bool `json:"voter"`
}

// HashPath serves the node's state hash as JSON: a digest of its schema and
// rows at its applied index, equal on nodes that hold equal data.
const HashPath = "/duckraft/v1/hash"

// JSONHandler serves what get returns as JSON to requests that carry the
// cluster token as a bearer token.
func JSONHandler(token string, get func(ctx context.Context) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r, token) {
			http.Error(w, "Authentication failed", http.StatusUnauthorized)
			return
		}
		v, err := get(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	})
}

// bearerOK reports whether r carries the cluster token as a bearer token,
// compared in constant time.
func bearerOK(r *http.Request, token string) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) == 1
}
