// Package nodeapi is the typed HTTP API that duckraft nodes serve beside
// Quack, on the same port and behind the same tokens: to each other
// (forwarded writes, and the codes and headers of routed reads) and to
// operators (status, state hash, leadership transfer). Both sides of every
// exchange live here, so the CLI, the benchmarks and testcluster use the
// one Client, and none of them links Raft or gossip.
//
// Control data never travels inside SQL text or error messages: a routed
// read's requirement is the ReadHeader of its Quack request, a refusal's
// reason is a Code in the ErrorHeader of the answer (node/outcome's, each
// standing for a sentinel error the decoded Error wraps), and a forwarded
// write is a wal command in wal's own encoding.
package nodeapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

// Paths served by every data node (a router serves StatusPath only).
// StatusPath and HashPath accept every client token and the node
// credential; TransferPath, RemovePath and BackupPath an admin token or the
// node credential; LeavePath and WritePath only the node credential (see
// Credentials and Require).
const (
	// StatusPath (GET) answers the node's Status as JSON.
	StatusPath = "/duckraft/v1/status"
	// HashPath (GET) answers the node's StateHash as JSON.
	HashPath = "/duckraft/v1/hash"
	// TransferPath (POST) moves leadership away from the node that serves
	// it, to the voter named by the query parameter "to" or to the most
	// up-to-date voter; it answers a Transfer once the new leader took over.
	TransferPath = "/duckraft/v1/transfer-leadership"
	// RemovePath (POST) takes the member named by the query parameter "id"
	// out of the cluster: the leader that serves it tells the member to
	// leave (LeavePath), waits until gossip sees it gone, and removes it
	// from the Raft configuration; it answers a Removal.
	RemovePath = "/duckraft/v1/remove"
	// LeavePath (POST) tells the node that serves it that the leader is
	// removing it: it leaves gossip and stops.
	LeavePath = "/duckraft/v1/leave"
	// WritePath (POST) takes a write forwarded to the leader: a wal.Batch
	// of one command, answered with an encoded wal.Result.
	WritePath = "/duckraft/v1/write"
	// BackupPath (POST) answers a backup of the node's database at its
	// applied index: a DuckDB database file as the body, the index and
	// the node's state hash at that index in the BackupIndexHeader,
	// BackupHashHeader and BackupRowsHeader.
	BackupPath = "/duckraft/v1/backup"
)

// Headers of a BackupPath answer.
const (
	BackupIndexHeader = "Duckraft-Backup-Index"
	BackupHashHeader  = "Duckraft-Backup-Hash"
	BackupRowsHeader  = "Duckraft-Backup-Rows"
)

// Status is a node's view of itself and of the cluster.
type Status struct {
	ID string `json:"id"`
	// Version is the node's build (buildinfo.Version), Engine the DuckDB
	// version it embeds; "" from builds before them, Engine "" from a
	// router too.
	Version  string `json:"version,omitempty"`
	Engine   string `json:"engine,omitempty"`
	State    string `json:"state"`
	LeaderID string `json:"leader_id"`
	// Term is the node's current Raft term: one that moves means an
	// election (0 from a router, or a build before it).
	Term    uint64 `json:"term,omitempty"`
	Applied uint64 `json:"applied_index"`
	Commit  uint64 `json:"commit_index"`
	// Reads counts the reads this node ran itself (its clients' and those
	// routed to it); Load is what it gossips as its load.
	Reads uint64 `json:"reads"`
	Load  uint64 `json:"load"`
	// Members are the nodes this node knows, from gossip and Raft.
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one node as seen from another.
type MemberStatus struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	State     string `json:"state"`
	RaftAddr  string `json:"raft_addr"`
	QuackAddr string `json:"quack_addr"`
	// HTTPAddr is the member's operations address (its status page), ""
	// when it serves none or its build does not gossip it.
	HTTPAddr string `json:"http_addr,omitempty"`
	Applied  uint64 `json:"applied_index"`
	Lag      uint64 `json:"lag"`
	Load     int    `json:"load"`
	Leader   bool   `json:"leader"`
	// InRaft and Voter describe the member's place in the Raft
	// configuration, as the reporting node knows it.
	InRaft bool `json:"in_raft"`
	Voter  bool `json:"voter"`
}

// StateHash is a digest of a node's schema and rows at its applied index:
// equal on nodes that hold equal data.
type StateHash struct {
	Index uint64 `json:"applied_index"`
	Hash  string `json:"hash"`
	Rows  int64  `json:"rows"`
}

// Transfer is the answer of TransferPath: the leader before and after.
type Transfer struct {
	From     string `json:"from"`
	LeaderID string `json:"leader_id"`
	Error    string `json:"error,omitempty"`
}

// Removal is the answer of RemovePath: the member removed, and the leader
// that removed it.
type Removal struct {
	ID       string `json:"id"`
	LeaderID string `json:"leader_id"`
	// Left is whether the member was alive and told to leave; false when
	// gossip already saw it dead or gone.
	Left bool `json:"left"`
}

// Code is a refusal's code: outcome's, whose table pairs each code with
// the sentinel error it stands for (Error unwraps to it).
type Code = outcome.Code

