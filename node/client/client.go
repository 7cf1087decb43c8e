// Package client is a Go client for the Quack protocol: it talks to
// duckraftd and to DuckDB's own Quack server (quack_serve). Results stream in
// batches that several workers fetch in parallel while row order is kept.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/wire"
)

// DefaultPort is Quack's default TCP port.
const DefaultPort = 9494

// ServerError is an ERROR_RESPONSE from the server: its message is the
// server's (DuckDB's) error text. Code is the machine-readable code a
// duckraft node sends with some errors (wire.ErrorCodeHeader, read by
// outcome.ParseHeader), empty otherwise; the error unwraps to the code's
// sentinel, so errors.Is(err, outcome.ErrNotLeader) holds for a node's
// not_leader.
type ServerError struct {
	Message string
	Code    string
	// Type is DuckDB's exception type ("Catalog", "Constraint", …), sent by
	// Q3 servers; empty from Q1 servers.
	Type string
}

func (e *ServerError) Error() string { return e.Message }

// Unwrap returns the sentinel of e's code; nil without a code, or with
// one this build does not know.
func (e *ServerError) Unwrap() error {
	code, _, _ := outcome.ParseHeader(e.Code)
	return code.Err()
}

// ExceptionType implements engine.ExceptionError, so that a node passes a
// remote node's exception type on to its own client.
func (e *ServerError) ExceptionType() string { return e.Type }

// WithHeader returns a context whose requests carry h besides their own
// headers: a duckraft node passes a routed read's requirements this way
// (node.RequestHeader on the serving side).
func WithHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, headerKey{}, h)
}

type headerKey struct{}

// ErrClosed is returned by calls on a closed connection.
var ErrClosed = errors.New("quack: connection closed")

// Options configures a connection.
type Options struct {
	// Token is the server's authentication token.
	Token string
	// Generation is the protocol generation to speak; 0 tries Q3 first and
	// falls back to Q1, as DuckDB-compatible clients do.
	Generation wire.Generation
	// FetchWorkers is how many FETCH requests a result keeps in flight;
	// 0 means one per CPU, at least 2.
	FetchWorkers int
	// TLS forces HTTPS (true) or plain HTTP (false); nil chooses HTTPS
	// unless the host is local, like DuckDB's client.
	TLS *bool
	// TLSConfig is used for HTTPS.
	TLSConfig *tls.Config
	// HTTPClient overrides the HTTP client.
	HTTPClient *http.Client
	// HeartbeatTimeout is the Q3 session lease requested (default 60 s);
	// a server may grant less, and the client then heartbeats within it.
	HeartbeatTimeout time.Duration
	// ClientVersion and Platform are sent in the handshake.
	ClientVersion, Platform string
	// Encoded leaves the chunks of results encoded as they arrived, for a
	// node that forwards them to a client of the same generation: each is
	// checked by wire.DecodeBodyEncoded (framing, lengths, the result's
	// types) but not decoded. Rows.NextEncoded hands them out as they
	// are; Rows.NextChunk decodes each when asked.
	Encoded bool
	// Header is sent with every request of the session besides the
	// request's own headers: a cluster's member sends the members'
	// credential in it (wire.MemberHeader).
	Header http.Header
}

// Conn is one Quack session. Its methods are safe for concurrent use, but
// statements on one session run one at a time and a new Query ends the
// previous result, as on the server.
type Conn struct {
	url    string
	http   *http.Client
	opts   Options
	gen    wire.Generation
	id     string
	server wire.ConnectionResponse

	received atomic.Int64

	mu      sync.Mutex
	current *Rows
	closed  bool
	stopHB  chan struct{}
}

