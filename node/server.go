// Package node is one Quack node: DuckDB served over Quack, DuckDB's own
// client/server protocol, to unmodified DuckDB clients and to the Go client
// in node/client. It knows nothing of Raft or gossip: a cluster plugs its
// routing in through the Executor interface.
package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxMessageBytes = 256 << 20
	DefaultMaxSessions     = 1024
	DefaultIdleTimeout     = time.Hour
	// DefaultMaxLease is the longest Q3 heartbeat lease granted: a client
	// that asks for more gets this, and is told so in the handshake.
	DefaultMaxLease = 10 * time.Minute
	// DefaultReadHeaderTimeout bounds a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout and DefaultMinBodyRate bound a request's body:
	// 30 s plus one second per 64 KiB received (a 256 MiB body may take
	// 68 minutes, a body trickled a byte a second is dropped after 30 s).
	DefaultBodyTimeout       = 30 * time.Second
	DefaultMinBodyRate int64 = 64 << 10
	// defaultInlineRows is what a Q3 PREPARE carries inline when the
	// request does not say.
	defaultInlineRows = batchChunks * 2048
)

// An Executor runs statements and appends for a session. The default runs
// them on the session's own connection; a cluster sends writes through Raft.
// The server refuses appends and insert streams of a session whose role
// (Session.Role) does not allow writing; statements it cannot classify, so
// an Executor that serves such sessions refuses their writes itself (a
// PermissionError). LocalExecutor classifies nothing: a server running it
// admits write and admin tokens only.
type Executor interface {
	Query(ctx context.Context, s *Session, sql string) (Rows, error)
	// Append appends chunk to table in the schema at path schema: one
	// name, or a nested schema's (DuckDB 2.0) outermost first.
	Append(ctx context.Context, s *Session, schema []string, table string, chunk *wire.DataChunk) error
	// InTransaction reports whether the session has a transaction open,
	// which a Q3 insert stream joins rather than opening its own.
	InTransaction(s *Session) bool
}

// A SessionEnder is an Executor that keeps state per session beyond the
// session's own connection (a cluster's sessions on other nodes, say): the
// server calls EndSession once for every session that ends, whether the
// client disconnected, its lease ran out or the server closed.
type SessionEnder interface {
	EndSession(s *Session)
}

// A CodedError carries a machine-readable code besides its message. The
// server sends the code in the wire.ErrorCodeHeader of the ERROR_RESPONSE's
// HTTP answer, so that a cluster's nodes branch on codes rather than on message
// text; DuckDB's clients ignore the header. An error whose code says all
// there is to say need not be one: wrapping one of outcome's sentinels
// gives it that sentinel's code (CodeOf).
type CodedError interface {
	error
	ErrorCode() string
}

// CodeOf is the code the server answers err with: the ErrorCode of the
// first CodedError err wraps, which may carry more than the code (a
// node's index), else the code of the first of outcome's sentinels it
// wraps; "" for neither.
func CodeOf(err error) string {
	if ce, ok := errors.AsType[CodedError](err); ok {
		return ce.ErrorCode()
	}
	return string(outcome.Of(err))
}

// RequestHeader returns the HTTP header of the Quack request whose
// statement runs under ctx, or nil. A cluster passes what a statement needs
// beyond its text (the index a routed read must wait for, say) there, not
// inside the SQL.
func RequestHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(requestHeaderKey{}).(http.Header)
	return h
}

type requestHeaderKey struct{}

// LocalExecutor runs everything on the session's own DuckDB connection.
type LocalExecutor struct{}

