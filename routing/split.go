package routing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// Split scans: how many times the router re-pins before it falls back to
// an ordinary read on one node, and the most shares a scan is cut into.
const (
	splitAttempts = 6
	maxSplit      = 16
)

// splitSetting recognises SET duckraft_split_scan = R, which the router
// handles itself (0 or 1 turns split scans off).
func splitSetting(stmt sqltext.Statement) (int, bool, error) {
	v, ok := setStatement(stmt, "duckraft_split_scan")
	digits := v.Text
	switch {
	case ok && v.Kind == sqltext.TokString && digits[0] == '\'':
		digits = digits[1 : len(digits)-1]
	case !ok || v.Kind != sqltext.TokNumber:
		return 0, false, nil
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > maxSplit {
		return 0, true, fmt.Errorf("duckraft: duckraft_split_scan must be between 0 and %d", maxSplit)
	}
	return n, true, nil
}

// splitTable returns the table a splittable text scans. A split scan
// serves one statement shape, SELECT * FROM name[.name[.name]], all columns
// of one table with no filter, order or limit, so that the shares' union is
// the whole answer.
func splitTable(text sqltext.Statement) (string, bool) {
	sig, ok := significant(text)
	if !ok || len(sig) < 4 || !sig[0].Is("select") || sig[1].Kind != sqltext.TokOp || sig[1].Text != "*" || !sig[2].Is("from") {
		return "", false
	}
	name := sig[3:]
	if len(name) > 5 || len(name)%2 == 0 {
		return "", false
	}
	for i, t := range name {
		if i%2 == 0 && !namePart(t) || i%2 == 1 && !t.IsPunct('.') {
			return "", false
		}
	}
	last := name[len(name)-1]
	return text.Text[name[0].Pos : last.Pos+len(last.Text)], true
}

// namePart reports whether t can be one part of a table's name: a quoted
// identifier or a bare ASCII word. sqltext's lexer reads every non-ASCII byte as
// part of a word, and DuckDB reads some (U+00A0, no-break space) as space.
func namePart(t sqltext.Token) bool {
	if t.Kind == sqltext.TokQuotedIdent {
		return len(t.Text) > 2
	}
	return t.Kind == sqltext.TokIdent && strings.Trim(strings.ToLower(t.Text), "abcdefghijklmnopqrstuvwxyz0123456789_$") == ""
}

// shareSQL is share k of r of a scan of table: the rows whose first column
// hashes to k. Any function of a row's content keeps the shares exact when
// nodes store the same rows at different rowids (after a checkpoint's vacuum
// or a snapshot install); one column rather than the whole row costs each
// node a third of the CPU, as every node reads the whole table to find its
// share.
func shareSQL(table string, r, k int) string {
	return fmt.Sprintf("SELECT * FROM %s WHERE hash(#1) %% %d = %d", table, r, k)
}

// splitScan spreads a scan over several nodes, each reading its share
// pinned at one log index (the routing half: read), and serves a share
// routed here (pinnedRead).
type splitScan struct {
	log     *slog.Logger
	members *members
	remote  *remoteReads
	local   *localReads
}

// read scans table on up to r nodes, each returning its share in a read
// transaction at the same log index, and merges the shares. It reports
// false when no split is possible (fewer than two nodes, or they could not
// meet at one index in splitAttempts tries): one node must run the whole
// scan.
func (sc *splitScan) read(ctx context.Context, st *sessionState, table string, r int, last uint64) (node.Rows, bool, error) {
	peers := sc.peers(r)
	pin := max(last, sc.members.maxApplied(peers))
	// reached is the highest index a share's node said it was at: a floor
	// for the pin once writes stop, however stale gossip is.
	var reached uint64
	for attempt := 0; attempt < splitAttempts && len(peers) > 1; attempt++ {
		rows, errs := sc.shares(ctx, st, peers, table, pin)
		if rows != nil {
			return rows, true, nil
		}
		var seen uint64
		var keep []Peer
		behind := false
		for i, err := range errs {
			ae, coded := nodeapi.AsError(err)
			switch {
			case err == nil:
				keep = append(keep, peers[i])
			case coded && ae.Code == nodeapi.CodePinned:
				// The node has applied past the pin and names its index.
				seen = max(seen, ae.Index)
				reached = max(reached, ae.Index)
				keep = append(keep, peers[i])
			case retryableRead(err):
				behind = behind || !errors.Is(err, errRemote)
				if !errors.Is(err, errRemote) {
					keep = append(keep, peers[i])
				}
			default:
				return nil, true, err
			}
		}
		peers = keep
		switch {
		case seen > pin && !behind:
			// Writes are flowing: aim just ahead, where every node will
			// open its transaction right as it applies the index.
			pin = seen + 1
		case seen > pin:
			pin = seen
		case behind:
			// The index aimed at never came (writes stopped): meet at
			// the furthest index some node reached.
			pin = max(last, sc.members.maxApplied(peers), reached)
		}
		sc.log.Debug("split scan re-pinned", "table", table, "attempt", attempt+1, "pin", pin)
	}
	return nil, false, nil
}

// peers returns up to r nodes for the shares, cheapest first.
func (sc *splitScan) peers(r int) []Peer {
	m := sc.members
	peers := m.peers()
	top := m.maxApplied(peers)
	now := time.Now()
	peers = slices.DeleteFunc(peers, func(p Peer) bool {
		return p.ID == m.id && m.router || m.bal.Suspected(p.ID, now) || top-min(top, p.Applied) > m.maxStaleness
	})
	slices.SortFunc(peers, func(a, b Peer) int {
		return int(m.bal.Cost(a, m.id, top) - m.bal.Cost(b, m.id, top))
	})
	return peers[:min(r, len(peers))]
}

// shares starts every share at index pin; it returns the merged rows if all
// started, else each share's error (nil for those that started, which are
// closed again).
func (sc *splitScan) shares(ctx context.Context, st *sessionState, peers []Peer, table string, pin uint64) (node.Rows, []error) {
	rows := make([]node.Rows, len(peers))
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i], errs[i] = sc.remote.query(ctx, st, p, nodeapi.Read{At: pin}, shareSQL(table, len(peers), i))
		}()
	}
	wg.Wait()
	for i := 1; i < len(rows) && errs[0] == nil; i++ {
		if errs[i] == nil && !sameTypes(rows[0].Types(), rows[i].Types()) {
			// Chunks are checked against their own share's types, so
			// shares that disagree cannot be merged into one answer.
			errs[i] = fmt.Errorf("split scan: the share from %s has other column types than the share from %s", peers[i].ID, peers[0].ID)
		}
	}
	if !slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return newMergedRows(rows, st.gen), nil
	}
	for _, r := range rows {
		if r != nil {
			r.Close()
		}
	}
	return nil, errs
}