// ParseServer turns "quack:host[:port]", "quack://host:port", "host:port" or
// "host" into the base URL of the server's /quack endpoint.
func ParseServer(server string, useTLS *bool) (string, error) {
	s := strings.TrimSpace(server)
	s = strings.TrimPrefix(s, "quack://")
	s = strings.TrimPrefix(s, "quack:")
	if s == "" {
		return "", fmt.Errorf("quack: empty server address")
	}
	host, port := s, strconv.Itoa(DefaultPort)
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Count(s, ":") == 1 {
		return "", fmt.Errorf("quack: bad server address %q: %w", server, err)
	}
	host = strings.Trim(host, "[]")
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("quack: bad port in %q", server)
	}
	secure := !isLocal(host)
	if useTLS != nil {
		secure = *useTLS
	}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/quack", nil
}

// plain reports whether the connections to url carry no TLS: an http URL
// reached directly or through an http proxy, as proxy picks it
// (lowat_linux.go relies on it).
func plain(url string, proxy func(*http.Request) (*neturl.URL, error)) bool {
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil || req.URL.Scheme != "http" {
		return false
	}
	via, err := proxy(req)
	return err == nil && (via == nil || via.Scheme == "http")
}

func isLocal(host string) bool {
	return strings.EqualFold(host, "localhost") || host == "127.0.0.1" || host == "::1"
}

// Connect opens a session on server with opts.
func Connect(ctx context.Context, server string, opts Options) (*Conn, error) {
	url, err := ParseServer(server, opts.TLS)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		t := &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     opts.TLSConfig,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ReadBufferSize:      readBufferSize,
		}
		if plain(url, t.Proxy) {
			t.DialContext = dialer()
		}
		hc = &http.Client{Transport: t}
	}
	if opts.FetchWorkers <= 0 {
		opts.FetchWorkers = max(2, runtime.NumCPU())
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = 60 * time.Second
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "duckraft"
	}
	if opts.Platform == "" {
		opts.Platform = runtime.GOOS + "_" + runtime.GOARCH
	}
	c := &Conn{url: url, http: hc, opts: opts}
	gens := []wire.Generation{wire.Q3, wire.Q1}
	if opts.Generation != 0 {
		gens = []wire.Generation{opts.Generation}
	}
	for i, g := range gens {
		err = c.handshake(ctx, g)
		if err == nil {
			break
		}
		var se *ServerError
		var he *httpStatusError
		fallback := errors.As(err, &he) || errors.As(err, &se) && strings.Contains(se.Message, "Unsupported Quack version")
		if i == len(gens)-1 || !fallback {
			return nil, err
		}
	}
	if c.gen == wire.Q3 {
		c.stopHB = make(chan struct{})
		go c.heartbeat()
	}
	return c, nil
}

func (c *Conn) handshake(ctx context.Context, g wire.Generation) error {
	req := &wire.ConnectionRequest{
		AuthString:          c.opts.Token,
		ClientDuckDBVersion: c.opts.ClientVersion,
		ClientPlatform:      c.opts.Platform,
		MinVersion:          uint64(g),
		MaxVersion:          uint64(g),
	}
	if g == wire.Q3 {
		req.HeartbeatTimeoutSeconds = uint64(c.opts.HeartbeatTimeout / time.Second)
	}
	h, msg, err := c.roundTrip(ctx, g, wire.Header{Type: wire.MsgConnectionRequest}, req)
	if err != nil {
		return fmt.Errorf("quack connect to %s: %w", c.url, err)
	}
	resp, ok := msg.(*wire.ConnectionResponse)
	if !ok || h.ConnectionID == "" {
		return fmt.Errorf("quack connect to %s: unexpected %v answer", c.url, h.Type)
	}
	c.gen = wire.Generation(resp.QuackVersion)
	if c.gen != wire.Q1 && c.gen != wire.Q3 {
		return fmt.Errorf("quack connect to %s: server speaks unsupported version %d", c.url, resp.QuackVersion)
	}
	c.id = h.ConnectionID
	c.server = *resp
	if granted := time.Duration(resp.HeartbeatTimeoutSeconds) * time.Second; g == wire.Q3 && granted > 0 && granted < c.opts.HeartbeatTimeout {
		// The server cut the lease: heartbeat within what it granted.
		c.opts.HeartbeatTimeout = granted
	}
	return nil
}

