package nodeapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/wal"
)

// MaxWriteBytes bounds a forwarded write's body.
const MaxWriteBytes = 512 << 20

// Credentials are the bearer credentials a node's API accepts. Tokens are
// the client tokens with their roles: a read token may read a node's status
// and state hash, an admin token also transfer leadership (and whatever
// else its handler Requires). Node is the node credential only members hold
// (clusterkey.NodeAPI), which holds every role, and alone authorizes
// forwarded writes: a forwarded write is applied as the leader's own, past
// the checks a client's statement goes through.
type Credentials struct {
	Tokens tokens.Roles
	Node   string
}

// Role returns the role of r's bearer credential: tokens.Admin for the
// node credential, a client token's own role, ok false for anything else.
// The node credential and the tokens are all compared, in constant time.
func (c Credentials) Role(r *http.Request) (role tokens.Role, ok bool) {
	bearer, scheme := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if c.Tokens != nil && scheme {
		role, ok = c.Tokens.Role(bearer)
	}
	if Authorized(r, c.Node) {
		return tokens.Admin, true
	}
	return role, ok
}

// Authorized reports whether r carries one of the non-empty creds as a
// bearer token, compared in constant time. Every HTTP port of a node checks
// its callers with it or with Credentials.
func Authorized(r *http.Request, creds ...string) bool {
	got := []byte(r.Header.Get("Authorization"))
	ok := false
	for _, c := range creds {
		if c != "" && subtle.ConstantTimeCompare(got, []byte("Bearer "+c)) == 1 {
			ok = true
		}
	}
	return ok
}

// Require serves h to requests with method whose bearer credential holds
// need (see Credentials.Role). Others are refused before h runs: without a
// credential the node knows with CodeUnauthorized (401), with one whose
// role is lower with CodeForbidden (403). Every endpoint for clients and
// operators guards itself with it: status and hash need tokens.Read;
// leadership transfer, membership changes and backups tokens.Admin.
func Require(creds Credentials, need tokens.Role, method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role, ok := creds.Role(r)
		switch {
		case !ok:
			writeError(w, Errorf(CodeUnauthorized, "Authentication failed"))
			return
		case !role.Allows(need):
			writeError(w, Errorf(CodeForbidden, "Permission Error: %s %s needs the %s role; this token has the %s role",
				r.Method, r.URL.Path, need, role))
			return
		}
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, Errorf(CodeBadRequest, "use %s", method))
			return
		}
		h(w, r)
	})
}

// guard admits requests with method that carry one of creds.
func guard(creds []string, method string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Authorized(r, creds...) {
			writeError(w, Errorf(CodeUnauthorized, "Authentication failed"))
			return
		}
		if r.Method != method {
			w.Header().Set("Allow", method)
			writeError(w, Errorf(CodeBadRequest, "use %s", method))
			return
		}
		h(w, r)
	})
}

// status is the HTTP status that goes with a code.
func status(c Code) int {
	switch c {
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeBadRequest, CodeNoSuchVoter:
		return http.StatusBadRequest
	case CodeNoSuchMember, CodeNoSuchSession:
		return http.StatusNotFound
	case CodeNotLeader, CodePinned:
		return http.StatusConflict
	case CodeUnknownOutcome, CodeBehind, CodeBusy:
		return http.StatusServiceUnavailable
	case CodeFailed:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// Answer is err as this API answers it: an Error as it is; any other
// error with the code of the first sentinel it wraps (outcome.Of), or
// CodeFailed. The client decodes the answer into an Error that unwraps to
// that code's sentinel.
func Answer(err error) *Error {
	if e, ok := AsError(err); ok {
		return e
	}
	code := outcome.Of(err)
	if code == "" {
		code = CodeFailed
	}
	return &Error{Code: code, Message: err.Error()}
}

// writeError answers err: its code in ErrorHeader, its message as the
// body.
func writeError(w http.ResponseWriter, err error) {
	e := Answer(err)
	w.Header().Set(ErrorHeader, e.ErrorCode())
	if e.Type != "" {
		w.Header().Set(ExceptionTypeHeader, e.Type)
	}
	http.Error(w, e.Message, status(e.Code))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// StatusHandler serves StatusPath with what get returns, to every client
// token (tokens.Read) and to members.
func StatusHandler(creds Credentials, get func(context.Context) (Status, error)) http.Handler {
	return jsonHandler(creds, get)
}

// HashHandler serves HashPath with what get returns, to every client
// token (tokens.Read) and to members.
func HashHandler(creds Credentials, get func(context.Context) (StateHash, error)) http.Handler {
	return jsonHandler(creds, get)
}

func jsonHandler[T any](creds Credentials, get func(context.Context) (T, error)) http.Handler {
	return Require(creds, tokens.Read, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		v, err := get(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, v)
	})
}

// TransferHandler serves TransferPath: transfer hands leadership to the
// voter to (any voter when empty) and returns the leader before and after;
// its error should have the code not_leader (the answer then names the
// leader this node knows, so callers can ask that one) or no_such_voter:
// an Error, or an error wrapping the code's sentinel (Answer). Only admin
// tokens and members may ask.
func TransferHandler(creds Credentials, transfer func(to string) (Transfer, error)) http.Handler {
	return Require(creds, tokens.Admin, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		out, err := transfer(r.URL.Query().Get("to"))
		if err != nil {
			e := Answer(err)
			out.Error = e.Message
			w.Header().Set(ErrorHeader, e.ErrorCode())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status(e.Code))
			json.NewEncoder(w).Encode(out)
			return
		}
		writeJSON(w, out)
	})
}

