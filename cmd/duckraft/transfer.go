package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/routing/nodeapi"
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
	res, err := transferLeader(api, addr, to)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft transfer-leader:", err)
		return 1
	}
	fmt.Fprintf(stdout, "leadership moved from %s to %s\n", res.From, res.LeaderID)
	return 0
}

// leaderWait bounds how long transfer-leader waits for the cluster to have
// a leader: an election takes about a second.
const leaderWait = 10 * time.Second

// transferTimeout bounds one transfer request: the leader answers once the
// new leader took over.
const transferTimeout = 30 * time.Second

// transferLeader asks the leader, found through the member at addr, to
// hand leadership over. While the member knows no leader (an election is
// under way, say, right after another transfer) it waits for one; if
// leadership moves between the lookup and the request, it looks again.
func transferLeader(api *nodeapi.Client, addr, to string) (nodeapi.Transfer, error) {
	deadline := time.Now().Add(leaderWait)
	for refused := 0; ; {
		st, err := statusOf(api, addr)
		if err != nil {
			return nodeapi.Transfer{}, err
		}
		if st.LeaderID == "" {
			if time.Now().After(deadline) {
				return nodeapi.Transfer{}, fmt.Errorf("%s knows no leader after %s", st.ID, leaderWait)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		quack := ""
		for _, m := range st.Members {
			if m.ID == st.LeaderID {
				quack = m.QuackAddr
			}
		}
		if quack == "" {
			return nodeapi.Transfer{}, fmt.Errorf("no Quack address known for leader %s", st.LeaderID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
		res, err := api.TransferLeadership(ctx, quack, to)
		cancel()
		switch {
		case err == nil:
			return res, nil
		case nodeapi.CodeOf(err) == nodeapi.CodeNotLeader && refused < 3:
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