// BytesReceived returns the number of response body bytes received so far.
func (c *Conn) BytesReceived() int64 { return c.received.Load() }

// Generation returns the protocol generation in use.
func (c *Conn) Generation() wire.Generation { return c.gen }

// ID returns the session id the server issued.
func (c *Conn) ID() string { return c.id }

// ServerVersion returns the DuckDB version the server reported.
func (c *Conn) ServerVersion() string { return c.server.ServerDuckDBVersion }

type httpStatusError struct {
	status int
	what   string
}

func (e *httpStatusError) Error() string {
	if e.what != "" {
		return fmt.Sprintf("HTTP %d: %s", e.status, e.what)
	}
	return fmt.Sprintf("HTTP %d", e.status)
}

// roundTrip sends one message and decodes the answer; an ERROR_RESPONSE
// becomes a *ServerError.
func (c *Conn) roundTrip(ctx context.Context, g wire.Generation, h wire.Header, body wire.Message) (wire.Header, wire.Message, error) {
	rh, msg, _, err := c.exchange(ctx, g, h, body, nil, false)
	return rh, msg, err
}

// roundTripResult is roundTrip for requests answered with a result's
// chunks (PREPARE, FETCH): with Options.Encoded they are checked against
// types (nil for a PREPARE, whose answer names them) and kept encoded, in
// the pooled buffer returned with them, which the caller releases.
func (c *Conn) roundTripResult(ctx context.Context, g wire.Generation, h wire.Header, body wire.Message, types []wire.LogicalType) (wire.Header, wire.Message, *wire.Buffer, error) {
	encoded := c.opts.Encoded && (h.Type == wire.MsgPrepareRequest || h.Type == wire.MsgFetchRequest)
	rh, msg, buf, err := c.exchange(ctx, g, h, body, types, encoded)
	switch msg.(type) {
	case *wire.FetchResponse, *wire.PrepareResponse:
	default:
		// Nothing refers to the body any more.
		buf.Release()
		buf = nil
	}
	return rh, msg, buf, err
}

