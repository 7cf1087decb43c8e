package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// runHash prints every member's applied index and state hash, as the member
// named by --server lists them, so an operator can check that the replicas
// hold the same data: equal hashes at equal indexes mean equal schemas and
// rows. It exits 1 if a data node cannot be asked, and 3 if two nodes at
// the same applied index differ.
func runHash(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("duckraft hash", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", envOr("DUCKRAFT_SERVER", "quack:127.0.0.1:9494"), "any member, as quack:HOST[:PORT]")
	token := fs.String("token", os.Getenv("DUCKRAFT_TOKEN"), "cluster token (env DUCKRAFT_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	api, addr, err := serverAPI(*server, *token)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft hash:", err)
		return 2
	}
	st, err := statusOf(api, addr)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft hash:", err)
		return 1
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tAPPLIED\tROWS\tHASH")
	code := 0
	byIndex := map[uint64]string{}
	for _, m := range st.Members {
		if m.Role == "router" || m.QuackAddr == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
		h, err := api.Hash(ctx, m.QuackAddr)
		cancel()
		if err != nil {
			fmt.Fprintf(w, "%s\t-\t-\t%v\n", m.ID, err)
			code = max(code, 1)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", m.ID, h.Index, h.Rows, h.Hash)
		if other, ok := byIndex[h.Index]; ok && other != h.Hash {
			code = 3
		}
		byIndex[h.Index] = h.Hash
	}
	w.Flush()
	if code == 3 {
		fmt.Fprintln(stderr, "duckraft hash: nodes at the same applied index hold different data")
	}
	return code
}