// Query implements Executor.
func (LocalExecutor) Query(ctx context.Context, s *Session, sql string) (Rows, error) {
	res, err := s.Conn().Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// InTransaction implements Executor.
func (LocalExecutor) InTransaction(s *Session) bool { return s.Conn().InTransaction() }

// Append implements Executor.
func (LocalExecutor) Append(_ context.Context, s *Session, schema []string, table string, chunk *wire.DataChunk) error {
	return s.Conn().AppendPath(schema, table, chunk)
}

// Config configures a Server.
type Config struct {
	DB            *engine.DB
	Authenticator Authenticator
	// Authorizer is consulted for every statement; nil admits everything.
	Authorizer Authorizer
	// Executor runs statements; nil means LocalExecutor.
	Executor Executor
	// MaxMessageBytes bounds a request body; larger ones get an error.
	// Only a request of an open session may be that large: the header
	// and the session it names are checked first, and a
	// CONNECTION_REQUEST is at most 64 KiB.
	MaxMessageBytes int64
	// MaxBodyBytesInFlight bounds the bytes of request bodies the server
	// holds at once, being received or handled; a body that does not fit
	// waits BudgetWait and is then refused unread (code busy).
	// 0 is DefaultMaxBodyBytesInFlight; never less than MaxMessageBytes.
	MaxBodyBytesInFlight int64
	// MaxDecompressedBytes bounds the bytes decompressed from compressed
	// requests held at once, node-wide, and MaxSessionDecompressedBytes
	// those of one session; a request that does not fit waits BudgetWait
	// and is then refused. 0 is MaxMessageBytes for both: one message at
	// the limit at a time (the node-wide budget is never less than the
	// 10 MiB that decoding a compressed message's header may take). The live bytes are bounded; the process's
	// memory, which the garbage collector gives back later, grows to a
	// few times that under a flood of large compressed requests.
	MaxDecompressedBytes        int64
	MaxSessionDecompressedBytes int64
	// BudgetWait is how long a request waits for the budgets above; 0 is
	// DefaultBudgetWait.
	BudgetWait time.Duration
	// MaxSessions bounds the concurrent sessions of clients; more are
	// refused. Members' sessions (MemberCredential) are not counted.
	MaxSessions int
	// MaxSessionsPerClient bounds the concurrent sessions of one client
	// address, so that one client cannot take every session of the
	// server; 0 is a quarter of MaxSessions.
	MaxSessionsPerClient int
	// MemberCredential is the credential of a cluster's members (the
	// node credential). A session whose CONNECTION_REQUEST carries it in
	// the wire.MemberHeader is a member's: members' sessions carry their
	// own clients' requests (routed reads), checked where those clients
	// connected, so they are outside MaxSessions and
	// MaxSessionsPerClient, and their requests outside the budgets above.
	// The session still needs an accepted token. Empty: no member.
	MemberCredential string
	// MaxConns bounds the TCP connections Serve (or a listener wrapped
	// by LimitListener) holds open, and MaxConnsPerClient those from one
	// address; a connection past either is closed as soon as it is
	// accepted, before a byte is read. 0 is DefaultMaxConns() and
	// DefaultMaxConnsPerClient (at most MaxConns).
	MaxConns          int
	MaxConnsPerClient int
	// MemberHost reports whether a connection's peer address is a
	// member's, whose connections are outside MaxConns and
	// MaxConnsPerClient: when a connection is accepted no credential has
	// been read, so the address is all there is. nil: none.
	MemberHost func(host string) bool
	// MaxRunningStatements bounds the client statements that run in
	// DuckDB at once, members' sessions (reads routed here) included, and
	// MaxRunningStatementsPerClient those of one client (a token from an
	// address; a routed read counts for the client its member names,
	// PrincipalHeader): others wait for a turn, which goes to the waiting
	// client holding the fewest, at most AdmissionWait and while their
	// context lasts, and are then refused (code busy). A turn covers
	// DuckDB's work for a statement, not a streamed result's idle time
	// between FETCHes (engine.Conn.Pause); the node's own connections (the
	// applier, snapshots, hashes, backups) take none. 0 is
	// DefaultMaxRunningStatements(), DefaultMaxRunningStatementsPerClient
	// (at most MaxRunningStatements) and DefaultAdmissionWait.
	MaxRunningStatements          int
	MaxRunningStatementsPerClient int
	AdmissionWait                 time.Duration
	// StatementMemoryLimit is each client session's DuckDB
	// operator_memory_limit (engine.DB.SetClientMemoryLimit): what a
	// statement's sorts, hash tables and joins hold before they spill to
	// disk, a DuckDB size ("256MB"). "" is DefaultStatementMemoryLimit;
	// "none" sets none.
	StatementMemoryLimit string
	// MaxLease bounds the heartbeat lease a Q3 client may ask for, so a
	// session that asks for the largest still ends when idle; 0 is
	// DefaultMaxLease.
	MaxLease time.Duration
	// ReadHeaderTimeout bounds how long a request's headers may take to
	// arrive (Serve); 0 is DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// BodyTimeout and MinBodyRate bound how long a request's body may
	// take: BodyTimeout, plus one second for every MinBodyRate bytes
	// received, so a large body on a slow link arrives and a body sent a
	// byte at a time does not hold its handler. 0 is
	// DefaultBodyTimeout and DefaultMinBodyRate.
	BodyTimeout time.Duration
	MinBodyRate int64
	// IdleTimeout ends Q1 sessions that sent nothing for this long (Q1
	// clients have no heartbeat); Q3 sessions use their own lease.
	IdleTimeout time.Duration
	// Cluster, when set with MemberCredential, makes the server one of a
	// cluster's nodes: its session ids are signed, and a request for a
	// session another node holds is served there (forward.go, adopt.go),
	// if the Executor is a Migrator.
	Cluster *ClusterSessions
	// HiddenSchemas are left out of the catalog an attaching client loads.
	HiddenSchemas []string
	// ObserveRequest, if set, is told of every Quack request answered:
	// the daemon counts them for its metrics. It runs on the request's
	// goroutine, after the answer is written, so it must be quick.
	ObserveRequest func(RequestStats)
	// ObserveForward, ObserveAdopt and ObserveSessionLost, if set, are
	// told what the server did for sessions it does not hold (forward.go,
	// adopt.go): each request it forwarded to the node holding its
	// session, with how that ended; each session it adopted when its node
	// failed, with the error that undid the adoption if one did; each
	// session it found lost, once. The daemon counts them for its
	// metrics. They run on the request's goroutine, so must be quick.
	ObserveForward     func(ForwardOutcome)
	ObserveAdopt       func(error)
	ObserveSessionLost func()
	Logger             *slog.Logger
}

// RequestStats describes one answered Quack request.
type RequestStats struct {
	// Type is the request's message type; zero when its header could not
	// be decoded (or the body was too large to read).
	Type wire.MessageType
	// Failed is set when the answer was an ERROR_RESPONSE, and Code is its
	// error code if it had one (outcome.UnknownSession, CodeOf's).
	Failed bool
	Code   string
	// Duration runs from the request's arrival to the answer's last byte
	// handed to the connection.
	Duration time.Duration
	// BytesIn is the request body as received (compressed, if it was);
	// BytesOut the answer's body.
	BytesIn, BytesOut int
}

// Server serves the Quack protocol over HTTP.
type Server struct {
	cfg  Config
	log  *slog.Logger
	lim  wire.Limits
	stop chan struct{}
	wg   sync.WaitGroup
	// bodies, peeks and inflated are the budgets of request bytes in
	// flight: bodies as received, compressed bytes read to find a
	// message's header, and bytes decompressed.
	bodies, peeks, inflated *byteBudget
	// gate gives client statements their turns (admission.go), each
	// counted for its client (principal.go).
	gate *admission

	mu       sync.Mutex
	sessions map[string]*Session
	// clients counts the clients' sessions (not the members'), and
	// perClient those of each client address.
	clients   int
	perClient map[string]int
	closed    bool
	// adopting serialises the adoptions of each session (adopt.go).
	adopting adoptions
	// lost are sessions found lost, told ObserveSessionLost once
	// (forward.go).
	lost lostSessions
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("node: Config.DB is required")
	}
	if cfg.Authenticator == nil {
		return nil, errors.New("node: Config.Authenticator is required")
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = AllowAll{}
	}
	if cfg.Executor == nil {
		cfg.Executor = LocalExecutor{}
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxSessionsPerClient <= 0 {
		cfg.MaxSessionsPerClient = max(1, cfg.MaxSessions/4)
	}
	if cfg.MaxBodyBytesInFlight <= 0 {
		cfg.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	cfg.MaxBodyBytesInFlight = max(cfg.MaxBodyBytesInFlight, cfg.MaxMessageBytes)
	if cfg.MaxDecompressedBytes <= 0 {
		cfg.MaxDecompressedBytes = cfg.MaxMessageBytes
	}
	// Room for at least one compressed header's decoding.
	cfg.MaxDecompressedBytes = max(cfg.MaxDecompressedBytes, peekCost)
	if cfg.MaxSessionDecompressedBytes <= 0 {
		cfg.MaxSessionDecompressedBytes = cfg.MaxMessageBytes
	}
	if cfg.BudgetWait <= 0 {
		cfg.BudgetWait = DefaultBudgetWait
	}
	if cfg.MaxRunningStatements <= 0 {
		cfg.MaxRunningStatements = DefaultMaxRunningStatements()
	}
	if cfg.MaxRunningStatementsPerClient <= 0 {
		cfg.MaxRunningStatementsPerClient = DefaultMaxRunningStatementsPerClient(cfg.MaxRunningStatements)
	}
	cfg.MaxRunningStatementsPerClient = min(cfg.MaxRunningStatementsPerClient, cfg.MaxRunningStatements)
	if cfg.AdmissionWait <= 0 {
		cfg.AdmissionWait = DefaultAdmissionWait
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns()
	}
	if cfg.MaxConnsPerClient <= 0 {
		cfg.MaxConnsPerClient = DefaultMaxConnsPerClient
	}
	cfg.MaxConnsPerClient = min(cfg.MaxConnsPerClient, cfg.MaxConns)
	if cfg.MemberHost == nil {
		cfg.MemberHost = func(string) bool { return false }
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = DefaultMaxLease
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		stop:      make(chan struct{}),
		bodies:    newByteBudget(cfg.MaxBodyBytesInFlight),
		peeks:     newByteBudget(maxPeekBytesInFlight),
		inflated:  newByteBudget(cfg.MaxDecompressedBytes),
		gate:      newAdmission(cfg.MaxRunningStatements, cfg.MaxRunningStatementsPerClient, cfg.AdmissionWait),
		sessions:  make(map[string]*Session),
		perClient: make(map[string]int),
	}
	if err := s.limitStatementMemory(); err != nil {
		return nil, err
	}
	// Every client connection of the database takes its statements'
	// turns here (engine.Conn.Pause gives them back between FETCHes).
	cfg.DB.SetAdmitter(s.gate)
	s.wg.Add(1)
	go s.reapLoop()
	return s, nil
}

// Handler returns the HTTP handler: POST /quack, its CORS pre-flight, and a
// banner at /. Request bodies are read within the body deadline
// (GuardBodies).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /quack", s.routeQuack)
	mux.HandleFunc("OPTIONS /quack", func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "*")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "duckraft: a DuckDB Quack endpoint (POST /quack)\n")
	})
	return GuardBodies(mux, s.cfg.BodyTimeout, s.cfg.MinBodyRate)
}

