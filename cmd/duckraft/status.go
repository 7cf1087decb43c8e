package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// runStatus prints the cluster's members as the given node sees them: a
// table, or with --json (or --format json) the node's status document.
func runStatus(args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	c, code := parseAPIFlags("status", args, 0, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the status document as JSON")
	})
	if c == nil {
		return code
	}
	if c.format != "duckbox" && c.format != "table" && c.format != "json" {
		fmt.Fprintf(stderr, "duckraft status: --format %q: status prints a table or json\n", c.format)
		return 2
	}
	st, err := clusterctl.Status(c.api, c.addr)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft status:", err)
		return 1
	}
	if asJSON || c.format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			fmt.Fprintln(stderr, "duckraft status:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "node %s: %s, leader %s, applied %d, commit %d", st.ID, st.State, st.LeaderID, st.Applied, st.Commit)
	if st.Version != "" {
		fmt.Fprintf(stdout, "; duckraftd %s", st.Version)
		if st.Engine != "" {
			fmt.Fprintf(stdout, ", DuckDB %s", st.Engine)
		}
	}
	fmt.Fprint(stdout, "\n\n")
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

// apiCommand is a parsed subcommand that talks to a node's API.
type apiCommand struct {
	*globals
	api  *nodeapi.Client
	addr string
	// args are the positional arguments.
	args []string
}

// parseAPIFlags parses the arguments of a subcommand that talks to a
// node's API: the global flags, those extra defines, and exactly nargs
// positional arguments, in any order. It returns nil and the exit status
// after it reported an error.
func parseAPIFlags(cmd string, args []string, nargs int, stderr io.Writer, extra func(*flag.FlagSet)) (*apiCommand, int) {
	g, pos, code := parseCommand(cmd, args, stderr, usage, extra)
	if g == nil {
		return nil, code
	}
	if len(pos) != nargs {
		fmt.Fprintf(stderr, "duckraft %s: %d arguments %q, want %d (see duckraft --help)\n", cmd, len(pos), pos, nargs)
		return nil, 2
	}
	ep := g.endpoints[0]
	api := &nodeapi.Client{Token: g.token, TLS: ep.secure()}
	return &apiCommand{globals: g, api: api, addr: ep.hostPort(), args: pos}, 0
}