// The codes under the names this API's callers use; outcome documents
// each.
const (
	CodeNotLeader       = outcome.NotLeader
	CodeUnknownOutcome  = outcome.UnknownOutcome
	CodeApplyStalled    = outcome.ApplyStalled
	CodeShuttingDown    = outcome.ShuttingDown
	CodeDiskFull        = outcome.DiskFull
	CodeNoQuorum        = outcome.NoQuorum
	CodeBehind          = outcome.Behind
	CodePinned          = outcome.Pinned
	CodeNoSuchVoter     = outcome.NoSuchVoter
	CodeNoSuchMember    = outcome.NoSuchMember
	CodeNoSuchSession   = outcome.NoSuchSession
	CodeUnauthorized    = outcome.Unauthorized
	CodeForbidden       = outcome.Forbidden
	CodeBadRequest      = outcome.BadRequest
	CodeBusy            = outcome.Busy
	CodeFailed          = outcome.Failed
	CodeUnknownSession  = outcome.UnknownSession
	CodeSessionExpired  = outcome.SessionExpired
	CodeTooManySessions = outcome.TooManySessions
)

// Error is a refusal with its code. It implements node.CodedError, so a
// Quack answer carries the code in ErrorHeader, and it unwraps to its
// code's sentinel: errors.Is(err, outcome.ErrNotLeader) holds for a peer's
// not_leader as for this node's own.
type Error struct {
	Code Code
	// Index is the node's applied index, for CodeBehind and CodePinned.
	Index   uint64
	Message string
	// Type is the DuckDB exception type of a CodeFailed statement's error
	// ("Constraint", …), which the node that asked passes on to its
	// client; Message is then DuckDB's raw message.
	Type string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel of e's code; nil for a code this build does
// not know.
func (e *Error) Unwrap() error { return e.Code.Err() }

// ExceptionType implements engine.ExceptionError.
func (e *Error) ExceptionType() string { return e.Type }

// ErrorCode is the ErrorHeader value: the code, then the index if any.
func (e *Error) ErrorCode() string { return outcome.Header(e.Code, e.Index) }

// ErrorHeader is the HTTP header that carries an Error's code, on Quack
// answers and on this package's own.
const ErrorHeader = wire.ErrorCodeHeader

// ExceptionTypeHeader carries an Error's Type.
const ExceptionTypeHeader = "Duckraft-Exception-Type"

// parseError reads an ErrorHeader value; ok is false for a value that is
// not one.
func parseError(v, msg string) (*Error, bool) {
	code, idx, ok := outcome.ParseHeader(v)
	if !ok {
		return nil, false
	}
	return &Error{Code: code, Index: idx, Message: msg}, true
}

// AsError returns err's Error: one of this package's answers, or a Quack
// ERROR_RESPONSE that carried a code.
func AsError(err error) (*Error, bool) {
	if e, ok := errors.AsType[*Error](err); ok {
		return e, true
	}
	if se, ok := errors.AsType[*client.ServerError](err); ok && se.Code != "" {
		return parseError(se.Code, se.Message)
	}
	return nil, false
}

// CodeOf returns err's code, or "" if it has none.
func CodeOf(err error) Code {
	if e, ok := AsError(err); ok {
		return e.Code
	}
	return ""
}

// Errorf returns an Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ReadHeader is the header of a routed read's Quack request: what the node
// that runs it must check first, since that node's session knows nothing
// of the client's.
const ReadHeader = "Duckraft-Read"

// Read is a routed read's requirement. The zero value requires nothing.
type Read struct {
	// Strong: run on the leader after a read index.
	Strong bool
	// After: run once this index is applied (session and bounded reads).
	After uint64
	// At: run in a read transaction at exactly this index (a split-scan
	// share).
	At uint64
	// Timeout bounds the read on the node that runs it (the session's
	// statement timeout, what is left of it); 0 is none. It travels in a
	// TimeoutHeader of its own, which nodes of builds before it ignore.
	Timeout time.Duration
}

// TimeoutHeader carries Read.Timeout, in Go's duration syntax.
const TimeoutHeader = "Duckraft-Timeout"

// Header returns r as a request header.
func (r Read) Header() http.Header {
	var v string
	switch {
	case r.Strong:
		v = "strong"
	case r.At > 0:
		v = "at " + strconv.FormatUint(r.At, 10)
	default:
		v = "after " + strconv.FormatUint(r.After, 10)
	}
	h := http.Header{ReadHeader: {v}}
	if r.Timeout > 0 {
		h.Set(TimeoutHeader, r.Timeout.String())
	}
	return h
}

// ReadFrom returns the requirement h carries; ok is false when h carries
// none, and an error when its value is malformed.
func ReadFrom(h http.Header) (r Read, ok bool, err error) {
	v := h.Get(ReadHeader)
	if v == "" {
		return Read{}, false, nil
	}
	var timeout time.Duration
	if t := h.Get(TimeoutHeader); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return Read{}, false, Errorf(CodeBadRequest, "duckraft: malformed %s header %q", TimeoutHeader, t)
		}
		timeout = d
	}
	kind, arg, _ := strings.Cut(v, " ")
	if kind == "strong" && arg == "" {
		return Read{Strong: true, Timeout: timeout}, true, nil
	}
	n, perr := strconv.ParseUint(arg, 10, 64)
	switch {
	case perr != nil:
	case kind == "after":
		return Read{After: n, Timeout: timeout}, true, nil
	case kind == "at" && n > 0:
		return Read{At: n, Timeout: timeout}, true, nil
	}
	return Read{}, false, Errorf(CodeBadRequest, "duckraft: malformed %s header %q", ReadHeader, v)
}
