package routing

import (
	"errors"
	"fmt"
	"testing"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// TestRetryIsDecidedBySentinels: for every code, whether a write or a read
// is tried again is the same for this node's own error, a leader's node
// API answer and another node's Quack answer: the sentinel decides.
func TestRetryIsDecidedBySentinels(t *testing.T) {
	writes := map[outcome.Code]bool{outcome.NotLeader: true, outcome.UnknownOutcome: true, outcome.ApplyStalled: true}
	reads := map[outcome.Code]bool{outcome.NotLeader: true, outcome.Behind: true, outcome.Pinned: true,
		outcome.UnknownSession: true, outcome.SessionExpired: true, outcome.TooManySessions: true,
		outcome.SessionLost: true, outcome.SessionMoving: true, outcome.Busy: true}
	for _, code := range append(outcome.Codes(), "from_a_newer_build") {
		forms := []struct {
			name string
			err  error
		}{
			{"a node API answer", fmt.Errorf("forward: %w", &nodeapi.Error{Code: code, Message: "m"})},
			{"a Quack answer", fmt.Errorf("read on n2: %w", &client.ServerError{Code: outcome.Header(code, 7), Message: "m"})},
		}
		if s := code.Err(); s != nil {
			forms = append(forms, struct {
				name string
				err  error
			}{"this node's own", fmt.Errorf("here: %w", s)})
		}
		for _, f := range forms {
			if got := retryableWrite(f.err); got != writes[code] {
				t.Errorf("%s as %s: write retried %v, want %v", code, f.name, got, writes[code])
			}
			if got := retryableRead(f.err); got != reads[code] {
				t.Errorf("%s as %s: read retried %v, want %v", code, f.name, got, reads[code])
			}
		}
	}
	for _, tc := range []struct {
		name        string
		err         error
		write, read bool
	}{
		{"a halted applier", fmt.Errorf("%w: disk gone", replication.ErrHalted), true, false},
		{"no quorum yet", &NoQuorumError{Reachable: 1, Voters: 3}, true, true},
		{"a session moving here", &node.LostError{Code: node.CodeSessionMoving, Node: "n1"}, false, true},
		{"a node that did not answer", fmt.Errorf("%w: connection refused", nodeapi.ErrUnreachable), true, false},
		{"a statement's own", &engine.Error{Type: "Catalog", Message: "Catalog Error: no table t"}, false, false},
	} {
		if got := retryableWrite(tc.err); got != tc.write {
			t.Errorf("%s: write retried %v, want %v", tc.name, got, tc.write)
		}
		if got := retryableRead(tc.err); got != tc.read {
			t.Errorf("%s: read retried %v, want %v", tc.name, got, tc.read)
		}
	}
}

// TestAnswersCarryTheTablesCode: this node's errors reach another node, over
// the node API (APIError, then nodeapi.Answer) or Quack (node.CodeOf), with
// the code of the sentinel they wrap, and the node that asked reads that
// sentinel back.
func TestAnswersCarryTheTablesCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want outcome.Code
	}{
		{"not leader", &replication.NotLeaderError{LeaderID: "n2", LeaderAddr: "n2:9495"}, outcome.NotLeader},
		{"unknown outcome", fmt.Errorf("%w: %w", replication.ErrUnknownOutcome, replication.ErrNotLeader), outcome.UnknownOutcome},
		{"halted", fmt.Errorf("%w: %w", replication.ErrHalted, errors.New("disk gone")), outcome.ApplyStalled},
		{"stalled", replication.ErrApplyStalled, outcome.ApplyStalled},
		{"disk full", replication.ErrDiskFull, outcome.DiskFull},
		{"no such voter", replication.ErrNoSuchVoter, outcome.NoSuchVoter},
		{"no quorum", &NoQuorumError{Reachable: 1, Voters: 3}, outcome.NoQuorum},
		{"shutting down", ErrShuttingDown, outcome.ShuttingDown},
		{"statement timeout", &TimeoutError{}, outcome.StatementTimeout},
		{"setting lost", settingLost("Connection Error: setting x lost"), outcome.SettingLost},
		{"outcome unknown after a later refusal", &UnknownOutcomeError{Key: []byte{1},
			Err: fmt.Errorf("%w (a later attempt: not leader)", errLeaderChanged)}, outcome.UnknownOutcome},
		{"session lost", &node.LostError{Code: node.CodeSessionLost, Node: "n1"}, outcome.SessionLost},
		{"a statement's own", &engine.Error{Type: "Constraint", Message: "Constraint Error: duplicate key"}, outcome.Failed},
	} {
		api := nodeapi.Answer(APIError(tc.err))
		if api.Code != tc.want || !errors.Is(api, tc.want.Err()) {
			t.Errorf("%s: the node API answers %q (%v), want %s", tc.name, api.Code, api, tc.want)
		}
		if tc.want == outcome.Failed {
			if api.Type != "Constraint" || api.Message != "duplicate key" {
				t.Errorf("%s: answered type %q message %q, want DuckDB's type and raw message", tc.name, api.Type, api.Message)
			}
			continue
		}
		if api.Message != tc.err.Error() {
			t.Errorf("%s: answered message %q, want %q", tc.name, api.Message, tc.err.Error())
		}
		if got := node.CodeOf(APIError(tc.err)); got != string(tc.want) {
			t.Errorf("%s: a Quack answer's code %q, want %s", tc.name, got, tc.want)
		}
	}
}
