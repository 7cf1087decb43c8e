package nodeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Paths of the sessions that outlive their node, served by every member
// to members only (the node credential).
const (
	// SessionsPath: POST takes a SessionPush, the state of sessions the
	// sending member holds (or ended), which the node keeps so that it can
	// adopt them if that member fails; GET ?id= answers the SessionState
	// of one session, held here or a copy kept here, or CodeNoSuchSession.
	SessionsPath = "/duckraft/v1/sessions"
	// ReadIndexPath (POST) answers the leader's read index as a ReadIndex:
	// its commit index once a quorum confirmed its leadership and it
	// applied that far. A node that does not lead answers CodeNotLeader.
	ReadIndexPath = "/duckraft/v1/read-index"
)

// Limits of a SessionPush, which a receiving node checks: a member is
// trusted with the data, not with the receiver's memory.
const (
	MaxPushBytes       = 16 << 20
	MaxPushSessions    = 4096
	MaxSessionSettings = 256
	// MaxSettingsBytes bounds the setting statements of one session
	// together; a session whose settings are larger moves without them
	// (SettingsLost).
	MaxSettingsBytes = 64 << 10
)

// SessionState is what a node needs to adopt a session whose node failed:
// what the session's id does not say already (node.SessionClaims).
type SessionState struct {
	ID string `json:"id"`
	// Holder is the node that holds the session, HolderBoot its run
	// (node.SessionIDs.Boot): a node that restarted knows the sessions of
	// its earlier run are gone.
	Holder     string `json:"holder"`
	HolderBoot uint64 `json:"holder_boot"`
	// Moves counts the session's adoptions and Seq its changes since the
	// last: of two states the one with the higher (Moves, Seq) is newer.
	Moves uint64 `json:"moves"`
	Seq   uint64 `json:"seq"`
	// At is when the holder last sent it (Unix seconds, the holder's
	// clock): a copy lives as long as the session's lease from then.
	At int64 `json:"at"`
	// Ended: the session ended; its copies are dropped.
	Ended bool `json:"ended,omitempty"`
	// Credential is the token the session opened with, which the node
	// that adopts it checks again on every request, as its holder does.
	Credential string `json:"credential,omitempty"`
	// Lease is the session's heartbeat lease (a Q1 session's idle
	// timeout), in seconds.
	Lease uint64 `json:"lease,omitempty"`
	// Consistency, Split and Settings are the routing state it carries
	// from node to node: its read level, split scans, and the statements
	// that changed its session settings, in order.
	Consistency string   `json:"consistency,omitempty"`
	Split       int      `json:"split,omitempty"`
	Settings    []string `json:"settings,omitempty"`
	// SettingsLost: the session's settings were past MaxSettingsBytes
	// and are not carried; a node that adopts it says so.
	SettingsLost bool `json:"settings_lost,omitempty"`
	// Transaction: the client has a transaction open; CommitKey is the
	// idempotency key its COMMIT will carry (hex).
	Transaction bool   `json:"transaction,omitempty"`
	CommitKey   string `json:"commit_key,omitempty"`
	// Temporary: the session created temporary objects (prepared
	// statements, secrets) that live only on its holder.
	Temporary bool `json:"temporary,omitempty"`
	// StatementTimeoutMS is the session's SET duckraft_statement_timeout
	// in milliseconds; nil while it set none (the node's default).
	StatementTimeoutMS *int64 `json:"statement_timeout_ms,omitempty"`
	// WriteKey is the idempotency key (hex) SET duckraft_write_key gave
	// the session's next write, until that write uses it.
	WriteKey string `json:"write_key,omitempty"`
}

// Newer reports whether s is a later state of its session than o.
func (s SessionState) Newer(o SessionState) bool {
	switch {
	case s.Moves != o.Moves:
		return s.Moves > o.Moves
	case s.Seq != o.Seq:
		return s.Seq > o.Seq
	}
	// Two adoptions at once: the same node wins everywhere.
	return s.Holder > o.Holder
}

// check refuses a state no node would send.
func (s SessionState) check() error {
	if s.ID == "" || s.Holder == "" {
		return errors.New("a session state names its session and holder")
	}
	if len(s.Settings) > MaxSessionSettings {
		return fmt.Errorf("session %s holds %d settings, more than %d", s.ID, len(s.Settings), MaxSessionSettings)
	}
	if n := SettingsBytes(s.Settings); n > MaxSettingsBytes {
		return fmt.Errorf("session %s holds settings of %d bytes, more than %d", s.ID, n, MaxSettingsBytes)
	}
	if len(s.ID) > 1024 || len(s.Holder) > 1024 || len(s.Credential) > 64<<10 || len(s.CommitKey) > 1024 || len(s.WriteKey) > 1024 {
		return fmt.Errorf("session %s: an id, holder, credential or key too long", s.ID)
	}
	return nil
}