// sameTypes reports whether a and b are the same column types, as they
// would be written on the wire.
func sameTypes(a, b []wire.LogicalType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		ea, erra := wire.AppendLogicalType(nil, &a[i], wire.Q3)
		eb, errb := wire.AppendLogicalType(nil, &b[i], wire.Q3)
		if erra != nil || errb != nil || !bytes.Equal(ea, eb) {
			return false
		}
	}
	return true
}

// pinnedRead runs a share of a split scan in a read transaction whose
// snapshot is exactly index pin: DuckDB has no AS OF, so a node that has
// applied past pin refuses and the router re-pins.
func (sc *splitScan) pinnedRead(ctx context.Context, s *node.Session, pin uint64, sql string) (node.Rows, error) {
	if err := sc.local.waitApplied(ctx, pin); err != nil {
		return nil, err
	}
	conn := s.Conn()
	if _, err := conn.Exec(ctx, "BEGIN TRANSACTION"); err != nil {
		return nil, fmt.Errorf("split scan: %w", err)
	}
	rollback := func() { conn.Exec(context.Background(), "ROLLBACK") }
	// DuckDB fixes a transaction's snapshot at its first read, this one.
	idx, err := appliedIndex(ctx, conn)
	if err != nil {
		rollback()
		return nil, fmt.Errorf("split scan: read applied index: %w", err)
	}
	if idx != pin {
		rollback()
		return nil, &nodeapi.Error{Code: nodeapi.CodePinned, Index: idx,
			Message: fmt.Sprintf("duckraft: split scan pinned at %d, node at %d", pin, idx)}
	}
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		rollback()
		return nil, err
	}
	sc.local.reads.Add(1)
	sc.local.active.Add(1)
	return newTrackedRows(rows, func() {
		rollback()
		sc.local.active.Add(-1)
	}), nil
}

