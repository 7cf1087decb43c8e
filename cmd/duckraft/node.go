package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// runNode runs `duckraft node remove ID`: the leader, found through the
// member named by --server, tells the node to leave and takes it out of the
// Raft configuration (docs/cli.md says what removal means).
func runNode(args []string, stdout, stderr io.Writer) int {
	c, code := parseAPIFlags("node", args, 2, stderr, nil)
	if c == nil {
		return code
	}
	if c.args[0] != "remove" {
		fmt.Fprintf(stderr, "duckraft node: unknown subcommand %q (duckraft node remove ID)\n", c.args[0])
		return 2
	}
	res, err := removeNode(c.api, c.addr, c.args[1])
	if err != nil {
		fmt.Fprintln(stderr, "duckraft node remove:", err)
		return 1
	}
	how := "it left gossip and stopped"
	if !res.Left {
		how = "gossip already saw it dead or gone"
	}
	fmt.Fprintf(stdout, "%s removed from the cluster by leader %s (%s)\n", res.ID, res.LeaderID, how)
	return 0
}

// removeTimeout bounds one removal: the leader waits up to 15 s for gossip
// to see the node go, then for Raft to commit the new configuration.
const removeTimeout = 45 * time.Second

// removeNode asks the leader, found through the member at addr, to remove
// member id; if leadership moves between the lookup and the request, it
// looks again.
func removeNode(api *nodeapi.Client, addr, id string) (nodeapi.Removal, error) {
	for refused := 0; ; refused++ {
		leader, err := clusterctl.LeaderAddr(api, addr)
		if err != nil {
			return nodeapi.Removal{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
		res, err := api.Remove(ctx, leader, id)
		cancel()
		if errors.Is(err, outcome.ErrNotLeader) && refused < 3 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return res, err
	}
}
