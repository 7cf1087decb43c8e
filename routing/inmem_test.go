package routing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
	"github.com/duckraft/duckraft/wal"
)

// inmemNet connects Executors in one process, as hashicorp/raft's
// InmemTransport connects Rafts: a Remote call goes straight to the target
// Executor and comes back as a real node's answer would (coded refusals as
// *client.ServerError with their code, writes through the wal codecs), and
// a node can be made unreachable, frozen, restarted or held behind. Its
// log is a list of commands that every node applies to its own real
// DuckDB, in order, unless held.
type inmemNet struct {
	t *testing.T

	mu     sync.Mutex
	nodes  []*inmemNode
	leader string
	log    []wal.Command
	// keys maps applied idempotency keys to their results, as the FSM's
	// keys table does.
	keys map[string]*wal.Result
	// gossipApplied, when set, is the applied index gossip reports for
	// every node, as if gossip lagged.
	gossipApplied *uint64
}

// inmemNode is one node of an inmemNet.
type inmemNode struct {
	net     *inmemNet
	id      string
	replica bool
	db      *engine.DB
	exec    *Executor
	// ids signs the sessions of a node of newInmemSessionNet.
	ids *node.SessionIDs

	applied  atomic.Uint64
	held     atomic.Bool  // applies nothing until released
	down     atomic.Bool  // unreachable: every call fails at the transport level
	epoch    atomic.Int64 // bumped by restart: older sessions are forgotten
	connects atomic.Int64 // sessions opened on this node
	open     atomic.Int64 // sessions open on this node
	reads    atomic.Int64 // routed reads it answered with rows
	refused  atomic.Int64 // routed reads it refused with a code
	// failWrite, if set, answers the next forwarded write with this error
	// after applying it (a lost answer).
	failWrite atomic.Pointer[nodeapi.Error]
	// refuseWrites, if set, answers forwarded writes with this error
	// without applying them, once failWrite is spent.
	refuseWrites atomic.Pointer[nodeapi.Error]
	executes     atomic.Int64 // commands proposed here
	// provedTexts counts the statements proved here with the text the
	// leader lexed.
	provedTexts atomic.Int64
	// unreachable counts calls that failed because the node was down.
	unreachable atomic.Int64
}

// newInmemNet starts one node per id (a leading "r" makes a read replica);
// the first is the leader. Every node has table t(id INTEGER).
func newInmemNet(t *testing.T, ids ...string) *inmemNet {
	t.Helper()
	return startInmemNet(t, false, ids...)
}

// newInmemSessionNet is newInmemNet whose nodes' sessions outlive them:
// each node signs its sessions' ids and keeps the others' session states
// (migrate.go), through inmemSessions.
func newInmemSessionNet(t *testing.T, ids ...string) *inmemNet {
	t.Helper()
	return startInmemNet(t, true, ids...)
}

// inmemSessionKey is the key of the session ids of an inmemNet's nodes.
var inmemSessionKey = []byte("inmem session id key of 32 bytes")

func startInmemNet(t *testing.T, sessions bool, ids ...string) *inmemNet {
	t.Helper()
	n := &inmemNet{t: t, leader: ids[0], keys: map[string]*wal.Result{}}
	for _, id := range ids {
		db, err := engine.Open("", engine.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		nd := &inmemNode{net: n, id: id, replica: id[0] == 'r', db: db}
		cfg := Config{ID: id, Store: memStore{nd}, Directory: memDir{n}, Remote: inmemRemote{n},
			DB: db, Token: "t", SessionWait: 100 * time.Millisecond, LeaderWait: 2 * time.Second}
		if sessions {
			nd.ids = node.NewSessionIDs(id, inmemSessionKey)
			cfg.SessionIDs, cfg.SessionAPI = nd.ids, inmemSessions{n}
		}
		nd.exec, err = New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.exec.Close() })
		nd.sql(`CREATE SCHEMA "` + replication.MetaSchema + `"`)
		nd.sql(`CREATE TABLE "` + replication.MetaSchema + `".applied(id INTEGER, idx UBIGINT)`)
		nd.sql(`INSERT INTO "` + replication.MetaSchema + `".applied VALUES (1, 0)`)
		nd.sql(`CREATE TABLE "` + replication.MetaSchema + `".keys(idx UBIGINT)`)
		nd.sql("CREATE TABLE t(id INTEGER)")
		n.nodes = append(n.nodes, nd)
	}
	return n
}

