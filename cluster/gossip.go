package cluster

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrNoKey is returned by NewGossip when neither a cluster key nor a token is configured:
// gossip is always encrypted, so nodes of different clusters cannot join each other.
var ErrNoKey = errors.New("cluster: no cluster key or token for gossip encryption")

// How this node's metadata reaches the others. Changes to the leader fields are pushed
// within metaCheckInterval; AppliedIndex and Load change with every write, so they are
// pushed at most every indexInterval. Each push is one memberlist alive broadcast
// (UpdateNode), which piggybacks on gossip and costs O(log n) packets per push.
const (
	metaCheckInterval = 200 * time.Millisecond
	indexInterval     = 500 * time.Millisecond
	updateTimeout     = time.Second
	eventBuffer       = 64
)

// KeyFromToken derives the 32-byte gossip encryption key from the cluster's Quack token, so
// nodes started with the same --token find each other and nodes with another token cannot.
func KeyFromToken(token string) []byte {
	sum := sha256.Sum256([]byte("duckraft-gossip:" + token))
	return sum[:]
}

// Timing sets how fast gossip probes nodes and declares them failed. Zero fields take the
// memberlist LAN defaults (LANTiming).
type Timing struct {
	ProbeInterval    time.Duration // how often each node probes another at random
	ProbeTimeout     time.Duration // how long to wait for a probe's ack
	SuspicionMult    int           // suspicion lasts SuspicionMult × ProbeInterval (× log10 n) before a node is dead
	GossipInterval   time.Duration // how often queued broadcasts are sent
	PushPullInterval time.Duration // how often full state is synced with one node
	ReclaimAfter     time.Duration // how long a dead node's ID is held before it may rejoin on a new address
}

// LANTiming is memberlist's LAN configuration: a dead node is declared in about 5–25 s.
func LANTiming() Timing {
	c := memberlist.DefaultLANConfig()
	return Timing{
		ProbeInterval:    c.ProbeInterval,
		ProbeTimeout:     c.ProbeTimeout,
		SuspicionMult:    c.SuspicionMult,
		GossipInterval:   c.GossipInterval,
		PushPullInterval: c.PushPullInterval,
		ReclaimAfter:     10 * time.Second,
	}
}

// LoopbackTiming is tuned for several nodes on one host (tests): a dead node is declared
// in about a second.
func LoopbackTiming() Timing {
	return Timing{
		ProbeInterval:    200 * time.Millisecond,
		ProbeTimeout:     100 * time.Millisecond,
		SuspicionMult:    2,
		GossipInterval:   20 * time.Millisecond,
		PushPullInterval: time.Second,
		ReclaimAfter:     200 * time.Millisecond,
	}
}

