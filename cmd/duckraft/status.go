package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// runStatus prints the cluster's members as the given node sees them.
func runStatus(args []string, stdout, stderr io.Writer) int {
	api, addr, code := parseAPIFlags("status", args, stderr, nil)
	if api == nil {
		return code
	}
	st, err := statusOf(api, addr)
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

// parseAPIFlags parses the flags of a subcommand that talks to a node's
// API: --server and --token, and those extra defines. It returns the
// client and the node's address, or nil and the exit status after it
// reported the error.
func parseAPIFlags(cmd string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*nodeapi.Client, string, int) {
	fs := flag.NewFlagSet("duckraft "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", envOr("DUCKRAFT_SERVER", "quack:127.0.0.1:9494"), "any member, as quack:HOST[:PORT]")
	token := fs.String("token", os.Getenv("DUCKRAFT_TOKEN"), "cluster token (env DUCKRAFT_TOKEN)")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", 2
	}
	api, addr, err := serverAPI(*server, *token)
	if err != nil {
		fmt.Fprintf(stderr, "duckraft %s: %v\n", cmd, err)
		return nil, "", 2
	}
	return api, addr, 0
}

// serverAPI turns a --server value (quack:HOST[:PORT]) into a client of
// the node's API and the HOST:PORT it serves: HTTPS where the Quack client
// would use TLS (any host but loopback).
func serverAPI(server, token string) (*nodeapi.Client, string, error) {
	u, err := client.ParseServer(server, nil)
	if err != nil {
		return nil, "", err
	}
	tls := strings.HasPrefix(u, "https://")
	addr := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"), "/quack")
	return &nodeapi.Client{Token: token, TLS: tls}, addr, nil
}

// statusTimeout bounds one status request.
const statusTimeout = 5 * time.Second

// statusOf fetches the status document of the node at addr.
func statusOf(api *nodeapi.Client, addr string) (nodeapi.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	return api.Status(ctx, addr)
}

// nodeStatus fetches the status of a node of a local cluster (plain HTTP).
func nodeStatus(addr, token string) (nodeapi.Status, error) {
	return statusOf(&nodeapi.Client{Token: token}, addr)
}
