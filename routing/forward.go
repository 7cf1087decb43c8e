package routing

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/wal"
)

// WritePath is the internal endpoint through which followers hand writes to
// the leader. It shares the Quack port and token.
const WritePath = "/duckraft/v1/write"

// maxWriteRequest bounds a forwarded write's body.
const maxWriteRequest = 512 << 20

// errForward marks a failure to reach the leader: the write may be retried
// (with the same idempotency key) once a leader is known again.
var errForward = errors.New("duckraft: forwarding to the leader failed")

// writeRequest is a client write as the leader receives it: statements and
// appends in client order, and the idempotency key that makes a retry safe.
type writeRequest struct {
	Key        []byte
	Statements []string
	Appends    []appendRequest
	// Order interleaves the two lists: true takes the next statement,
	// false the next append.
	Order []bool
}

type appendRequest struct {
	Schema, Table string
	Chunk         []byte
}

type writeResponse struct {
	Result    *wal.Result
	Error     string
	NotLeader bool
	Unknown   bool
}

// Handler serves WritePath for followers' forwarded writes.
func (e *Executor) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if !bearerOK(r, e.cfg.Token) {
			http.Error(w, "Authentication failed", http.StatusUnauthorized)
			return
		}
		var req writeRequest
		if err := gob.NewDecoder(http.MaxBytesReader(w, r.Body, maxWriteRequest)).Decode(&req); err != nil {
			http.Error(w, fmt.Sprintf("malformed write request: %v", err), http.StatusBadRequest)
			return
		}
		var resp writeResponse
		if !e.cfg.Store.IsLeader() {
			resp.NotLeader = true
		} else if res, err := e.applyOnLeader(r.Context(), req); err != nil {
			resp.Error = err.Error()
			resp.NotLeader = errors.Is(err, replication.ErrNotLeader)
			resp.Unknown = errors.Is(err, replication.ErrUnknownOutcome)
		} else {
			resp.Result = res
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := gob.NewEncoder(w).Encode(&resp); err != nil {
			e.log.Warn("answer forwarded write", "err", err)
		}
	})
}

// forwarder sends writes to the leader's WritePath.
type forwarder struct {
	token string
	http  *http.Client
}

func newForwarder(token string) *forwarder {
	return &forwarder{token: token, http: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}}
}

func (f *forwarder) write(ctx context.Context, addr string, req writeRequest) (*wal.Result, error) {
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(&req); err != nil {
		return nil, fmt.Errorf("encode write: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+WritePath, &body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := f.http.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errForward, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%w: leader %s answered %s: %s", errForward, addr, resp.Status, bytes.TrimSpace(msg))
	}
	var wr writeResponse
	if err := gob.NewDecoder(resp.Body).Decode(&wr); err != nil {
		return nil, fmt.Errorf("%w: decode answer from %s: %w", errForward, addr, err)
	}
	switch {
	case wr.NotLeader:
		return nil, replication.ErrNotLeader
	case wr.Unknown:
		return nil, fmt.Errorf("%w: %s", replication.ErrUnknownOutcome, wr.Error)
	case wr.Error != "":
		return nil, errors.New(wr.Error)
	}
	return wr.Result, nil
}
