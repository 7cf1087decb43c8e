package routing

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// UnknownOutcomeError answers a write that reached the log (or may have)
// and whose outcome this node could not learn in time: it may still
// apply. Key is its idempotency key; the client that sends
// SET duckraft_write_key = '<Key in hex>' and then the same write again
// has it applied at most once, and learns its result.
type UnknownOutcomeError struct {
	Key []byte
	Err error
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("duckraft: the outcome of this write is unknown (%v); it may still apply. To retry it so that it applies "+
		"at most once, run SET duckraft_write_key = '%x' and then send the same write again", e.Err, e.Key)
}

// Unwrap makes errors.Is(err, replication.ErrUnknownOutcome) true, and
// errors.Is of what Err wraps.
func (e *UnknownOutcomeError) Unwrap() []error { return []error{outcome.ErrUnknownOutcome, e.Err} }

// ErrorCode implements node.CodedError: whatever code Err carries (a
// later attempt's), the answer says the outcome is unknown.
func (e *UnknownOutcomeError) ErrorCode() string { return string(outcome.UnknownOutcome) }

// writeKeySetting recognises SET duckraft_write_key = '<hex>', the
// idempotency key of the session's next write (UnknownOutcomeError).
func writeKeySetting(stmt sqltext.Statement) ([]byte, bool, error) {
	v, ok := setStatement(stmt, "duckraft_write_key")
	if !ok {
		return nil, false, nil
	}
	if v.Kind != sqltext.TokString || v.Text[0] != '\'' || strings.Count(v.Text, "'") != 2 {
		return nil, true, errors.New("duckraft: duckraft_write_key takes the key an unknown outcome named, as a string")
	}
	key, err := hex.DecodeString(v.Text[1 : len(v.Text)-1])
	if err != nil || len(key) != writeKeyBytes {
		return nil, true, fmt.Errorf("duckraft: duckraft_write_key must be the %d hexadecimal digits an unknown outcome named", 2*writeKeyBytes)
	}
	return key, true, nil
}

// writeKeyBytes is the length of the idempotency keys newCommand makes.
const writeKeyBytes = 16

// useWriteKey gives cmd the key the session set for its next write, if
// any, and forgets it; it reports whether there was one.
func (st *sessionState) useWriteKey(cmd *wal.Command) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.writeKey == nil {
		return false
	}
	cmd.Key, st.writeKey = st.writeKey, nil
	return true
}

// inLog reports whether a failed attempt of a write may have entered the
// log: after it, a later attempt's plain refusal does not make the write
// failed.
func inLog(err error) bool {
	return errors.Is(err, outcome.ErrUnknownOutcome) || errors.Is(err, errLeaderChanged) ||
		errors.Is(err, nodeapi.ErrUnreachable) && !notSent(err)
}

// notSent reports whether a request failed before any of it was sent: the
// connection could not be made, so the node never saw it.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// NoQuorumError answers a write that found no leader within LeaderWait:
// the voters this node reaches through gossip, of those in the Raft
// configuration, say whether a quorum is possible at all.
type NoQuorumError struct {
	// Reachable is the voters gossip reports alive, this node included
	// when it is one; Voters the configuration's voters (0: unknown).
	Reachable, Voters int
	Waited            time.Duration
}

func (e *NoQuorumError) Error() string {
	if e.Voters == 0 {
		return fmt.Sprintf("duckraft: no leader: the write waited %v for one to be elected and was not applied; %d voters are reachable",
			e.Waited, e.Reachable)
	}
	return fmt.Sprintf("duckraft: no leader: %d of %d voters unreachable, and a leader needs %d of them; the write waited %v "+
		"and was not applied: bring voters back (docs/operations.md)", e.Voters-min(e.Reachable, e.Voters), e.Voters, e.Voters/2+1, e.Waited)
}

// Unwrap makes errors.Is(err, outcome.ErrNoQuorum) true, whose code the
// error is answered with, and errors.Is(err, replication.ErrNotLeader):
// this node retries it until LeaderWait ends.
func (e *NoQuorumError) Unwrap() []error {
	return []error{outcome.ErrNoQuorum, replication.ErrNotLeader}
}

// noQuorum explains a write that found no leader.
func (w *writer) noQuorum() error {
	err := &NoQuorumError{Waited: w.leaderWait}
	if w.voters != nil {
		err.Voters = w.voters()
	}
	if w.dir != nil {
		for _, p := range w.dir.Peers() {
			if !p.Replica {
				err.Reachable++
			}
		}
	}
	return err
}

// ErrShuttingDown answers a write on a node that is shutting down: it was
// not applied; the client reconnects to another node. It is outcome's
// sentinel, answered with the code shutting_down.
var ErrShuttingDown = outcome.ErrShuttingDown
