// Package outcome is the one vocabulary in which duckraft nodes tell each
// other why a request failed. A Code travels in the Duckraft-Error header
// of an answer (wire.ErrorCodeHeader, on a Quack ERROR_RESPONSE and on a
// node API answer) and stands for one exported sentinel error; the table
// in this file is the only place that pairs them. The node that answers
// sends the code of the first sentinel its error wraps (Of); the node that
// reads the answer gets an error that wraps the code's sentinel (Code.Err).
// So errors.Is(err, ErrNotLeader) holds alike for a node's own error and
// for a peer's answer, and whether to retry is asked of sentinels only.
//
// The codes are a wire format that old and new builds of a cluster share
// during a rolling upgrade: a code's text never changes, and a node may
// read a code it does not know (a newer build's), which stands for no
// sentinel. The standard library is the package's only dependency, so the
// Quack server (node), the Go client (node/client), replication, routing
// and the node API the CLI links (routing/nodeapi) all share it.
package outcome

import (
	"errors"
	"strconv"
	"strings"
)

// A Code says why a node refused or failed a request, for the node or
// tool that sent it.
type Code string

// The codes. Each one's comment says what the sender may do.
const (
	// UnknownOutcome: a write entered the log (or may have) and its
	// outcome is not known; sent again with the same idempotency key, it
	// applies at most once.
	UnknownOutcome Code = "unknown_outcome"
	// NoQuorum: no leader was known within the write's wait; the message
	// says how many voters are unreachable.
	NoQuorum Code = "no_quorum"
	// NotLeader: the node does not lead; ask the leader.
	NotLeader Code = "not_leader"
	// ApplyStalled: the leader's applier is retrying an entry (or halted)
	// and refused the write before it entered the log; it may be sent
	// again.
	ApplyStalled Code = "apply_stalled"
	// DiskFull: the leader's disk is full; the write was not stored.
	DiskFull Code = "disk_full"
	// ShuttingDown: the node is shutting down; ask another.
	ShuttingDown Code = "shutting_down"
	// Behind: the node has not applied the index a read needs (the
	// header's index is its applied index); another node may serve it.
	Behind Code = "behind"
	// Pinned: a split-scan share cannot read at the pinned index because
	// the node has applied past it (the header's index is where it is).
	Pinned Code = "pinned"
	// NoSuchVoter: a leadership transfer named no voter.
	NoSuchVoter Code = "no_such_voter"
	// NoSuchMember: a removal named no member of the Raft configuration.
	NoSuchMember Code = "no_such_member"
	// NoSuchSession: the node neither holds the session nor keeps a copy
	// of its state.
	NoSuchSession Code = "no_such_session"
	// UnknownSession: the request names no open session (the node
	// restarted, or the session ended).
	UnknownSession Code = "unknown_session"
	// SessionExpired: the session's heartbeat lease ran out.
	SessionExpired Code = "session_expired"
	// TooManySessions: the node holds as many sessions as it allows.
	TooManySessions Code = "too_many_sessions"
	// SessionLost: the session's state reached no other node before its
	// node failed; the client connects again.
	SessionLost Code = "session_lost"
	// ResultLost: a FETCH of a result that was being streamed from the
	// failed node; the client runs the query again.
	ResultLost Code = "result_lost"
	// StreamLost: a SEND_DATA of an insert stream open on the failed
	// node; the client runs the INSERT again.
	StreamLost Code = "stream_lost"
	// TemporaryLost: the session's temporary objects (prepared
	// statements, secrets) were on the failed node.
	TemporaryLost Code = "temporary_lost"
	// TransactionLost: the session's open transaction was on the failed
	// node and is rolled back.
	TransactionLost Code = "transaction_lost"
	// RequestLost: the node holding the session failed while it handled
	// the request; whether it took effect is unknown.
	RequestLost Code = "request_lost"
	// SessionMoving: the request could not reach the node that holds its
	// session; it was not run, and may be sent again.
	SessionMoving Code = "session_moving"
	// SettingLost: a session setting could not follow the session to the
	// node that adopted it.
	SettingLost Code = "setting_lost"
	// StatementTimeout: the read ran past the session's statement
	// timeout; a router passes it on rather than retry elsewhere.
	StatementTimeout Code = "statement_timeout"
	// Unauthorized: the request lacks the credential it needs, or the
	// session's token is no longer accepted (the session has ended).
	Unauthorized Code = "unauthorized"
	// Forbidden: the request's token holds a role that does not allow it
	// (a read token's write); a session stays open.
	Forbidden Code = "forbidden"
	// BadRequest: the request is malformed.
	BadRequest Code = "bad_request"
	// Busy: the node is already doing this (a backup), or is receiving
	// as many request bytes as it allows; the request may be sent again
	// later.
	Busy Code = "busy"
	// Failed: the request's own error (a statement's), which any node
	// would answer alike.
	Failed Code = "failed"
)

