package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
)

// runHash prints every member's applied index and state hash, as the member
// named by --server lists them, so an operator can check that the replicas
// hold the same data: equal hashes at equal indexes mean equal schemas and
// rows. It exits 1 if a data node cannot be asked, and 3 if two nodes at
// the same applied index differ.
func runHash(args []string, stdout, stderr io.Writer) int {
	c, code := parseAPIFlags("hash", args, 0, stderr, nil)
	if c == nil {
		return code
	}
	api, addr := c.api, c.addr
	st, err := clusterctl.Status(api, addr)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft hash:", err)
		return 1
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tAPPLIED\tROWS\tHASH")
	exit := 0
	byIndex := map[uint64]string{}
	for _, m := range st.Members {
		if m.Role == "router" || m.QuackAddr == "" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterctl.StatusTimeout)
		h, err := api.Hash(ctx, m.QuackAddr)
		cancel()
		if err != nil {
			fmt.Fprintf(w, "%s\t-\t-\t%v\n", m.ID, err)
			exit = max(exit, 1)
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", m.ID, h.Index, h.Rows, h.Hash)
		if other, ok := byIndex[h.Index]; ok && other != h.Hash {
			exit = 3
		}
		byIndex[h.Index] = h.Hash
	}
	w.Flush()
	if exit == 3 {
		fmt.Fprintln(stderr, "duckraft hash: nodes at the same applied index hold different data")
	}
	return exit
}