// router starts a data-less router on the network (duckraftd --router).
// It is not one of the network's nodes: it holds no data and gets no log.
func (n *inmemNet) router(t *testing.T) *inmemNode {
	t.Helper()
	db, err := engine.Open("", engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	nd := &inmemNode{net: n, id: "router", db: db}
	nd.exec, err = NewRouter(Config{ID: nd.id, Directory: memDir{n}, Remote: inmemRemote{n}, DB: db, Token: "t",
		SessionWait: 100 * time.Millisecond, LeaderWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nd.exec.Close() })
	return nd
}

func (n *inmemNet) node(id string) *inmemNode {
	for _, nd := range n.nodes {
		if nd.id == id {
			return nd
		}
	}
	n.t.Fatalf("no node %s", id)
	return nil
}

func (n *inmemNet) byAddr(addr string) *inmemNode {
	for _, nd := range n.nodes {
		if nd.addr() == addr {
			return nd
		}
	}
	return nil
}

// setLeader makes id the leader.
func (n *inmemNet) setLeader(id string) {
	n.mu.Lock()
	n.leader = id
	n.mu.Unlock()
}

func (n *inmemNet) leaderID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader
}

func (nd *inmemNode) addr() string { return nd.id + ":9494" }

func (nd *inmemNode) sql(q string) {
	nd.net.t.Helper()
	conn, err := nd.db.Connect()
	if err != nil {
		nd.net.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(context.Background(), q); err != nil {
		nd.net.t.Fatalf("%s: %s: %v", nd.id, q, err)
	}
}

// count returns the rows of t on the node.
func (nd *inmemNode) count() int64 {
	conn, err := nd.db.Connect()
	if err != nil {
		nd.net.t.Fatal(err)
	}
	defer conn.Close()
	row, err := conn.QueryRow(context.Background(), "SELECT count(*) FROM t")
	if err != nil {
		nd.net.t.Fatal(err)
	}
	return row[0].(int64)
}

// catchUp applies the log entries the node has not applied, unless held.
func (nd *inmemNode) catchUp() error {
	if nd.held.Load() {
		return nil
	}
	nd.net.mu.Lock()
	log := nd.net.log
	nd.net.mu.Unlock()
	conn, err := nd.db.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	for idx := nd.applied.Load() + 1; idx <= uint64(len(log)); idx++ {
		if err := applyCommand(conn, log[idx-1], idx); err != nil {
			return err
		}
		nd.applied.Store(idx)
	}
	return nil
}

// applyCommand applies the statements of cmd and records idx, in one
// transaction, as the FSM does (appends are not used by these tests).
func applyCommand(conn *engine.Conn, cmd wal.Command, idx uint64) error {
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "BEGIN TRANSACTION"); err != nil {
		return err
	}
	for _, sql := range statements(cmd) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			conn.Exec(ctx, "ROLLBACK")
			return err
		}
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO "%s".keys VALUES (%d)`, replication.MetaSchema, idx)); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "COMMIT")
	return err
}

// statements returns the SQL of cmd's statements, in order.
func statements(cmd wal.Command) []string {
	var out []string
	for _, e := range splitEntries(cmd.Entry) {
		if s, ok := e.(wal.Statement); ok {
			out = append(out, s.SQL)
		}
	}
	return out
}

// release lets a held node apply again and catch up.
func (nd *inmemNode) release() {
	nd.held.Store(false)
	if err := nd.catchUp(); err != nil {
		nd.net.t.Fatal(err)
	}
}

// restart forgets every session on the node, as a restarted process does.
func (nd *inmemNode) restart() { nd.epoch.Add(1) }

// session opens a client session of an admin token on the node's Executor.
func (nd *inmemNode) session(t *testing.T) *node.Session {
	t.Helper()
	return nd.sessionAs(t, tokens.Admin)
}

// sessionAs opens a client session of a token of role on the node's
// Executor.
func (nd *inmemNode) sessionAs(t *testing.T, role tokens.Role) *node.Session {
	t.Helper()
	conn, err := nd.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	s := node.NewSession("client-"+nd.id, conn, role)
	t.Cleanup(func() {
		nd.exec.EndSession(s)
		conn.Close()
	})
	return s
}

// memStore is a node's replication store: the network's log.
type memStore struct{ nd *inmemNode }

func (m memStore) IsLeader() bool         { return m.nd.net.leaderID() == m.nd.id }
func (m memStore) LeaderID() string       { return m.nd.net.leaderID() }
func (m memStore) AppliedThrough() uint64 { return m.nd.applied.Load() }

func (m memStore) CommitIndex() uint64 {
	m.nd.net.mu.Lock()
	defer m.nd.net.mu.Unlock()
	return uint64(len(m.nd.net.log))
}

// Prove implements Store: the in-memory log checks each command when it
// executes it, so there is nothing to prove ahead. It checks what
// replication relies on to skip lexing again: each text given stands at
// the place of the statement it is the lexed text of.
func (m memStore) Prove(_ context.Context, cmd wal.Command, texts []sqltext.Statement) error {
	if !m.IsLeader() {
		return replication.ErrNotLeader
	}
	entries := splitEntries(cmd.Entry)
	if len(texts) > len(entries) {
		return fmt.Errorf("prove: %d texts for %d entries", len(texts), len(entries))
	}
	for i, text := range texts {
		if st, ok := entries[i].(wal.Statement); text.Text != "" && (!ok || st.SQL != text.Text) {
			return fmt.Errorf("prove: text %d is %q, not the lexed text of entry %d (%v)", i, text.Text, i, entries[i])
		}
		if text.Text != "" {
			m.nd.provedTexts.Add(1)
		}
	}
	return nil
}

// Execute appends cmd to the log unless its key was applied before, and
// lets every node that is not held apply it.
func (m memStore) Execute(ctx context.Context, cmd wal.Command) (*wal.Result, error) {
	if !m.IsLeader() {
		return nil, replication.ErrNotLeader
	}
	m.nd.executes.Add(1)
	n := m.nd.net
	n.mu.Lock()
	if res, ok := n.keys[string(cmd.Key)]; ok {
		n.mu.Unlock()
		again := *res
		again.Replayed = true
		return &again, nil
	}
	// Check the command applies before it enters the log, as the FSM's
	// failure is the client's error: try it on a scratch connection.
	conn, err := m.nd.db.Connect()
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.Exec(ctx, "BEGIN TRANSACTION"); err != nil {
		n.mu.Unlock()
		return nil, err
	}
	for _, sql := range statements(cmd) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			conn.Exec(ctx, "ROLLBACK")
			n.mu.Unlock()
			return nil, err
		}
	}
	conn.Exec(ctx, "ROLLBACK")
	n.log = append(n.log, cmd)
	res := &wal.Result{Index: uint64(len(n.log)), RowsChanged: 1}
	n.keys[string(cmd.Key)] = res
	nodes := n.nodes
	n.mu.Unlock()
	for _, nd := range nodes {
		if err := nd.catchUp(); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (m memStore) WaitForApplied(ctx context.Context, idx uint64) error {
	for m.nd.applied.Load() < idx {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

func (m memStore) ReadIndex(context.Context) (uint64, error) {
	if !m.IsLeader() {
		return 0, replication.ErrNotLeader
	}
	return m.CommitIndex(), nil
}

// memDir is gossip: every node is alive, with its applied index.
type memDir struct{ n *inmemNet }

func (d memDir) QuackAddr(id string) (string, bool) {
	for _, nd := range d.n.nodes {
		if nd.id == id {
			return nd.addr(), true
		}
	}
	return "", false
}

func (d memDir) Peers() []Peer {
	d.n.mu.Lock()
	frozen := d.n.gossipApplied
	d.n.mu.Unlock()
	var out []Peer
	for _, nd := range d.n.nodes {
		applied := nd.applied.Load()
		if frozen != nil {
			applied = *frozen
		}
		// Each node embeds the DuckDB it runs on, as real gossip says.
		out = append(out, Peer{ID: nd.id, QuackAddr: nd.addr(), Replica: nd.replica,
			Leader: nd.id == d.n.leaderID(), Applied: applied, Engine: nd.db.Version()})
	}
	return out
}

// inmemSessions is the SessionAPI of every node of an inmemNet: it hands
// pushes and lookups to the target node's migrator, and fails them at the
// transport level while that node is down.
type inmemSessions struct{ n *inmemNet }

func (a inmemSessions) target(addr string) (*inmemNode, error) {
	nd := a.n.byAddr(addr)
	if nd == nil || nd.down.Load() || nd.exec.mig == nil {
		return nil, fmt.Errorf("%w: %s: %w", nodeapi.ErrUnreachable, addr, errRefused)
	}
	return nd, nil
}

func (a inmemSessions) PushSessions(_ context.Context, addr string, p nodeapi.SessionPush) error {
	nd, err := a.target(addr)
	if err != nil {
		return err
	}
	nd.exec.mig.receive(p)
	return nil
}

func (a inmemSessions) LookupSession(_ context.Context, addr, id string) (nodeapi.SessionState, bool, error) {
	nd, err := a.target(addr)
	if err != nil {
		return nodeapi.SessionState{}, false, err
	}
	s, ok := nd.exec.mig.local(id)
	return s, ok, nil
}

func (a inmemSessions) ReadIndex(_ context.Context, addr string) (uint64, error) {
	nd, err := a.target(addr)
	if err != nil {
		return 0, err
	}
	return memStore{nd}.CommitIndex(), nil
}

// inmemRemote is the Remote of every node of an inmemNet.
type inmemRemote struct{ n *inmemNet }

var errRefused = errors.New("dial tcp: connection refused")

func (r inmemRemote) Connect(_ context.Context, addr string, _ wire.Generation) (RemoteSession, error) {
	nd := r.n.byAddr(addr)
	if nd == nil || nd.down.Load() {
		if nd != nil {
			nd.unreachable.Add(1)
		}
		return nil, errRefused
	}
	conn, err := nd.db.Connect()
	if err != nil {
		return nil, err
	}
	nd.connects.Add(1)
	nd.open.Add(1)
	return &inmemSession{nd: nd, s: node.NewSession("remote", conn, tokens.Admin), conn: conn, epoch: nd.epoch.Load()}, nil
}

// Write forwards cmd to the node at addr, through the wal codecs both ways.
func (r inmemRemote) Write(ctx context.Context, addr string, cmd wal.Command) (*wal.Result, error) {
	nd := r.n.byAddr(addr)
	if nd == nil || nd.down.Load() {
		if nd != nil {
			nd.unreachable.Add(1)
		}
		return nil, fmt.Errorf("%w: %w", nodeapi.ErrUnreachable, errRefused)
	}
	body, err := wal.Batch{Commands: []wal.Command{cmd}}.MarshalBinary()
	if err != nil {
		return nil, err
	}
	b, err := wal.Decode(body)
	if err != nil {
		return nil, err
	}
	if e := nd.refuseWrites.Load(); e != nil && nd.failWrite.Load() == nil {
		return nil, e
	}
	res, err := nd.exec.writes.applyForwarded(ctx, b.Commands[0])
	if fail := nd.failWrite.Swap(nil); fail != nil && err == nil {
		return nil, fail
	}
	if err != nil {
		return nil, nodeapi.Answer(err)
	}
	enc, err := res.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return wal.DecodeResult(enc)
}

// inmemSession is a session on another node of an inmemNet.
type inmemSession struct {
	nd    *inmemNode
	s     *node.Session
	conn  *engine.Conn
	epoch int64
	once  sync.Once
}

// reach fails as the real node would: unreachable, or forgotten the
// session after a restart.
func (s *inmemSession) reach() error {
	if s.nd.down.Load() {
		return errRefused
	}
	if s.nd.epoch.Load() != s.epoch {
		return &client.ServerError{Message: "Invalid connection id", Code: string(outcome.UnknownSession)}
	}
	return nil
}

// wireError is err as it arrives over Quack, with the code the server
// answers it with.
func wireError(err error) error {
	return &client.ServerError{Message: engine.RawMessage(err), Code: node.CodeOf(err)}
}

func (s *inmemSession) Query(ctx context.Context, sql string, req nodeapi.Read) (node.Rows, error) {
	if err := s.reach(); err != nil {
		return nil, err
	}
	// A node runs a routed read under its own session, not the caller's
	// request: the rows outlive the call.
	rows, err := s.nd.exec.serveRouted(context.WithoutCancel(ctx), s.s, req, sql)
	if err != nil {
		s.nd.refused.Add(1)
		return nil, wireError(err)
	}
	s.nd.reads.Add(1)
	return &wireRows{Rows: rows}, nil
}

func (s *inmemSession) Exec(ctx context.Context, sql string) error {
	if err := s.reach(); err != nil {
		return err
	}
	rows, err := s.nd.exec.Query(ctx, s.s, sql)
	if err != nil {
		return wireError(err)
	}
	rows.Close()
	return nil
}

func (s *inmemSession) Close() error {
	s.once.Do(func() {
		s.nd.open.Add(-1)
		s.conn.Close()
	})
	return nil
}

// wireRows copies every chunk through the Q1 encoding, as a remote result's
// chunks are fresh decodings that stay valid.
type wireRows struct{ node.Rows }

func (r *wireRows) Next() (*wire.DataChunk, error) {
	c, err := r.Rows.Next()
	if err != nil || c == nil {
		return c, err
	}
	enc, err := wire.AppendDataChunk(nil, c, wire.Q1)
	if err != nil {
		return nil, err
	}
	return wire.DecodeDataChunk(wire.NewReader(enc), wire.Limits{})
}