// exchange sends one message and decodes the answer, reading the body into
// a pooled Buffer when the answer's chunks stay encoded in it.
func (c *Conn) exchange(ctx context.Context, g wire.Generation, h wire.Header, body wire.Message, types []wire.LogicalType, encoded bool) (wire.Header, wire.Message, *wire.Buffer, error) {
	if h.Type != wire.MsgConnectionRequest {
		h.ConnectionID = c.id
	}
	out, err := wire.AppendMessage(nil, g, h, body)
	if err != nil {
		return wire.Header{}, nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(out))
	if err != nil {
		return wire.Header{}, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/vnd.duckdb")
	if g == wire.Q3 && h.ConnectionID != "" {
		// As DuckDB 2.0's client: a balancer may keep the session's
		// requests together by it.
		req.Header.Set("X-Quack-Connection-Id", h.ConnectionID)
	}
	for k, v := range c.opts.Header {
		req.Header[k] = v
	}
	if h, ok := ctx.Value(headerKey{}).(http.Header); ok {
		for k, v := range h {
			req.Header[k] = v
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return wire.Header{}, nil, nil, err
	}
	defer resp.Body.Close()
	buf, err := readBody(resp, encoded)
	if err != nil {
		return wire.Header{}, nil, nil, fmt.Errorf("read response: %w", err)
	}
	fail := func(err error) (wire.Header, wire.Message, *wire.Buffer, error) {
		buf.Release()
		return wire.Header{}, nil, nil, err
	}
	data := buf.B
	c.received.Add(int64(len(data)))
	if resp.StatusCode != http.StatusOK {
		return fail(&httpStatusError{status: resp.StatusCode, what: resp.Header.Get("EXCEPTION_WHAT")})
	}
	rh, rest, err := wire.DecodeHeader(data)
	if err != nil {
		return fail(fmt.Errorf("decode response header: %w", err))
	}
	var msg wire.Message
	if encoded {
		msg, err = wire.DecodeBodyEncoded(g, rh.Type, rest, wire.Limits{}, types)
	} else {
		msg, err = wire.DecodeBody(g, rh.Type, rest, wire.Limits{})
	}
	if err != nil {
		return fail(fmt.Errorf("decode %v: %w", rh.Type, err))
	}
	if e, ok := msg.(*wire.ErrorResponse); ok {
		buf.Release()
		return rh, nil, nil, &ServerError{Message: e.Message, Code: resp.Header.Get(wire.ErrorCodeHeader), Type: e.ExceptionType}
	}
	return rh, msg, buf, nil
}

// readBody reads a response body into one allocation when its length is
// known: result batches are megabytes. A body whose chunks stay encoded
// (pooled) goes into a pooled Buffer; any other into a Buffer of its own,
// since decoded chunks may alias it.
func readBody(resp *http.Response, pooled bool) (*wire.Buffer, error) {
	if n := resp.ContentLength; n > 0 && n < 1<<31 {
		var buf *wire.Buffer
		if pooled {
			buf = wire.NewBuffer(int(n))
		} else {
			buf = wire.BufferOf(make([]byte, n))
		}
		if _, err := io.ReadFull(resp.Body, buf.B); err != nil {
			buf.Release()
			return nil, err
		}
		return buf, nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return wire.BufferOf(data), nil
}

func (c *Conn) heartbeat() {
	t := time.NewTicker(c.opts.HeartbeatTimeout / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stopHB:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.HeartbeatTimeout/3)
			c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgHeartbeatRequest}, &wire.HeartbeatRequest{})
			cancel()
		}
	}
}

// Close ends the session on the server.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cur := c.current
	c.mu.Unlock()
	if cur != nil {
		cur.Close()
	}
	if c.stopHB != nil {
		close(c.stopHB)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgDisconnect}, &wire.DisconnectMessage{})
	c.http.CloseIdleConnections()
	return err
}

// Exec runs sql and discards its rows. It returns the value of a single
// BIGINT "Count" column when the statement reports one (rows changed), else 0.
func (c *Conn) Exec(ctx context.Context, sql string) (int64, error) {
	rows, err := c.Query(ctx, sql)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	for {
		chunk, err := rows.NextChunk()
		if err != nil {
			return 0, err
		}
		if chunk == nil {
			break
		}
		if len(chunk.Columns) == 1 && rows.Names()[0] == "Count" && chunk.Rows > 0 {
			if v, err := chunk.Columns[0].Value(0); err == nil {
				if i, ok := v.(int64); ok {
					n += i
				}
			}
		}
	}
	return n, rows.Err()
}

// Append appends chunk to schema.table, atomically: in Q1 with an
// APPEND_REQUEST, in Q3 as DuckDB 2.0 does, with an INSERT that reads a
// stream of SEND_DATA messages.
func (c *Conn) Append(ctx context.Context, schema, table string, chunk *wire.DataChunk) error {
	if schema == "" {
		schema = "main"
	}
	return c.AppendPath(ctx, []string{schema}, table, chunk)
}

// AppendPath is Append to a table of the schema at path: one name, or a
// nested schema's (DuckDB 2.0) outermost first, which only Q3 can name.
func (c *Conn) AppendPath(ctx context.Context, path []string, table string, chunk *wire.DataChunk) error {
	name := strings.Join(append(path[:len(path):len(path)], table), ".")
	if len(path) == 0 || c.gen == wire.Q1 && len(path) > 1 {
		return fmt.Errorf("append to %s: Q1 names a table by one schema and its name", name)
	}
	if err := c.begin(); err != nil {
		return err
	}
	var err error
	if c.gen == wire.Q1 {
		_, _, err = c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgAppendRequest},
			&wire.AppendRequest{Schema: path[0], Table: table, Chunk: chunk})
	} else {
		err = c.sendData(ctx, sqlquote.Path(append(path[:len(path):len(path)], table)), chunk)
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", name, err)
	}
	return nil
}