// RemoveHandler serves RemovePath: remove takes the member id out of the
// cluster. Its error should have the code not_leader, no_such_member or
// bad_request (Answer) (the leader itself, a member that could not be told to
// leave). It needs an admin token or the node credential.
func RemoveHandler(creds Credentials, remove func(ctx context.Context, id string) (Removal, error)) http.Handler {
	return Require(creds, tokens.Admin, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		if id == "" {
			writeError(w, Errorf(CodeBadRequest, "name the member to remove: ?id=ID"))
			return
		}
		out, err := remove(r.Context(), id)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, out)
	})
}

// LeaveHandler serves LeavePath: leave makes this node leave the cluster,
// and runs after the answer is sent. Only members, holding the node
// credential, may ask: the leader asks the node it removes.
func LeaveHandler(node string, leave func()) http.Handler {
	return guard([]string{node}, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		leave()
	})
}

// WriteHandler serves WritePath: apply applies a forwarded command on the
// leader. Its error's code (Answer: an Error's, or that of the sentinel it
// wraps) tells the forwarding node whether to retry (not_leader,
// unknown_outcome, apply_stalled); any other error is the write's own. Only members, holding the node credential, may forward:
// the leader applies the command as it is, without the checks a client's
// statement goes through on the node that took it.
func WriteHandler(node string, apply func(context.Context, wal.Command) (*wal.Result, error)) http.Handler {
	return guard([]string{node}, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		cmd, err := readCommand(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		res, err := apply(r.Context(), cmd)
		if err != nil {
			writeError(w, err)
			return
		}
		enc, err := res.MarshalBinary()
		if err != nil {
			writeError(w, fmt.Errorf("encode write result: %w", err))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(enc)
	})
}

// readCommand decodes a forwarded write: a batch of exactly one command.
func readCommand(w http.ResponseWriter, r *http.Request) (wal.Command, error) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, MaxWriteBytes), r.ContentLength)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return wal.Command{}, Errorf(CodeBadRequest, "write request exceeds %d bytes", MaxWriteBytes)
		}
		return wal.Command{}, Errorf(CodeBadRequest, "read write request: %v", err)
	}
	b, err := wal.Decode(body)
	if err != nil {
		return wal.Command{}, Errorf(CodeBadRequest, "malformed write request: %v", err)
	}
	if len(b.Commands) != 1 {
		return wal.Command{}, Errorf(CodeBadRequest, "a write request holds one command, not %d", len(b.Commands))
	}
	return b.Commands[0], nil
}

// BackupSend sends a backup: the state hash at its index in the headers,
// then size bytes of the DuckDB database file read from body.
type BackupSend func(h StateHash, body io.Reader, size int64) error

// backupStall bounds how long a backup's answer may make no progress: a
// client that stops reading would otherwise hold the node's one backup
// slot and its copy on disk for as long as it keeps the connection.
var backupStall = 30 * time.Second

// backupChunk is how much of a backup is written per write deadline.
const backupChunk = 1 << 20

// BackupHandler serves BackupPath to admins: backup writes a backup
// file, hands it to send, and removes it once send returns. An error
// before send is answered as an Error; one during it (or a client that
// reads nothing for backupStall) cuts the answer short, which the client
// detects by the Content-Length.
func BackupHandler(creds Credentials, backup func(context.Context, BackupSend) error) http.Handler {
	return Require(creds, tokens.Admin, http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
		sent := false
		err := backup(r.Context(), func(h StateHash, body io.Reader, size int64) error {
			sent = true
			hd := w.Header()
			hd.Set("Content-Type", "application/vnd.duckdb")
			hd.Set("Content-Length", strconv.FormatInt(size, 10))
			hd.Set(BackupIndexHeader, strconv.FormatUint(h.Index, 10))
			hd.Set(BackupHashHeader, h.Hash)
			hd.Set(BackupRowsHeader, strconv.FormatInt(h.Rows, 10))
			rc := http.NewResponseController(w)
			for size > 0 {
				// Not every ResponseWriter supports deadlines (a
				// test's recorder); the server's does.
				rc.SetWriteDeadline(time.Now().Add(backupStall))
				n, err := io.CopyN(w, body, min(size, backupChunk))
				size -= n
				if err != nil {
					return fmt.Errorf("send backup: %w", err)
				}
			}
			return nil
		})
		if err != nil && !sent {
			writeError(w, err)
		}
	})
}