// Serve accepts connections on l, within the connection caps
// (LimitListener), until Close. It returns http.ErrServerClosed after
// Close.
func (s *Server) Serve(l net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() {
		<-s.stop
		hs.Close()
	}()
	return hs.Serve(s.LimitListener(l))
}

// Close ends every session and stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sessions := s.sessions
	s.sessions = map[string]*Session{}
	s.mu.Unlock()
	close(s.stop)
	for _, sess := range sessions {
		s.endSession(sess)
	}
	s.wg.Wait()
	return nil
}

// SessionCount returns the number of open sessions.
func (s *Server) SessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) reapLoop() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			var dead []*Session
			for _, sess := range s.sessions {
				if sess.expired(now) {
					dead = append(dead, sess)
					s.forgetLocked(sess)
				}
			}
			s.mu.Unlock()
			for _, sess := range dead {
				s.log.Info("session expired", "session", sess.id)
				s.endSession(sess)
			}
		}
	}
}

// errorMessage is the text an ERROR_RESPONSE carries: DuckDB's raw message,
// without the "<Type> Error: " prefix, as DuckDB's own server sends it.
func errorMessage(err error) string {
	return engine.RawMessage(err)
}

func (s *Server) serveQuack(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, resp, received, ok := s.answer(w, r)
	if !ok {
		return
	}
	s.log.Debug("quack", "type", h.Type, "session", h.ConnectionID, "client_query_id", h.ClientQueryID.Value,
		"response", resp.header.Type, "duration", time.Since(start))
	sent := s.write(w, resp)
	for _, b := range resp.bufs {
		b.Release()
	}
	if s.cfg.ObserveRequest != nil {
		s.cfg.ObserveRequest(RequestStats{Type: h.Type, Failed: resp.header.Type == wire.MsgErrorResponse, Code: resp.code,
			Duration: time.Since(start), BytesIn: received, BytesOut: sent})
	}
}

