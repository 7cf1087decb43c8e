package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/duckraft/duckraft/routing"
)

// runTransferLeader moves leadership off the current leader, for
// maintenance of its host: to the voter named by --to, or to the most
// up-to-date one.
func runTransferLeader(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("duckraft transfer-leader", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", envOr("DUCKRAFT_SERVER", "quack:127.0.0.1:9494"), "any member, as quack:HOST[:PORT]")
	token := fs.String("token", os.Getenv("DUCKRAFT_TOKEN"), "cluster token (env DUCKRAFT_TOKEN)")
	to := fs.String("to", "", "ID of the voter to lead next (default: the most up-to-date voter)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	addr, err := serverAddr(*server)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft transfer-leader:", err)
		return 2
	}
	res, err := transferLeader(addr, *token, *to)
	if err != nil {
		fmt.Fprintln(stderr, "duckraft transfer-leader:", err)
		return 1
	}
	fmt.Fprintf(stdout, "leadership moved from %s to %s\n", res.From, res.LeaderID)
	return 0
}

// transferLeader asks the leader, found through the member at addr, to
// hand leadership over. If leadership moves between the status lookup and
// the request, it asks the leader the refusal names, once.
func transferLeader(addr, token, to string) (routing.Transfer, error) {
	st, err := nodeStatus(addr, token)
	if err != nil {
		return routing.Transfer{}, err
	}
	leader := st.LeaderID
	for attempt := 0; ; attempt++ {
		if leader == "" {
			return routing.Transfer{}, fmt.Errorf("%s knows no leader", st.ID)
		}
		quack := ""
		for _, m := range st.Members {
			if m.ID == leader {
				quack = m.QuackAddr
			}
		}
		if quack == "" {
			return routing.Transfer{}, fmt.Errorf("no Quack address known for leader %s", leader)
		}
		res, code, err := routing.RequestTransfer(&http.Client{Timeout: 30 * time.Second}, quack, token, to)
		if err != nil {
			return routing.Transfer{}, err
		}
		switch {
		case code == http.StatusOK:
			return res, nil
		case code == http.StatusConflict && attempt == 0 && res.LeaderID != leader:
			leader = res.LeaderID
		default:
			return routing.Transfer{}, fmt.Errorf("%s: %s", res.From, res.Error)
		}
	}
}