func (t Timing) withDefaults() Timing {
	def := LANTiming()
	setDefault(&t.ProbeInterval, def.ProbeInterval)
	setDefault(&t.ProbeTimeout, def.ProbeTimeout)
	setDefault(&t.SuspicionMult, def.SuspicionMult)
	setDefault(&t.GossipInterval, def.GossipInterval)
	setDefault(&t.PushPullInterval, def.PushPullInterval)
	setDefault(&t.ReclaimAfter, def.ReclaimAfter)
	return t
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Status is the part of a node's Meta that changes while it runs.
type Status struct {
	AppliedIndex uint64
	Load         uint64
	Leader       bool
	LeaderID     string
}

// Config configures a Gossip.
type Config struct {
	// Meta holds this node's ID, Role, RaftAddr and QuackAddr. Its other fields come from
	// Status.
	Meta Meta
	// BindAddr is the host:port gossip listens on (TCP and UDP); port 0 picks a free one.
	BindAddr string
	// Key is the gossip encryption key (16, 24 or 32 bytes); if nil it is KeyFromToken(Token).
	Key   []byte
	Token string
	// Status, if set, is polled for the node's changing fields.
	Status func() Status
	Timing Timing
	Logger *slog.Logger
}

// State is a member's liveness as gossip sees it.
type State uint8

// memberlist v0.5.4 does not expose suspicion (Node.State is never set), so a suspect node
// reads as alive until it is declared dead.
const (
	StateAlive State = iota
	StateDead        // failed
	StateLeft        // left gracefully
)

func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Member is one node as this node's gossip sees it, including dead ones.
type Member struct {
	Meta       Meta
	GossipAddr string
	State      State
	LastChange time.Time // when this node saw State change (join, fail, leave, rejoin)
}

// EventKind says what happened to a member.
type EventKind uint8

const (
	EventJoin EventKind = iota
	EventUpdate
	EventFail
	EventLeave
)

func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventFail:
		return "fail"
	case EventLeave:
		return "leave"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event reports a membership change. Events are hints: a slow subscriber loses events
// rather than stalling gossip, so consumers act on Members(), not on the event alone.
type Event struct {
	Kind   EventKind
	Member Member
}

// Gossip is this node's membership in the cluster's gossip pool.
type Gossip struct {
	ml *memberlist.Memberlist
	// addr is the local node's gossip address, read once at start:
	// memberlist rewrites its local Node when the meta is refreshed, so
	// reading that Node later races with the refresh.
	addr   string
	log    *slog.Logger
	static Meta
	status func() Status

	mu      sync.Mutex
	meta    Meta
	encoded []byte
	members map[string]Member
	subs    []chan Event
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// NewGossip starts gossip on cfg.BindAddr. The node is alone until Join.
func NewGossip(cfg Config) (*Gossip, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Meta.ID == "" {
		return nil, errors.New("cluster: node ID is empty")
	}
	key := cfg.Key
	if key == nil {
		if cfg.Token == "" {
			return nil, ErrNoKey
		}
		key = KeyFromToken(cfg.Token)
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("cluster: gossip key is %d bytes, want 16, 24 or 32", n)
	}
	host, portStr, err := net.SplitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip address %q: %w", cfg.BindAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip port %q: %w", portStr, err)
	}
	encoded, err := cfg.Meta.Encode()
	if err != nil {
		return nil, fmt.Errorf("cluster: node %s: %w", cfg.Meta.ID, err)
	}

	g := &Gossip{
		log:     log,
		static:  cfg.Meta,
		status:  cfg.Status,
		meta:    cfg.Meta,
		encoded: encoded,
		members: make(map[string]Member),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	t := cfg.Timing.withDefaults()
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Meta.ID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	mc.SecretKey = key
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.SuspicionMult = t.SuspicionMult
	mc.GossipInterval = t.GossipInterval
	mc.PushPullInterval = t.PushPullInterval
	mc.DeadNodeReclaimTime = t.ReclaimAfter
	mc.Delegate = (*metaDelegate)(g)
	mc.Events = (*eventDelegate)(g)
	mc.Logger = newStdLogger(log.With("component", "memberlist"))
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("cluster: start gossip on %s: %w", cfg.BindAddr, err)
	}
	g.ml = ml
	g.addr = ml.LocalNode().Address()
	go g.refresh()
	return g, nil
}

// Addr is the address other nodes join through (useful when BindAddr had port 0).
func (g *Gossip) Addr() string { return g.addr }

// Join contacts the given gossip addresses and merges state with them. It succeeds if at
// least one answered.
func (g *Gossip) Join(addrs ...string) (int, error) {
	n, err := g.ml.Join(addrs)
	if err != nil {
		return n, fmt.Errorf("cluster: join %v: %w", addrs, err)
	}
	g.log.Info("joined cluster", "via", addrs, "contacted", n)
	return n, nil
}

// Leave tells the cluster this node is leaving and waits up to timeout for the message to
// go out. Call Shutdown afterwards.
func (g *Gossip) Leave(timeout time.Duration) error {
	// memberlist reports a left node like a failed one, so mark the metadata first: the
	// others then report StateLeft (if the update reaches them before the leave).
	g.mu.Lock()
	g.static.Leaving = true
	m := g.meta
	m.Leaving = true
	encoded, err := m.Encode()
	if err == nil {
		g.meta, g.encoded = m, encoded
	}
	g.mu.Unlock()
	if err := g.ml.UpdateNode(timeout); err != nil {
		g.log.Debug("leaving flag not yet sent", "err", err)
	}
	if err := g.ml.Leave(timeout); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	return nil
}

// Shutdown stops gossip without telling anyone; the others detect the node as failed
// unless it left first. Subscriber channels are closed.
func (g *Gossip) Shutdown() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	for _, ch := range g.subs {
		close(ch)
	}
	g.subs = nil
	g.mu.Unlock()
	close(g.stop)
	<-g.done
	if err := g.ml.Shutdown(); err != nil {
		return fmt.Errorf("cluster: shutdown gossip: %w", err)
	}
	return nil
}

// Subscribe returns a channel of membership events, closed by Shutdown.
func (g *Gossip) Subscribe() <-chan Event {
	ch := make(chan Event, eventBuffer)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		close(ch)
	} else {
		g.subs = append(g.subs, ch)
	}
	return ch
}

