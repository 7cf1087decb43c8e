// Package clusterctl is what the operator's CLI (cmd/duckraft) and the
// benchmarks (cmd/duckraft-bench) share to reach a running cluster from a
// command line: the --server flag's list of Quack servers, the address of
// the node API behind one of them, a member's status, and a leadership
// transfer. It links no DuckDB and no cluster internals (only node/client
// and routing/nodeapi), so that the CLI stays a small client.
package clusterctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// Servers is the value of a --server flag: Quack servers separated by
// commas, the flag repeatable. The first Set replaces the servers it was
// made with (a default, such as DUCKRAFT_SERVER's list); later ones add to
// it.
type Servers struct {
	list []string
	set  bool
}

// NewServers returns a Servers holding def's comma-separated servers until
// the flag is set.
func NewServers(def string) Servers { return Servers{list: split(def)} }

// List is the servers in the order given.
func (s *Servers) List() []string { return s.list }

func (s *Servers) String() string { return strings.Join(s.list, ",") }

// Set adds the servers of one use of the flag; a use that names none is an
// error, not a silent fall back to the default.
func (s *Servers) Set(v string) error {
	servers := split(v)
	if len(servers) == 0 {
		return errors.New("no server given")
	}
	if !s.set {
		s.list, s.set = nil, true
	}
	s.list = append(s.list, servers...)
	return nil
}

func split(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// APIAddr is the HOST:PORT of the node API that the Quack server given on
// the command line (quack:HOST[:PORT]) serves beside Quack, and whether it
// speaks HTTPS: where the Quack client would use TLS (any host but
// loopback).
func APIAddr(server string) (addr string, tls bool, err error) {
	u, err := client.ParseServer(server, nil)
	if err != nil {
		return "", false, fmt.Errorf("--server %q: %w", server, err)
	}
	tls = strings.HasPrefix(u, "https://")
	addr = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"), "/quack")
	return addr, tls, nil
}

// API is a client of the node API of the Quack server given on the
// command line, with the address to ask it at.
func API(server, token string) (*nodeapi.Client, string, error) {
	addr, tls, err := APIAddr(server)
	if err != nil {
		return nil, "", err
	}
	return &nodeapi.Client{Token: token, TLS: tls}, addr, nil
}

// StatusTimeout bounds one status request.
const StatusTimeout = 5 * time.Second

// Status fetches the status document of the member at addr.
func Status(api *nodeapi.Client, addr string) (nodeapi.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StatusTimeout)
	defer cancel()
	return api.Status(ctx, addr)
}

// LeaderWait bounds how long LeaderAddr waits for the cluster to have a
// leader: an election takes about a second.
const LeaderWait = 10 * time.Second

// LeaderAddr is the Quack address of the leader the member at addr knows,
// waiting up to LeaderWait for one while an election is under way (right
// after a transfer, say).
func LeaderAddr(api *nodeapi.Client, addr string) (string, error) {
	deadline := time.Now().Add(LeaderWait)
	for {
		st, err := Status(api, addr)
		if err != nil {
			return "", err
		}
		for _, m := range st.Members {
			if st.LeaderID != "" && m.ID == st.LeaderID && m.QuackAddr != "" {
				return m.QuackAddr, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s knows no leader (or not its Quack address) after %s", st.ID, LeaderWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// transferTimeout bounds one transfer request: the leader answers once the
// new leader took over.
const transferTimeout = 30 * time.Second

// TransferLeader asks the leader, found through the member at addr, to
// hand leadership to the voter to, or with to empty to the most up-to-date
// voter. If leadership moves between the lookup and the request, it looks
// again.
func TransferLeader(api *nodeapi.Client, addr, to string) (nodeapi.Transfer, error) {
	for refused := 0; ; {
		leader, err := LeaderAddr(api, addr)
		if err != nil {
			return nodeapi.Transfer{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
		res, err := api.TransferLeadership(ctx, leader, to)
		cancel()
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, outcome.ErrNotLeader) && refused < 3:
			// Leadership moved since the lookup: look again.
			refused++
			time.Sleep(100 * time.Millisecond)
		case res.From != "":
			return nodeapi.Transfer{}, fmt.Errorf("%s: %w", res.From, err)
		default:
			return nodeapi.Transfer{}, err
		}
	}
}
