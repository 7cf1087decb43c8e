package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
)

// runTransferLeader moves leadership off the current leader, for
// maintenance of its host: to the voter named by --to, or to the most
// up-to-date one.
func runTransferLeader(args []string, stdout, stderr io.Writer) int {
	var to, key string
	c, code := parseAPIFlags("transfer-leader", args, 0, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&to, "to", "", "ID of the voter to lead next (default: the most up-to-date voter)")
		fs.StringVar(&key, "cluster-key", os.Getenv("DUCKRAFT_CLUSTER_KEY"), "the cluster key, hex (env DUCKRAFT_CLUSTER_KEY), to ask as a member; without it --token must be an admin token")
	})
	if c == nil {
		return code
	}
	api, addr := c.api, c.addr
	if key != "" {
		ck, err := clusterkey.Parse(key)
		if err != nil {
			fmt.Fprintln(stderr, "duckraft transfer-leader: --cluster-key:", err)
			return 2
		}
		api.Node = clusterkey.NodeAPI(ck)
	}
	res, err := clusterctl.TransferLeader(api, addr, to)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft transfer-leader:", err)
		return 1
	}
	fmt.Fprintf(stdout, "leadership moved from %s to %s\n", res.From, res.LeaderID)
	return 0
}
