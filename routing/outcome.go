package routing

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

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

// Unwrap makes errors.Is(err, replication.ErrUnknownOutcome) true.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// ErrorCode implements node.CodedError.
func (e *UnknownOutcomeError) ErrorCode() string { return string(nodeapi.CodeUnknownOutcome) }

// writeKeySetting recognises SET duckraft_write_key = '<hex>', the
// idempotency key of the session's next write (UnknownOutcomeError).
func writeKeySetting(sql string) ([]byte, bool, error) {
	v, ok := setStatement(sql, "duckraft_write_key")
	if !ok {
		return nil, false, nil
	}
	if v.Kind != wal.TokString || v.Text[0] != '\'' || strings.Count(v.Text, "'") != 2 {
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
// any, and forgets it.
func (st *sessionState) useWriteKey(cmd *wal.Command) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.writeKey != nil {
		cmd.Key, st.writeKey = st.writeKey, nil
	}
}

// inLog reports whether a failed attempt of a write may have entered the
// log: after it, a later attempt's plain refusal does not make the write
// failed.
func inLog(err error) bool {
	return errors.Is(err, replication.ErrUnknownOutcome) || nodeapi.CodeOf(err) == nodeapi.CodeUnknownOutcome ||
		errors.Is(err, errLeaderChanged) || errors.Is(err, nodeapi.ErrUnreachable)
}