// answer reads, decodes and handles one request, and returns its header
// (zero when it could not be decoded), the answer, and how many bytes the
// request body had. ok is false when the body could not be read at all: the
// connection failed, and nothing can be answered.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) (h wire.Header, resp response, received int, ok bool) {
	ctx := context.WithValue(r.Context(), requestHeaderKey{}, r.Header)
	in := &inbound{s: s, r: r, member: s.memberRequest(r)}
	ctx = context.WithValue(context.WithValue(ctx, clientKey{}, clientHost(r)), memberKey{}, in.member)
	defer in.release()
	h, body, sess, refused, err := in.read(ctx)
	if err != nil {
		s.log.Debug("read request", "err", err)
		return h, resp, in.received, false
	}
	switch {
	case refused != nil && refused.away != nil:
		var relayed bool
		if resp, relayed = s.serveElsewhere(ctx, w, in, h, refused.away); relayed {
			return h, resp, in.received, false
		}
	case refused != nil:
		if !in.done && !in.admitted {
			// A stranger's body is not read: net/http, which would read
			// up to 256 KiB of it to reuse the connection, gives up at
			// once and closes the connection after the answer. A
			// session's client (a message over the limit) has the rest
			// of its body read, up to net/http's 256 KiB and within
			// GuardBodies' deadline, so that it reads the answer rather
			// than a connection reset while it is still sending.
			http.NewResponseController(w).SetReadDeadline(time.Now())
		}
		resp = *refused
	case sess == nil:
		resp = s.connect(ctx, body)
	default:
		resp = s.handle(ctx, h, sess, body)
	}
	if resp.header.Type == wire.MsgErrorResponse {
		// A Q3 client reads the exception type of an error of its
		// session; the message alone is the same in every generation.
		if sess := s.session(h.ConnectionID); sess != nil {
			resp.gen = sess.gen
		}
	}
	return h, resp, in.received, true
}

// response is one message to send back.
type response struct {
	gen    wire.Generation
	header wire.Header
	body   wire.Message
	// code is the error's code (CodeOf), sent as wire.ErrorCodeHeader.
	code string
	// bufs are references to the pooled buffers that the body's chunks
	// are in, released once the response is written.
	bufs []*wire.Buffer
	// away, instead of an answer, says that another node holds the
	// request's session (forward.go).
	away *away
}

func errorResponse(msg string) response {
	return response{gen: wire.Q1, header: wire.Header{Type: wire.MsgErrorResponse}, body: &wire.ErrorResponse{Message: msg}}
}

