package daemon

import (
	"net"
	"net/http"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/routing"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// Sessions that any member serves and that outlive their node
// (node/forward.go, node/adopt.go, routing/migrate.go): the server signs
// its session ids and forwards a request for a session another member
// holds to it, over the members' network, with the node credential; the
// executor pushes its sessions' state to the other data nodes and adopts
// theirs.

// hopDialTimeout bounds connecting to the member a request is forwarded
// to, so a member that just died is given up quickly.
const hopDialTimeout = 2 * time.Second

// clusterSessions is the Quack server's part in them.
func (d *Daemon) clusterSessions() *node.ClusterSessions {
	t := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: hopDialTimeout}).DialContext,
		TLSClientConfig:     d.peerTLS,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &node.ClusterSessions{IDs: d.ids, HTTP: &http.Client{Transport: t}, TLS: d.peerTLS != nil}
}

// handleSessions serves the members' session endpoints.
func handleSessions(mux *http.ServeMux, exec *routing.Executor) {
	mux.Handle(nodeapi.SessionsPath, exec.SessionsHandler())
	mux.Handle(nodeapi.ReadIndexPath, exec.ReadIndexHandler())
}