// SettingsBytes is the size of setting statements.
func SettingsBytes(settings []string) int {
	n := 0
	for _, st := range settings {
		n += len(st)
	}
	return n
}

// Size is about what s takes in memory and on the wire.
func (s SessionState) Size() int {
	return 256 + len(s.ID) + len(s.Holder) + len(s.Credential) + len(s.CommitKey) + len(s.WriteKey) + SettingsBytes(s.Settings) + 16*len(s.Settings)
}

// SessionPush is the body of a POST to SessionsPath.
type SessionPush struct {
	From string `json:"from"`
	// FromBoot is the sender's run (node.SessionIDs.Boot): a copy whose
	// holder runs anew holds a session that run lost.
	FromBoot uint64         `json:"from_boot"`
	Sessions []SessionState `json:"sessions"`
}

// ReadIndex is the answer of ReadIndexPath.
type ReadIndex struct {
	Index uint64 `json:"index"`
}

// SessionsHandler serves SessionsPath to members: push keeps the states a
// member sent, lookup answers one session's state.
func SessionsHandler(node string, push func(SessionPush), lookup func(id string) (SessionState, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Authorized(r, node) {
			writeError(w, Errorf(CodeUnauthorized, "Authentication failed"))
			return
		}
		switch r.Method {
		case http.MethodGet:
			id := r.URL.Query().Get("id")
			st, ok := lookup(id)
			if !ok {
				writeError(w, Errorf(CodeNoSuchSession, "no state of session %q here", id))
				return
			}
			writeJSON(w, st)
		case http.MethodPost:
			var p SessionPush
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxPushBytes))
			if err := dec.Decode(&p); err != nil {
				writeError(w, Errorf(CodeBadRequest, "malformed session push: %v", err))
				return
			}
			if len(p.Sessions) > MaxPushSessions {
				writeError(w, Errorf(CodeBadRequest, "a session push holds at most %d sessions, not %d", MaxPushSessions, len(p.Sessions)))
				return
			}
			// A state past the bounds is left out; the others are kept.
			valid := p.Sessions[:0]
			for _, s := range p.Sessions {
				if s.check() == nil {
					valid = append(valid, s)
				}
			}
			p.Sessions = valid
			push(p)
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Allow", "GET, POST")
			writeError(w, Errorf(CodeBadRequest, "use GET or POST"))
		}
	})
}

// ReadIndexHandler serves ReadIndexPath to members.
func ReadIndexHandler(node string, readIndex func(context.Context) (uint64, error)) http.Handler {
	return guard([]string{node}, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		idx, err := readIndex(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, ReadIndex{Index: idx})
	})
}

// PushSessions sends p to the node at addr, with the node credential.
func (c *Client) PushSessions(ctx context.Context, addr string, p SessionPush) error {
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode session push: %w", err)
	}
	return c.do(ctx, c.Node, http.MethodPost, c.url(addr, SessionsPath), body, func(*http.Response) error { return nil })
}

// LookupSession asks the node at addr for the state of session id; ok is
// false when it has none.
func (c *Client) LookupSession(ctx context.Context, addr, id string) (st SessionState, ok bool, err error) {
	err = c.do(ctx, c.Node, http.MethodGet, c.url(addr, SessionsPath)+"?id="+url.QueryEscape(id), nil, func(resp *http.Response) error {
		if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, MaxPushBytes)).Decode(&st); err != nil {
			return fmt.Errorf("%w: decode session state from %s: %w", ErrUnreachable, addr, err)
		}
		return nil
	})
	if CodeOf(err) == CodeNoSuchSession {
		return SessionState{}, false, nil
	}
	return st, err == nil, err
}

// ReadIndex asks the leader at addr for its read index.
func (c *Client) ReadIndex(ctx context.Context, addr string) (uint64, error) {
	var out ReadIndex
	err := c.do(ctx, c.Node, http.MethodPost, c.url(addr, ReadIndexPath), nil, func(resp *http.Response) error {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return fmt.Errorf("%w: decode read index from %s: %w", ErrUnreachable, addr, err)
		}
		return nil
	})
	return out.Index, err
}

// LeaseDuration is s.Lease as a duration.
func (s SessionState) LeaseDuration() time.Duration { return time.Duration(s.Lease) * time.Second }

// String names the state in logs.
func (s SessionState) String() string {
	return s.ID + "@" + s.Holder + "/" + strconv.FormatUint(s.Moves, 10) + "." + strconv.FormatUint(s.Seq, 10)
}
