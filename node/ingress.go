package node

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

// Defaults of the ingress budgets (Config).
const (
	// DefaultMaxBodyBytesInFlight bounds the request bodies a node holds
	// at once: twice the default message limit.
	DefaultMaxBodyBytesInFlight int64 = 512 << 20
	// DefaultBudgetWait is how long a request waits for budget before it
	// is refused (code busy).
	DefaultBudgetWait = 5 * time.Second
)

// What a request may cost before its sender is known. The header is read
// from the first peekBytes of the message; a CONNECTION_REQUEST, which
// opens the session and carries the token, is at most maxConnectBytes,
// compressed or not. A compressed message's header is looked for in at most
// maxCompressedPeek bytes of its frame (a zstd block is at most 128 KiB);
// what is read of it past peekBytes before the header is known comes from
// a budget of its own, maxPeekBytesInFlight node-wide, so that senders who
// stall there cannot take the budget of bodies from everyone. Each attempt
// to decode the header costs up to peekCost of memory while it runs:
// wire.DecompressPrefix decodes in a window of up to 8 MiB, and measured
// 9.4 MiB per call on such a frame.
const (
	peekBytes            = 4096
	maxConnectBytes      = 64 << 10
	maxCompressedPeek    = 256 << 10
	maxPeekBytesInFlight = 32 << 20
	peekCost             = 10 << 20
	// bodyStep is the budget a body of unknown length (chunked) takes at
	// a time as it arrives.
	bodyStep = 64 << 10
)

// IngressStats is what a server holds of request bytes: bodies being
// received or handled, and bytes decompressed from compressed requests,
// now and at most since it started. Members' requests are not counted.
type IngressStats struct {
	BodyBytes, BodyPeak                 int64
	DecompressedBytes, DecompressedPeak int64
}

// IngressStats returns what the server holds of request bytes now, and
// the most it held.
func (s *Server) IngressStats() IngressStats {
	b, bp := s.bodies.usage()
	d, dp := s.inflated.usage()
	return IngressStats{BodyBytes: b, BodyPeak: bp, DecompressedBytes: d, DecompressedPeak: dp}
}