// The sentinels the codes stand for. Those that other packages returned
// before this one existed keep their texts (and those packages export
// them under their old names), so logs and clients see what they saw.
var (
	ErrUnknownOutcome = errors.New("replication: outcome unknown")
	ErrNoQuorum       = errors.New("duckraft: no leader was elected within the write's wait")
	ErrNotLeader      = errors.New("replication: not the leader")
	ErrApplyStalled   = errors.New("replication: this node's applier is stalled")
	ErrDiskFull       = errors.New("replication: the leader's disk is full")
	ErrShuttingDown   = errors.New("duckraft: this node is shutting down; the write was not applied: reconnect to another node")
	ErrBehind         = errors.New("duckraft: the node has not applied the index the read needs")
	ErrPinned         = errors.New("duckraft: the node has applied past the index the read is pinned at")
	ErrNoSuchVoter    = errors.New("replication: no such voter")
	ErrNoSuchMember   = errors.New("duckraft: no such member of the Raft configuration")
	ErrNoSuchSession  = errors.New("duckraft: no state of the session on this node")
	// ErrUnknownSession and ErrSessionExpired carry the texts of DuckDB's
	// own Quack server.
	ErrUnknownSession   = errors.New("Invalid connection id")
	ErrSessionExpired   = errors.New("Connection heartbeat lease expired")
	ErrTooManySessions  = errors.New("too many sessions")
	ErrSessionLost      = errors.New("session lost with the node that held it")
	ErrResultLost       = errors.New("result lost with the node that held the session")
	ErrStreamLost       = errors.New("insert stream lost with the node that held the session")
	ErrTemporaryLost    = errors.New("temporary objects lost with the node that held the session")
	ErrTransactionLost  = errors.New("transaction lost with the node that held the session")
	ErrRequestLost      = errors.New("the node that held the session failed while it handled the request")
	ErrSessionMoving    = errors.New("the session is moving between nodes")
	ErrSettingLost      = errors.New("a session setting could not follow the session")
	ErrStatementTimeout = errors.New("duckraft: statement timeout")
	// ErrUnauthorized carries the text of DuckDB's own Quack server.
	ErrUnauthorized = errors.New("Authentication failed")
	ErrForbidden    = errors.New("Permission Error: the session's token does not allow this")
	ErrBadRequest   = errors.New("duckraft: malformed request")
	ErrBusy         = errors.New("the server is busy")
	ErrFailed       = errors.New("duckraft: the request failed")
)

// table pairs every code with its sentinel. Of takes the first row whose
// sentinel an error wraps, so a row comes before those an error of its
// kind may wrap as well: a write whose outcome is unknown may wrap why
// (not_leader, apply_stalled), and no_quorum is a kind of not_leader.
var table = [...]struct {
	code Code
	err  error
}{
	{UnknownOutcome, ErrUnknownOutcome},
	{NoQuorum, ErrNoQuorum},
	{NotLeader, ErrNotLeader},
	{ApplyStalled, ErrApplyStalled},
	{DiskFull, ErrDiskFull},
	{ShuttingDown, ErrShuttingDown},
	{Behind, ErrBehind},
	{Pinned, ErrPinned},
	{NoSuchVoter, ErrNoSuchVoter},
	{NoSuchMember, ErrNoSuchMember},
	{NoSuchSession, ErrNoSuchSession},
	{UnknownSession, ErrUnknownSession},
	{SessionExpired, ErrSessionExpired},
	{TooManySessions, ErrTooManySessions},
	{SessionLost, ErrSessionLost},
	{ResultLost, ErrResultLost},
	{StreamLost, ErrStreamLost},
	{TemporaryLost, ErrTemporaryLost},
	{TransactionLost, ErrTransactionLost},
	{RequestLost, ErrRequestLost},
	{SessionMoving, ErrSessionMoving},
	{SettingLost, ErrSettingLost},
	{StatementTimeout, ErrStatementTimeout},
	{Unauthorized, ErrUnauthorized},
	{Forbidden, ErrForbidden},
	{BadRequest, ErrBadRequest},
	{Busy, ErrBusy},
	{Failed, ErrFailed},
}

// sentinels is the table by code.
var sentinels = func() map[Code]error {
	m := make(map[Code]error, len(table))
	for _, r := range table {
		m[r.code] = r.err
	}
	return m
}()

// Err returns the sentinel c stands for; nil for "" and for a code this
// build does not know.
func (c Code) Err() error { return sentinels[c] }

// Of returns the code of err, the first in the table whose sentinel err
// wraps (errors.Is); "" when it wraps none.
func Of(err error) Code {
	if err == nil {
		return ""
	}
	for _, r := range table {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return ""
}

// Codes returns every code, in the order Of tries them.
func Codes() []Code {
	out := make([]Code, len(table))
	for i, r := range table {
		out[i] = r.code
	}
	return out
}

// Header is the Duckraft-Error header value of code c: the code, then the
// node's index if it is not 0 (Behind, Pinned).
func Header(c Code, index uint64) string {
	if index == 0 {
		return string(c)
	}
	return string(c) + " " + strconv.FormatUint(index, 10)
}

// ParseHeader reads a Duckraft-Error header value; ok is false for one
// that is not (empty, or an index that is not a number).
func ParseHeader(v string) (c Code, index uint64, ok bool) {
	code, idx, hasIdx := strings.Cut(v, " ")
	if code == "" {
		return "", 0, false
	}
	if hasIdx {
		n, err := strconv.ParseUint(idx, 10, 64)
		if err != nil {
			return "", 0, false
		}
		index = n
	}
	return Code(code), index, true
}