func codedResponse(msg string, code outcome.Code) response {
	resp := errorResponse(msg)
	resp.code = string(code)
	return resp
}

// unknownSession answers a request that names no open session, as
// DuckDB's server words it.
func unknownSession() response {
	return codedResponse("Invalid connection id", outcome.UnknownSession)
}

// failure is the ERROR_RESPONSE for err, with its code if it has one and
// its DuckDB exception type (which only Q3 bodies carry).
func failure(err error) response {
	resp := errorResponse(errorMessage(err))
	resp.body.(*wire.ErrorResponse).ExceptionType = engine.ExceptionType(err)
	resp.code = CodeOf(err)
	return resp
}

func success(g wire.Generation) response {
	return response{gen: g, header: wire.Header{Type: wire.MsgSuccessResponse}, body: &wire.SuccessResponse{}}
}

// write sends resp and returns the bytes of its body. A result's chunks,
// already encoded, are written from where they are, not copied into one
// buffer with the rest of the message first: a batch is megabytes.
func (s *Server) write(w http.ResponseWriter, resp response) int {
	parts, err := wire.MessageParts(make([]byte, 0, 512), resp.gen, resp.header, resp.body)
	if err != nil {
		s.log.Error("encode response", "type", resp.header.Type, "err", err)
		out, _ := wire.AppendMessage(nil, wire.Q1, wire.Header{Type: wire.MsgErrorResponse},
			&wire.ErrorResponse{Message: fmt.Sprintf("encode response: %v", err)})
		parts = [][]byte{out}
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/vnd.duckdb")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Content-Length", strconv.Itoa(n))
	if resp.code != "" {
		h.Set(wire.ErrorCodeHeader, resp.code)
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			break
		}
	}
	return n
}

// admit checks a request of a session before its body is read: the
// session it names is open, its lease has not run out, and its token is
// still accepted.
func (s *Server) admit(ctx context.Context, h wire.Header) (*Session, *response) {
	if resp := checkConnectionID(ctx, h); resp != nil {
		return nil, resp
	}
	sess := s.session(h.ConnectionID)
	if sess != nil && sess.MovedFrom() != "" {
		// Adopted here, perhaps still: its state may not be installed.
		if err := s.adopting.wait(ctx, sess.id); err != nil {
			resp := failure(err)
			return nil, &resp
		}
		sess = s.session(h.ConnectionID)
	}
	if sess == nil || s.moved(sess) {
		// Another node's, or one whose node died (forward.go).
		var resp *response
		if sess, resp = s.elsewhere(ctx, h); resp != nil {
			return nil, resp
		}
	}
	now := time.Now()
	if sess.expired(now) {
		s.removeSession(sess)
		resp := codedResponse("Connection heartbeat lease expired", outcome.SessionExpired)
		return nil, &resp
	}
	// The token is checked again on every request, so one removed from
	// the node's tokens file ends its sessions at their next request, and
	// a changed role applies at once.
	role, err := s.cfg.Authenticator.Authenticate(ctx, sess.id, sess.auth)
	if err != nil {
		s.removeSession(sess)
		s.log.Info("session ended: its token is no longer accepted", "session", sess.id)
		resp := codedResponse(ErrAuthentication.Error(), outcome.Unauthorized)
		return nil, &resp
	}
	sess.setRole(role)
	sess.touch(now)
	return sess, nil
}

// handle answers a request of sess, admitted and read.
func (s *Server) handle(ctx context.Context, h wire.Header, sess *Session, body *wire.Reader) response {
	sess.touch(time.Now())
	msg, err := wire.DecodeBody(sess.gen, h.Type, body, s.lim)
	if err != nil {
		return errorResponse(fmt.Sprintf("malformed %v message: %v", h.Type, err))
	}
	switch m := msg.(type) {
	case *wire.PrepareRequest:
		return s.prepare(ctx, sess, m)
	case *wire.FetchRequest:
		return s.fetch(sess, m)
	case *wire.AppendRequest:
		return s.append(ctx, sess, m)
	case *wire.SendDataRequest:
		return s.sendData(ctx, sess, m)
	case *wire.DisconnectMessage:
		s.removeSession(sess)
		return success(sess.gen)
	case *wire.CancelRequest:
		return s.cancel(sess, m)
	case *wire.HeartbeatRequest, *wire.Acknowledgement:
		return success(sess.gen)
	case *wire.ProgressRequest:
		return response{gen: sess.gen, header: wire.Header{Type: wire.MsgProgressResponse},
			body: &wire.ProgressResponse{Progress: -1}}
	}
	return errorResponse(fmt.Sprintf("Unimplemented message type %v", h.Type))
}