// Members returns every node this node has seen, this node included, sorted by ID. Dead
// and left members stay listed with the time they went away.
func (g *Gossip) Members() []Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Meta.ID, b.Meta.ID) })
	return out
}

// LocalMeta returns the metadata this node currently gossips.
func (g *Gossip) LocalMeta() Meta {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.meta
}

// refresh polls Status and pushes changed metadata, rate-limiting the fields that change
// with every write.
func (g *Gossip) refresh() {
	defer close(g.done)
	if g.status == nil {
		return
	}
	tick := time.NewTicker(metaCheckInterval)
	defer tick.Stop()
	var lastPush time.Time
	for {
		var now time.Time
		select {
		case <-g.stop:
			return
		case now = <-tick.C:
		}
		s := g.status()
		g.mu.Lock()
		m, cur := g.static, g.meta
		g.mu.Unlock()
		m.AppliedIndex, m.Load, m.Leader, m.LeaderID = s.AppliedIndex, s.Load, s.Leader, s.LeaderID
		if m == cur {
			continue
		}
		urgent := m.Leader != cur.Leader || m.LeaderID != cur.LeaderID || m.Leaving != cur.Leaving
		if !urgent && now.Sub(lastPush) < indexInterval {
			continue
		}
		encoded, err := m.Encode()
		if err != nil {
			g.log.Error("node metadata not gossiped", "err", err)
			continue
		}
		g.mu.Lock()
		g.meta, g.encoded = m, encoded
		g.mu.Unlock()
		lastPush = now
		// A timeout only means the broadcast is still queued; gossip delivers it later.
		if err := g.ml.UpdateNode(updateTimeout); err != nil {
			g.log.Debug("metadata update not yet sent", "err", err)
		}
	}
}

// emit records a member's new state and tells subscribers. memberlist calls it with its
// node lock held, so it must not call back into memberlist or block.
func (g *Gossip) emit(kind EventKind, n *memberlist.Node, state State) {
	meta, err := DecodeMeta(n.Meta)
	if err == nil && meta.ID != n.Name {
		err = fmt.Errorf("meta ID %q differs from node name", meta.ID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	old, known := g.members[n.Name]
	if err != nil {
		g.log.Warn("ignoring member with bad metadata", "member", n.Name, "addr", n.Address(), "err", err)
		if !known {
			return
		}
		// Keep what we knew about it, but track its liveness.
		meta = old.Meta
	}
	m := Member{Meta: meta, GossipAddr: n.Address(), State: state, LastChange: old.LastChange}
	if !known || old.State != state || old.GossipAddr != m.GossipAddr {
		m.LastChange = time.Now()
	}
	g.members[n.Name] = m
	g.log.Debug("member "+kind.String(), "member", n.Name, "addr", m.GossipAddr, "state", state)
	for _, ch := range g.subs {
		select {
		case ch <- Event{Kind: kind, Member: m}:
		default:
			g.log.Debug("event dropped for slow subscriber", "kind", kind, "member", n.Name)
		}
	}
}

// metaDelegate gives memberlist this node's encoded metadata.
type metaDelegate Gossip

func (d *metaDelegate) NodeMeta(limit int) []byte {
	g := (*Gossip)(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.encoded) > limit {
		// Encode enforces MetaMaxSize, so this only happens if memberlist's limit shrinks.
		g.log.Error("node metadata over memberlist limit", "size", len(g.encoded), "limit", limit)
		return nil
	}
	return g.encoded
}

func (d *metaDelegate) NotifyMsg([]byte)                {}
func (d *metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d *metaDelegate) LocalState(bool) []byte          { return nil }
func (d *metaDelegate) MergeRemoteState([]byte, bool)   {}

// eventDelegate turns memberlist's callbacks into Events.
type eventDelegate Gossip

func (d *eventDelegate) NotifyJoin(n *memberlist.Node) {
	(*Gossip)(d).emit(EventJoin, n, StateAlive)
}

func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) {
	(*Gossip)(d).emit(EventUpdate, n, StateAlive)
}

// NotifyLeave is called for failed and left nodes alike (memberlist does not say which), so
// the node's last gossiped Leaving flag decides.
func (d *eventDelegate) NotifyLeave(n *memberlist.Node) {
	meta, err := DecodeMeta(n.Meta)
	if err == nil && meta.Leaving {
		(*Gossip)(d).emit(EventLeave, n, StateLeft)
		return
	}
	(*Gossip)(d).emit(EventFail, n, StateDead)
}