// appliedIndex reads the applied index the FSM stores with the data, in
// conn's transaction.
func appliedIndex(ctx context.Context, conn *engine.Conn) (uint64, error) {
	row, err := conn.QueryRow(ctx, replication.AppliedQuery)
	if err != nil {
		return 0, err
	}
	switch x := row[0].(type) {
	case uint64:
		return x, nil
	case int64:
		return uint64(x), nil
	}
	return 0, fmt.Errorf("applied index is a %T", row[0])
}

// mergedRows interleaves the chunks of several results, read concurrently
// so that every share's node works at once. Order across shares is not
// kept: a split scan is a multiset. When every share hands out encoded
// chunks, the pumps take them encoded in the client's generation gen, so
// the shares pass through to the client undecoded.
type mergedRows struct {
	names   []string
	types   []wire.LogicalType
	parts   []node.Rows
	gen     wire.Generation
	encoded bool
	chunks  chan mergedChunk
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	left    int
}

// mergedChunk is one chunk of a share, decoded (c) or encoded (enc, with a
// reference to the buffer it is in); both nil mark the share's end.
type mergedChunk struct {
	c    *wire.DataChunk
	enc  []byte
	buf  *wire.Buffer
	rows int
	err  error
}

// mergeDepth is how many chunks per share the pumps may hold ahead of the
// client: enough that a share's node never waits on another share's.
const mergeDepth = 4

func newMergedRows(parts []node.Rows, gen wire.Generation) *mergedRows {
	m := &mergedRows{names: parts[0].Names(), types: parts[0].Types(), parts: parts, gen: gen, encoded: true,
		chunks: make(chan mergedChunk, mergeDepth*len(parts)), stop: make(chan struct{}), left: len(parts)}
	for _, p := range parts {
		if _, ok := p.(node.EncodedRows); !ok {
			m.encoded = false
		}
	}
	for _, p := range parts {
		m.wg.Add(1)
		go m.pump(p)
	}
	return m
}

// pump forwards p's chunks, then an empty mergedChunk for its end. Shares
// are remote results, whose chunks stay valid after later calls; an encoded
// one comes with its own reference to its buffer, which goes with it.
func (m *mergedRows) pump(p node.Rows) {
	defer m.wg.Done()
	for {
		var mc mergedChunk
		if m.encoded {
			mc.enc, mc.rows, mc.buf, mc.err = p.(node.EncodedRows).NextEncoded(m.gen)
		} else {
			mc.c, mc.err = p.Next()
		}
		select {
		case m.chunks <- mc:
		case <-m.stop:
			mc.buf.Release()
			return
		}
		if mc.c == nil && mc.enc == nil || mc.err != nil {
			return
		}
	}
}

func (m *mergedRows) Names() []string           { return m.names }
func (m *mergedRows) Types() []wire.LogicalType { return m.types }

// next returns the next chunk of any share; an empty one at the end.
func (m *mergedRows) next() (mergedChunk, error) {
	for m.left > 0 {
		mc := <-m.chunks
		if mc.err != nil {
			return mergedChunk{}, mc.err
		}
		if mc.c != nil || mc.enc != nil {
			return mc, nil
		}
		m.left--
	}
	return mergedChunk{}, nil
}

func (m *mergedRows) Next() (*wire.DataChunk, error) {
	mc, err := m.next()
	if err != nil || mc.enc == nil {
		return mc.c, err
	}
	// The decoded chunk may alias mc.buf, which is therefore not
	// released but left to the collector.
	c, err := wire.DecodeDataChunk(wire.NewReader(mc.enc), wire.Limits{})
	if err != nil {
		return nil, fmt.Errorf("split scan: decode chunk: %w", err)
	}
	return c, nil
}

// NextEncoded implements node.EncodedRows.
func (m *mergedRows) NextEncoded(g wire.Generation) ([]byte, int, *wire.Buffer, error) {
	if !m.encoded || g != m.gen {
		c, err := m.Next()
		if c == nil || err != nil {
			return nil, 0, nil, err
		}
		enc, err := wire.AppendDataChunk(nil, c, g)
		return enc, c.Rows, nil, err
	}
	mc, err := m.next()
	return mc.enc, mc.rows, mc.buf, err
}

func (m *mergedRows) Close() {
	m.once.Do(func() {
		// Each pump stops after at most one more chunk; the parts are
		// closed once no pump reads them.
		close(m.stop)
		m.wg.Wait()
		// No pump sends any more: what is queued is nobody's.
		for len(m.chunks) > 0 {
			(<-m.chunks).buf.Release()
		}
		for _, p := range m.parts {
			p.Close()
		}
	})
}