func (s *Server) session(id string) *Session {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func (s *Server) removeSession(sess *Session) {
	s.mu.Lock()
	s.forgetLocked(sess)
	s.mu.Unlock()
	s.endSession(sess)
}

// forgetLocked drops sess from the server's lists, if it is still there.
// The caller holds s.mu.
func (s *Server) forgetLocked(sess *Session) {
	if s.sessions[sess.id] != sess {
		return
	}
	delete(s.sessions, sess.id)
	if !sess.member {
		s.clients--
		if s.perClient[sess.client]--; s.perClient[sess.client] <= 0 {
			delete(s.perClient, sess.client)
		}
	}
}

// clientKey carries a request's client address (clientHost) in its context,
// memberKey whether it carries the members' credential.
type (
	clientKey struct{}
	memberKey struct{}
)

// clientHost is the address a request came from, without its port: the
// unit of the per-client session cap.
func clientHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// endSession closes sess and tells the executor, once the server no longer
// lists it.
func (s *Server) endSession(sess *Session) {
	sess.close()
	if e, ok := s.cfg.Executor.(SessionEnder); ok {
		e.EndSession(sess)
	}
}

// maxLeaseSeconds is the largest heartbeat lease DuckDB accepts:
// ⌊(2^63−1)/1000⌋ seconds.
const maxLeaseSeconds = (1<<63 - 1) / 1000

func (s *Server) connect(ctx context.Context, body *wire.Reader) response {
	msg, err := wire.DecodeBody(wire.Q3, wire.MsgConnectionRequest, body, s.lim)
	if err != nil {
		return errorResponse(fmt.Sprintf("malformed CONNECTION_REQUEST: %v", err))
	}
	req := msg.(*wire.ConnectionRequest)
	var gen wire.Generation
	switch {
	case req.MinVersion <= 3 && 3 <= req.MaxVersion:
		gen = wire.Q3
		if req.HeartbeatTimeoutSeconds < 1 || req.HeartbeatTimeoutSeconds > maxLeaseSeconds {
			return errorResponse(fmt.Sprintf("heartbeat_timeout out of range - must be between 1 and %d seconds", uint64(maxLeaseSeconds)))
		}
	case req.MinVersion <= 1:
		gen = wire.Q1
	default:
		return errorResponse("Unsupported Quack version - server only supports versions 1 and 3 of quack")
	}
	id := newSessionID()
	role, err := s.cfg.Authenticator.Authenticate(ctx, id, req.AuthString)
	if err != nil {
		s.log.Info("authentication failed", "client_version", req.ClientDuckDBVersion, "client_platform", req.ClientPlatform)
		return errorResponse(ErrAuthentication.Error())
	}
	if _, local := s.cfg.Executor.(LocalExecutor); local && !role.Allows(tokens.Write) {
		// LocalExecutor runs every text as it comes: nothing tells its
		// reads from its writes, so it cannot hold a token to reading.
		return failure(&PermissionError{What: "a session on a server without a statement classifier", Have: role, Need: tokens.Write})
	}
	id = s.sessionID(id, gen, role)
	// A client's connection yields to replication (engine.ConnectClient).
	conn, err := s.cfg.DB.ConnectClient()
	if err != nil {
		return errorResponse(fmt.Sprintf("open session: %v", err))
	}
	sctx, cancel := context.WithCancel(context.Background())
	sess := &Session{id: id, gen: gen, conn: conn, ctx: sctx, cancel: cancel, lastUsed: time.Now(), auth: req.AuthString, role: role,
		inflate: newByteBudget(s.cfg.MaxSessionDecompressedBytes)}
	resp := &wire.ConnectionResponse{
		ServerDuckDBVersion: s.cfg.DB.Version(),
		ServerPlatform:      s.cfg.DB.Platform(),
		QuackVersion:        uint64(gen),
	}
	if gen == wire.Q3 {
		// A lease longer than the server's maximum is cut to it, and the
		// answer says so: the client heartbeats within what it was granted.
		granted := min(req.HeartbeatTimeoutSeconds, max(1, uint64(s.cfg.MaxLease/time.Second)))
		sess.lease = time.Duration(granted) * time.Second
		resp.HeartbeatTimeoutSeconds = granted
	} else {
		sess.lease = s.cfg.IdleTimeout
	}
	sess.client, _ = ctx.Value(clientKey{}).(string)
	sess.principal = clientPrincipal(req.AuthString, sess.client)
	// A member's sessions carry its own clients' requests: clients that
	// fill the caps must not refuse them.
	sess.member, _ = ctx.Value(memberKey{}).(bool)
	s.mu.Lock()
	var refused string
	switch {
	case s.closed || !sess.member && s.clients >= s.cfg.MaxSessions:
		refused = fmt.Sprintf("too many sessions: the server allows %d", s.cfg.MaxSessions)
	case !sess.member && s.perClient[sess.client] >= s.cfg.MaxSessionsPerClient:
		refused = fmt.Sprintf("too many sessions from %s: the server allows %d per client address; "+
			"close idle sessions", sess.client, s.cfg.MaxSessionsPerClient)
	}
	if refused != "" {
		s.mu.Unlock()
		cancel()
		conn.Close()
		s.log.Info("session refused", "client", sess.client, "reason", refused)
		return codedResponse(refused, outcome.TooManySessions)
	}
	s.sessions[id] = sess
	if !sess.member {
		s.clients++
		s.perClient[sess.client]++
	}
	s.mu.Unlock()
	s.opened(ctx, sess)
	s.log.Debug("session opened", "session", id, "generation", gen, "role", role, "member", sess.member, "client_version", req.ClientDuckDBVersion)
	return response{gen: gen, header: wire.Header{Type: wire.MsgConnectionResponse, ConnectionID: id}, body: resp}
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

func (s *Server) prepare(ctx context.Context, sess *Session, req *wire.PrepareRequest) response {
	s.abandonOwnStreams(ctx, sess)
	sql := req.SQL
	rewrite, err := s.cfg.Authorizer.Authorize(ctx, sess.id, sql)
	if err != nil {
		return errorResponse(ErrAuthorization.Error())
	}
	if rewrite != "" {
		sql = rewrite
	}
	if namesStreamFunction(sql) {
		target, stream, ok := parseInsertStream(sql)
		if !ok || sess.gen != wire.Q3 {
			return failure(errStreamStatement)
		}
		if err := sess.Require(tokens.Write, "INSERT INTO "+target); err != nil {
			return failure(err)
		}
		return s.openDataStream(sess, req, target, stream)
	}
	inlineAll := false
	if c, ok := s.catalogQuery(sql); ok {
		sql, inlineAll = c, sess.gen != wire.Q3
	}

	sess.exec.Lock()
	defer sess.exec.Unlock()
	sess.replaceResult(nil)
	// The statement runs under a context of its own that outlives this
	// request (the result streams on), which a CANCEL interrupts, as does
	// the client dropping this request before the answer: nobody would
	// read it.
	named := sess.gen != wire.Q1 || req.HasQueryUUID
	st := sess.beginStatement(req.QueryUUID, named)
	defer sess.settleStatement(st)
	stopWatch := context.AfterFunc(ctx, st.interrupt)
	defer stopWatch()
	qctx := context.WithValue(st.ctx, requestHeaderKey{}, RequestHeader(ctx))
	qctx = withPrincipal(qctx, statementPrincipal(sess, RequestHeader(ctx)))
	rows, err := s.cfg.Executor.Query(qctx, sess, sql)
	if err != nil {
		interrupted := st.interrupted()
		st.end()
		if interrupted {
			return failure(errStatementInterrupted)
		}
		return failure(err)
	}
	if len(rows.Names()) == 0 {
		rows.Close()
		st.end()
		return errorResponse("Query did not return any columns")
	}
	// Q1 servers invent the result id; later 1.5-branch clients and Q3
	// send their own, which is echoed.
	uuid := req.QueryUUID
	if !named {
		uuid = wire.RandomUUID()
	}
	res := startResult(rows, uuid, sess.gen, sess.conn.Pause)
	res.stmt = st
	sess.replaceResult(res)

	resp := &wire.PrepareResponse{Types: res.types, Names: res.names, UUID: uuid}
	res.mu.Lock()
	defer res.mu.Unlock()
	want := uint64(0)
	if sess.gen == wire.Q3 {
		want = defaultInlineRows
		if req.InlineRows.Valid {
			want = req.InlineRows.Value
		}
	}
	var rowsInline uint64
	var bufs []*wire.Buffer
	for {
		if sess.gen == wire.Q3 && rowsInline >= want {
			break
		}
		b, ok := res.take()
		if !ok {
			break
		}
		if b.err != nil {
			b.release()
			for _, buf := range bufs {
				buf.Release()
			}
			interrupted := st.interrupted()
			sess.replaceResult(nil)
			if interrupted {
				return failure(errStatementInterrupted)
			}
			return failure(b.err)
		}
		resp.Encoded = append(resp.Encoded, b.chunks...)
		bufs = append(bufs, b.bufs...)
		rowsInline += uint64(b.rows)
		if sess.gen != wire.Q3 && !inlineAll {
			break
		}
	}
	resp.NeedsMoreFetch = !res.ended
	return response{gen: sess.gen, header: wire.Header{Type: wire.MsgPrepareResponse}, body: resp, bufs: bufs}
}

func (s *Server) fetch(sess *Session, req *wire.FetchRequest) response {
	res := sess.currentResult()
	if res == nil || res.uuid != req.UUID {
		return resultGone(sess, res)
	}
	if sess.gen == wire.Q3 {
		return s.fetchQ3(sess, res, req)
	}
	res.mu.Lock()
	b, ok := res.take()
	if ok && len(b.chunks) > 0 {
		res.fetched++
	}
	index, err := res.fetched, res.err
	res.mu.Unlock()
	if ok && b.err != nil || !ok && err != nil {
		b.release()
		return failure(err)
	}
	body := &wire.FetchResponse{}
	if ok && len(b.chunks) > 0 {
		body.Encoded = b.chunks
		body.BatchIndex = wire.Idx(index)
	}
	return response{gen: sess.gen, header: wire.Header{Type: wire.MsgFetchResponse}, body: body, bufs: b.bufs}
}

// fetchQ3 serves client-numbered batches: the k-th FETCH batch after those
// sent inline, resent identically on a retry, released once acknowledged.
func (s *Server) fetchQ3(sess *Session, res *result, req *wire.FetchRequest) response {
	k := req.BatchIndex
	if k == 0 {
		return errorResponse("FETCH_REQUEST is missing its batch index")
	}
	res.mu.Lock()
	for i, p := range res.pending {
		if i <= req.AckIndex && i != k {
			p.release()
			delete(res.pending, i)
		}
	}
	b, ok := res.pending[k]
	for !ok && !res.ended {
		nb, more := res.take()
		if !more || nb.err != nil {
			break
		}
		if len(nb.chunks) == 0 {
			nb.release()
			continue
		}
		res.fetched++
		res.pending[res.fetched] = nb
		b, ok = res.pending[k]
	}
	if ok {
		// The batch stays pending for a retry until acknowledged; the
		// response holds references of its own while it is written.
		b.retain()
	}
	total, err := res.fetched, res.err
	res.mu.Unlock()
	switch {
	case ok:
		return response{gen: sess.gen, header: wire.Header{Type: wire.MsgFetchResponse},
			body: &wire.FetchResponse{Encoded: b.chunks, BatchIndex: wire.Idx(k)}, bufs: b.bufs}
	case err != nil:
		return failure(err)
	default:
		return response{gen: sess.gen, header: wire.Header{Type: wire.MsgFetchResponse},
			body: &wire.FetchResponse{TotalBatches: wire.Idx(total)}}
	}
}

func (s *Server) append(ctx context.Context, sess *Session, req *wire.AppendRequest) response {
	synth := fmt.Sprintf("INSERT INTO %s.%s VALUES (NULL)", sqlquote.Ident(req.Schema), sqlquote.Ident(req.Table))
	if _, err := s.cfg.Authorizer.Authorize(ctx, sess.id, synth); err != nil {
		return errorResponse(ErrAuthorization.Error())
	}
	if err := sess.Require(tokens.Write, "APPEND to "+req.Schema+"."+req.Table); err != nil {
		return failure(err)
	}
	if req.Chunk == nil || req.Chunk.Rows == 0 {
		return success(sess.gen)
	}
	sess.exec.Lock()
	defer sess.exec.Unlock()
	sess.replaceResult(nil)
	schema := req.Schema
	if schema == "" {
		schema = "main"
	}
	if err := s.cfg.Executor.Append(sess.ctx, sess, []string{schema}, req.Table, req.Chunk); err != nil {
		return failure(err)
	}
	return success(sess.gen)
}

// errStatementInterrupted is the answer to a PREPARE whose statement a
// CANCEL interrupted, as DuckDB words an interrupted query: the local
// query's own error says so too, but a routed read's says only that its
// request to another node was cancelled.
var errStatementInterrupted = &engine.Error{Type: "INTERRUPT", Message: "INTERRUPT Error: Interrupted!"}

// cancel interrupts the session's statement: one still computing its
// PREPARE answer (DuckDB's client sends CANCEL on a connection of its own
// while the PREPARE waits), or the result it streams. The statement's
// context carries the interrupt to wherever it runs: this node's DuckDB
// connection, the node a read was routed to, every share of a split scan.
func (s *Server) cancel(sess *Session, req *wire.CancelRequest) response {
	if st := sess.runningStatement(); st != nil {
		switch {
		case req.UUID == (wire.Hugeint{}) || st.known && req.UUID == st.uuid:
			st.interrupt()
			return success(sess.gen)
		case st.known:
			return errorResponse(fmt.Sprintf("Attempted to cancel a different query with id '%s' instead of '%s'",
				hugeintText(req.UUID), hugeintText(st.uuid)))
		}
		// A Q1 PREPARE without a uuid: a CANCEL naming one is for the
		// result before, which that PREPARE has already closed.
	}
	res := sess.currentResult()
	if res != nil && req.UUID != (wire.Hugeint{}) && req.UUID != res.uuid {
		return errorResponse(fmt.Sprintf("Attempted to cancel a different query with id '%s' instead of '%s'",
			hugeintText(req.UUID), hugeintText(res.uuid)))
	}
	if res != nil {
		res.interrupt()
		sess.conn.Interrupt()
		res.close()
		res.mu.Lock()
		res.err = ErrInterrupted
		res.ended = true
		res.mu.Unlock()
	}
	return success(sess.gen)
}

func hugeintText(h wire.Hugeint) string {
	return fmt.Sprintf("%016x%016x", uint64(h.Upper), h.Lower)
}