// sendData inserts chunk into the table named (quoted) target, as DuckDB
// 2.0 does.
func (c *Conn) sendData(ctx context.Context, target string, chunk *wire.DataChunk) error {
	sent := false
	return c.insertStream(ctx, target, chunk.Columns, func() (*wire.DataChunk, error) {
		if sent {
			return nil, nil
		}
		sent = true
		return chunk, nil
	})
}

// InsertStream inserts the chunks next returns, until it returns nil, into
// a table of the schema at path, as one insert: in Q3 one INSERT whose rows
// stream in SEND_DATA batches, as DuckDB 2.0 sends INSERT … SELECT and
// CREATE TABLE … AS; in Q1 one APPEND per chunk, as DuckDB 1.5 does (atomic
// only inside a transaction). Every chunk has the first one's columns.
func (c *Conn) InsertStream(ctx context.Context, path []string, table string, next func() (*wire.DataChunk, error)) error {
	name := strings.Join(append(path[:len(path):len(path)], table), ".")
	first, err := next()
	if err != nil || first == nil {
		return err
	}
	if c.gen == wire.Q1 {
		for chunk := first; chunk != nil; {
			if err := c.AppendPath(ctx, path, table, chunk); err != nil {
				return err
			}
			if chunk, err = next(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := c.begin(); err != nil {
		return err
	}
	pending := first
	err = c.insertStream(ctx, sqlquote.Path(append(path[:len(path):len(path)], table)), first.Columns, func() (*wire.DataChunk, error) {
		if chunk := pending; chunk != nil {
			pending = nil
			return chunk, nil
		}
		return next()
	})
	if err != nil {
		return fmt.Errorf("insert into %s: %w", name, err)
	}
	return nil
}

// insertStream runs one Q3 insert of the chunks next returns into target.
func (c *Conn) insertStream(ctx context.Context, target string, cols []*wire.Vector, next func() (*wire.DataChunk, error)) error {
	uuid := wire.RandomUUID()
	stream := fmt.Sprintf("%016x%016x", uint64(uuid.Upper), uuid.Lower)
	var proto []string
	for i, col := range cols {
		proto = append(proto, fmt.Sprintf("col%d %s", i, col.Type.String()))
	}
	sql := fmt.Sprintf("INSERT INTO %s SELECT * FROM scan_data_from_quack_client('%s', NULL::STRUCT(%s), ordered := true)",
		target, stream, strings.Join(proto, ", "))
	if _, _, err := c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgPrepareRequest},
		&wire.PrepareRequest{SQL: sql, QueryUUID: uuid, InlineRows: wire.Idx(0)}); err != nil {
		return err
	}
	var batches uint64
	for {
		chunk, err := next()
		if err != nil {
			return err
		}
		if chunk == nil {
			break
		}
		batches++
		if _, _, err := c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgSendDataRequest},
			&wire.SendDataRequest{StreamID: stream, BatchIndex: wire.Idx(batches), Chunks: []*wire.DataChunk{chunk}}); err != nil {
			return err
		}
	}
	if _, _, err := c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgSendDataRequest},
		&wire.SendDataRequest{StreamID: stream, TotalBatches: wire.Idx(batches)}); err != nil {
		return err
	}
	// The statement's own result (its Count) ends the exchange.
	_, _, err := c.roundTrip(ctx, c.gen, wire.Header{Type: wire.MsgFetchRequest},
		&wire.FetchRequest{UUID: uuid, BatchIndex: 1})
	return err
}

// begin ends the previous result before a new statement, as the server
// will.
func (c *Conn) begin() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	cur := c.current
	c.current = nil
	c.mu.Unlock()
	if cur != nil {
		cur.Close()
	}
	return nil
}