// byteBudget is a number of bytes that requests take and give back; a
// request that does not fit waits a while for others to give some back.
type byteBudget struct {
	limit int64

	mu         sync.Mutex
	used, peak int64
	// freed is closed, and replaced, whenever bytes are given back.
	freed chan struct{}
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// take reserves n bytes, waiting at most wait (and while ctx lasts) for
// others to give back enough. It reports whether it did; more than the
// whole budget is never granted.
func (b *byteBudget) take(ctx context.Context, n int64, wait time.Duration) bool {
	if n <= 0 {
		return true
	}
	if n > b.limit {
		return false
	}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// give returns n bytes taken before.
func (b *byteBudget) give(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

func (b *byteBudget) usage() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// errBusy refuses a request that found no budget within the wait. Its
// body was not read; it may be sent again.
type errBusy struct {
	what  string
	limit int64
}

func (e *errBusy) Error() string {
	return fmt.Sprintf("the server is busy: it holds as many bytes of %s as it allows (%d); retry the request", e.what, e.limit)
}

// Unwrap makes the answer's code busy.
func (e *errBusy) Unwrap() error { return outcome.ErrBusy }

// inbound is one request being read, and the budget it holds until it is
// answered.
type inbound struct {
	s *Server
	r *http.Request
	// member is set for a member's request: it takes no budget.
	member bool
	// admitted is set once the request's session has been checked: a
	// refusal from then on is an answer to a client that holds a
	// credential, whose unread remainder net/http may drain so that the
	// client reads the answer rather than a reset.
	admitted bool
	// buf is what has been read of the body; done is set once all of it
	// has been.
	buf  []byte
	done bool
	// received counts the body's bytes read, as they came (compressed).
	received int
	// held is the budget taken, given back by release. What has been
	// read of the body is covered by held[bodies] and held[peeks]; step
	// is the one that a body of unknown length takes from as it arrives:
	// peeks while a compressed message's header is looked for, bodies
	// otherwise.
	held map[*byteBudget]int64
	step *byteBudget
}

// memberRequest reports whether r carries the members' credential.
func (s *Server) memberRequest(r *http.Request) bool {
	got := r.Header.Get(wire.MemberHeader)
	return s.cfg.MemberCredential != "" && got != "" &&
		subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.MemberCredential)) == 1
}

// take reserves n bytes of b for the request, unless it is a member's.
func (in *inbound) take(b *byteBudget, n int64) bool {
	if in.member || n <= 0 {
		return true
	}
	if !b.take(in.r.Context(), n, in.s.cfg.BudgetWait) {
		return false
	}
	if in.held == nil {
		in.held = make(map[*byteBudget]int64, 3)
	}
	in.held[b] += n
	return true
}

// give returns up to n bytes of b that the request holds.
func (in *inbound) give(b *byteBudget, n int64) {
	n = min(n, in.held[b])
	in.held[b] -= n
	b.give(n)
}

// release gives back everything the request holds.
func (in *inbound) release() {
	for b, n := range in.held {
		b.give(n)
	}
	in.held = nil
}

// covered is how much of the body the request holds budget for.
func (in *inbound) covered() int64 { return in.held[in.s.bodies] + in.held[in.s.peeks] }

// cover takes budget from b for the body up to n bytes.
func (in *inbound) cover(b *byteBudget, n int64) error {
	if in.member || n <= in.covered() {
		return nil
	}
	if !in.take(b, n-in.covered()) {
		return in.s.busy(b)
	}
	return nil
}

// busy is the refusal of a request that found no room in b.
func (s *Server) busy(b *byteBudget) error {
	what := "request bodies"
	switch b {
	case s.peeks:
		what = "compressed requests whose header is still arriving"
	case s.inflated:
		what = "decompressed requests"
	}
	return &errBusy{what: what, limit: b.limit}
}

// readTo reads the body until buf holds n bytes or the body ends. A body
// of unknown length takes budget (in.step) as it arrives, bodyStep at a
// time; one of known length has taken it before.
func (in *inbound) readTo(n int) error {
	if in.done || len(in.buf) >= n {
		return nil
	}
	if in.r.ContentLength >= 0 {
		n = min(n, int(in.r.ContentLength))
	}
	for len(in.buf) < n {
		want := n
		if in.r.ContentLength < 0 {
			want = min(n, len(in.buf)+bodyStep)
			if err := in.cover(in.step, int64(want)); err != nil {
				return err
			}
		}
		if cap(in.buf) < want {
			grown := make([]byte, len(in.buf), max(want, 2*cap(in.buf)))
			copy(grown, in.buf)
			in.buf = grown
		}
		m, err := in.r.Body.Read(in.buf[len(in.buf):want])
		in.buf = in.buf[:len(in.buf)+m]
		in.received += m
		if errors.Is(err, io.EOF) {
			in.done = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	if in.r.ContentLength >= 0 && len(in.buf) == int(in.r.ContentLength) {
		in.done = true
	}
	return nil
}

// errTooLarge refuses a message over the limit that applies to it.
func errTooLarge(limit int64) response {
	return errorResponse(fmt.Sprintf("message exceeds the server's limit of %d bytes", limit))
}

// read reads a request within the node's limits: first its header, from
// the first bytes of the body (decompressed, for a compressed body), and
// the session it names and that session's credential; only then, for a
// request that may have one, the body, up to the limit that applies to it
// and within the node's budgets. A request that names no open session, or
// of a type no client sends, is refused before the rest of its body is
// read; a CONNECTION_REQUEST is at most maxConnectBytes. It returns the
// message's header, its body (after the header), the session it belongs
// to (nil for a CONNECTION_REQUEST), or the answer that refuses it.
// failed is set when the body could not be read: nothing can be answered.
func (in *inbound) read(ctx context.Context) (h wire.Header, body *wire.Reader, sess *Session, refused *response, failed error) {
	s := in.s
	refuse := func(resp response) (wire.Header, *wire.Reader, *Session, *response, error) {
		return h, nil, nil, &resp, nil
	}
	var away *response
	// A failure to read is the connection's, or a deadline's; a budget
	// that did not come is the server's answer.
	readFailed := func(err error) (wire.Header, *wire.Reader, *Session, *response, error) {
		if busy, ok := errors.AsType[*errBusy](err); ok {
			return refuse(failure(busy))
		}
		return h, nil, nil, nil, err
	}
	in.step = s.bodies
	first := int64(peekBytes)
	if in.r.ContentLength >= 0 {
		first = min(first, in.r.ContentLength)
	}
	if err := in.cover(s.bodies, first); err != nil {
		return readFailed(err)
	}
	if err := in.readTo(peekBytes); err != nil {
		return readFailed(err)
	}
	prefix := in.buf
	if wire.IsCompressed(in.buf) {
		var resp *response
		if prefix, resp = in.peekCompressed(); resp != nil {
			return refuse(*resp)
		}
	}
	h, _, err := wire.DecodeHeader(prefix)
	if err != nil {
		return refuse(errorResponse(fmt.Sprintf("malformed message header: %v", err)))
	}

	limit := s.cfg.MaxMessageBytes
	switch {
	case h.Type == wire.MsgConnectionRequest:
		limit = maxConnectBytes
	case !requestType(h.Type):
		return refuse(errorResponse("Unsupported message type for server"))
	default:
		var resp *response
		if sess, resp = s.admit(ctx, h); resp != nil && resp.away == nil {
			return refuse(*resp)
		}
		// A request another node serves is read whole, as this node's
		// would be, and sent there as it came (forward.go).
		if away = resp; away == nil {
			in.member = in.member || sess.member
			in.admitted = true
		}
	}
	if in.r.ContentLength > limit {
		return refuse(errTooLarge(limit))
	}
	// The header is known: what was read to find it moves to the budget
	// of bodies, with the rest of the body.
	if peeked := in.held[s.peeks]; peeked > 0 {
		if !in.take(s.bodies, peeked) {
			return refuse(failure(s.busy(s.bodies)))
		}
		in.give(s.peeks, peeked)
	}
	if in.r.ContentLength >= 0 {
		if err := in.cover(s.bodies, in.r.ContentLength); err != nil {
			return readFailed(err)
		}
	}
	if err := in.readTo(int(limit) + 1); err != nil {
		return readFailed(err)
	}
	if int64(len(in.buf)) > limit {
		return refuse(errTooLarge(limit))
	}
	if away != nil {
		return refuse(*away)
	}
	msg := in.buf
	if wire.IsCompressed(msg) {
		var resp *response
		if msg, resp = in.decompress(sess, limit); resp != nil {
			return refuse(*resp)
		}
	}
	h, body, err = wire.DecodeHeader(msg)
	if err != nil {
		return refuse(errorResponse(fmt.Sprintf("malformed message header: %v", err)))
	}
	if sess != nil && s.session(h.ConnectionID) != sess {
		// It ended (expired, disconnected) while its body arrived.
		return refuse(unknownSession())
	}
	return h, body, sess, nil, nil
}

// peekCompressed decodes the start of a compressed message, for its header,
// reading more of the frame, from the budget of peeks, while its first
// block is not all in. Each attempt's memory is taken from the node's
// decompression budget while it runs.
func (in *inbound) peekCompressed() ([]byte, *response) {
	s := in.s
	in.step = s.peeks
	for {
		if !in.take(s.inflated, peekCost) {
			resp := failure(s.busy(s.inflated))
			return nil, &resp
		}
		prefix, err := wire.DecompressPrefix(in.buf, peekBytes)
		in.give(s.inflated, peekCost)
		if err == nil {
			in.step = s.bodies
			return prefix, nil
		}
		if in.done || len(in.buf) >= maxCompressedPeek {
			resp := errorResponse(fmt.Sprintf("malformed compressed message: %v", err))
			return nil, &resp
		}
		n := min(2*len(in.buf), maxCompressedPeek)
		if in.r.ContentLength >= 0 {
			if err := in.cover(s.peeks, min(int64(n), in.r.ContentLength)); err != nil {
				resp := failure(err)
				return nil, &resp
			}
		}
		if err := in.readTo(n); err != nil {
			if _, busy := errors.AsType[*errBusy](err); busy {
				resp := failure(err)
				return nil, &resp
			}
			resp := errorResponse(fmt.Sprintf("malformed compressed message: %v", err))
			return nil, &resp
		}
	}
}

// decompress decompresses the whole message, within limit, once the
// bytes it declares are taken from the node's decompression budget and
// from its session's. The compressed bytes are given back once it is.
func (in *inbound) decompress(sess *Session, limit int64) ([]byte, *response) {
	s := in.s
	size := wire.DeclaredSize(in.buf)
	if size > uint64(limit) {
		resp := errorResponse(fmt.Sprintf("malformed compressed message: it declares %d bytes, over the limit of %d", size, limit))
		return nil, &resp
	}
	if sess != nil && !in.take(sess.inflate, int64(size)) {
		resp := failure(&errBusy{what: "this session's decompressed requests", limit: sess.inflate.limit})
		return nil, &resp
	}
	if !in.take(s.inflated, int64(size)) {
		resp := failure(s.busy(s.inflated))
		return nil, &resp
	}
	msg, err := wire.Decompress(in.buf, int(limit))
	if err != nil {
		resp := errorResponse(fmt.Sprintf("malformed compressed message: %v", err))
		return nil, &resp
	}
	in.give(s.bodies, int64(len(in.buf)))
	in.buf = nil
	return msg, nil
}

// requestType reports whether t is a message a client sends in a session.
func requestType(t wire.MessageType) bool {
	switch t {
	case wire.MsgPrepareRequest, wire.MsgFetchRequest, wire.MsgAppendRequest, wire.MsgDisconnect,
		wire.MsgCancelRequest, wire.MsgHeartbeatRequest, wire.MsgAcknowledgement, wire.MsgProgressRequest:
		return true
	}
	return false
}
