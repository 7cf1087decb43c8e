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

// leaderWait bounds how long transfer-leader waits for the cluster to have
// a leader: an election takes about a second.
const leaderWait = 10 * time.Second

// transferLeader asks the leader, found through the member at addr, to
// hand leadership over. While the member knows no leader (an election is
// under way, say, right after another transfer) it waits for one; if
// leadership moves between the lookup and the request, it looks again.
func transferLeader(addr, token, to string) (routing.Transfer, error) {
	deadline := time.Now().Add(leaderWait)
	for refused := 0; ; {
		st, err := nodeStatus(addr, token)
		if err != nil {
			return routing.Transfer{}, err
		}
		if st.LeaderID == "" {
			if time.Now().After(deadline) {
				return routing.Transfer{}, fmt.Errorf("%s knows no leader after %s", st.ID, leaderWait)
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
			return routing.Transfer{}, fmt.Errorf("no Quack address known for leader %s", st.LeaderID)
		}
		res, code, err := routing.RequestTransfer(&http.Client{Timeout: 30 * time.Second}, quack, token, to)
		if err != nil {
			return routing.Transfer{}, err
		}
		switch {
		case code == http.StatusOK:
			return res, nil
		case code == http.StatusConflict && refused < 3:
			refused++
			time.Sleep(100 * time.Millisecond)
		default:
			return routing.Transfer{}, fmt.Errorf("%s: %s", res.From, res.Error)
		}
	}
}
