package routing

import (
	"sync"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/wire"
)

// sessionState is what the router remembers per Quack session.
type sessionState struct {
	// gen is the generation the session's client speaks, which its
	// sessions on other nodes speak too where they can.
	gen wire.Generation

	mu          sync.Mutex
	consistency Level
	// lastIndex is the log index of the session's last write, or of the
	// newest state one of its reads or transactions is known to have
	// seen: its reads run only where that index is applied.
	lastIndex uint64
	// split is how many nodes a splittable scan is spread over (0: off).
	split int
	// timeout is the session's statement timeout for reads, once set
	// (SET duckraft_statement_timeout); nil is the node's default.
	timeout *time.Duration
	// txn collects the writes of an explicit transaction until COMMIT;
	// nil outside one.
	txn *pendingTxn
	// home is the node the session's reads stick to while it qualifies,
	// for cache locality.
	home string
	// remotes are the session's Quack sessions on other nodes, by id.
	remotes map[string]*remoteConn
	// settings are the statements that changed the session's settings,
	// replayed in remote sessions (settings.go); settingsVersion counts
	// their changes.
	settings        []string
	settingsVersion uint64
	// writeKey is the idempotency key of the session's next write (SET
	// duckraft_write_key); nil for a fresh one.
	writeKey []byte

	// What a session that outlives its node carries (migrate.go). sess is
	// the client's session. txnKey is the idempotency key the open
	// transaction's COMMIT carries, chosen at BEGIN so that the other
	// nodes know it; txnStream says an insert stream opened the
	// transaction, not the client.
	sess      *node.Session
	txnKey    []byte
	txnStream bool
	// seq counts the changes of the state the other nodes keep, moves the
	// session's adoptions; temporary says it created temporary objects.
	seq, moves uint64
	temporary  bool
	// A session adopted here: needFloor until its read floor is set;
	// lostTxn, lostTemp and lostSetting are answered to its next
	// statements (sessionLosses); movedTo names the node that adopted it
	// while this one could not be reached.
	needFloor   bool
	lostTxn     *node.LostError
	lostTemp    *node.LostError
	lostSetting error
	movedTo     string
}

type stateKey struct{}

func (e *Executor) state(s *node.Session) *sessionState {
	if st, ok := s.Value(stateKey{}).(*sessionState); ok {
		return st
	}
	// A new session starts at what this node knows to be committed, so a
	// client that connects after another one's write was acknowledged
	// reads it, wherever its reads run.
	st := &sessionState{gen: s.Generation(), consistency: e.cfg.Consistency, lastIndex: e.cfg.Store.CommitIndex(), sess: s}
	s.SetValue(stateKey{}, st)
	return st
}

// openTxn returns the session's open transaction, nil outside one.
func (st *sessionState) openTxn() *pendingTxn {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.txn
}

// setTxn opens (t) or ends (nil) the session's transaction.
func (st *sessionState) setTxn(t *pendingTxn) {
	st.mu.Lock()
	st.txn = t
	st.mu.Unlock()
}

// addStatementToTxn adds a statement to the open transaction; false if
// none is open.
func (st *sessionState) addStatementToTxn(stmt sqltext.Statement) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.txn == nil {
		return false
	}
	st.txn.addStatement(stmt)
	return true
}

// wrote records that the session's write applied at idx.
func (st *sessionState) wrote(idx uint64) {
	st.mu.Lock()
	st.lastIndex = max(st.lastIndex, idx)
	st.mu.Unlock()
}

// saw records that the session has seen the state at idx: a read ran
// there, or a transaction began when it was committed. Its later reads see
// at least as much.
func (st *sessionState) saw(idx uint64) { st.wrote(idx) }

// closeRemotes ends the session's sessions on other nodes.
func (st *sessionState) closeRemotes() {
	st.mu.Lock()
	remotes := st.remotes
	st.remotes = nil
	st.mu.Unlock()
	for _, rc := range remotes {
		go rc.sess.Close()
	}
}
