package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/duckraft/duckraft/node/client"
)

// runStatus prints the cluster's members as the given node sees them.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("duckraft status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", envOr("DUCKRAFT_SERVER", "quack:127.0.0.1:9494"), "any member, as quack:HOST[:PORT]")
	token := fs.String("token", os.Getenv("DUCKRAFT_TOKEN"), "cluster token (env DUCKRAFT_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	addr, err := serverAddr(*server)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft status:", err)
		return 2
	}
	st, err := nodeStatus(addr, *token)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft status:", err)
		return 1
	}
	fmt.Fprintf(stdout, "node %s: %s, leader %s, applied %d, commit %d\n\n", st.ID, st.State, st.LeaderID, st.Applied, st.Commit)
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tSTATE\tQUACK\tRAFT\tAPPLIED\tLAG\tLOAD\tLEADER")
	for _, m := range st.Members {
		leader := ""
		if m.Leader {
			leader = "*"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", m.ID, m.Role, m.State, m.QuackAddr, m.RaftAddr, m.Applied, m.Lag, m.Load, leader)
	}
	w.Flush()
	return 0
}

// serverAddr turns a --server value (quack:HOST[:PORT]) into the HOST:PORT
// that serves a node's HTTP endpoints.
func serverAddr(server string) (string, error) {
	u, err := client.ParseServer(server, nil)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"), "/quack"), nil
}
