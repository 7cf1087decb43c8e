package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// opTimeout bounds one client operation; past it a write's outcome is
// unknown.
const opTimeout = 5 * time.Second

// Sizes of the workloads' data.
const (
	registerKeys = 4
	bankAccounts = 5
	bankBalance  = 1000
)

// schema creates the workloads' tables and their first rows.
var schema = []string{
	"CREATE TABLE kv(k INTEGER PRIMARY KEY, v BIGINT)",
	fmt.Sprintf("INSERT INTO kv SELECT range, 0 FROM range(%d)", registerKeys),
	"CREATE TABLE appends(id BIGINT)",
	"CREATE TABLE bank(id INTEGER PRIMARY KEY, balance BIGINT)",
	fmt.Sprintf("INSERT INTO bank SELECT range, %d FROM range(%d)", bankBalance, bankAccounts),
	"CREATE TABLE sess(k INTEGER PRIMARY KEY, v BIGINT)",
}

// worker is one client: a Quack session on some node, replaced by a
// session on another node when the connection breaks.
type worker struct {
	id       int
	workload string
	rng      *rand.Rand
	nodes    []*testcluster.Node
	rec      *recorder
	pace     time.Duration
	// setup runs on every new session, e.g. to choose a consistency level.
	setup string

	conn *client.Conn
	node string
	// backoff makes the next pause longer after an error, so that a client
	// does not spin while the cluster has no leader.
	backoff bool
}

func newWorker(id int, workload string, seed int64, nodes []*testcluster.Node, rec *recorder, pace time.Duration) *worker {
	return &worker{id: id, workload: workload, rng: rand.New(rand.NewPCG(uint64(seed), uint64(id))),
		nodes: nodes, rec: rec, pace: pace}
}

// session returns the worker's session, connecting to a node picked at
// random (then the next ones) when it has none.
func (w *worker) session(ctx context.Context) (*client.Conn, error) {
	if w.conn != nil {
		return w.conn, nil
	}
	first := w.rng.IntN(len(w.nodes))
	var err error
	for i := range w.nodes {
		n := w.nodes[(first+i)%len(w.nodes)]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var c *client.Conn
		c, err = client.Connect(cctx, "quack:"+n.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
		if err == nil && w.setup != "" {
			if _, err = c.Exec(cctx, w.setup); err != nil {
				go c.Close()
			}
		}
		cancel()
		if err == nil {
			w.conn, w.node = c, n.ID
			return c, nil
		}
	}
	return nil, fmt.Errorf("connect to any node: %w", err)
}

// failed records err and drops the session unless the server answered:
// after a transport error or a timeout the session's state is unknown.
func (w *worker) failed(err error) string {
	kind := w.rec.error(err)
	w.backoff = true
	var se *client.ServerError
	if !errors.As(err, &se) && w.conn != nil {
		// Close can block on a paused node; it gives up after 5 s.
		go w.conn.Close()
		w.conn = nil
	}
	return kind
}

// wait paces the worker and reports whether it should go on.
func (w *worker) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// loop runs op until ctx ends, reconnecting as needed.
func (w *worker) loop(ctx context.Context, op func(ctx context.Context, c *client.Conn)) {
	defer func() {
		if w.conn != nil {
			go w.conn.Close()
		}
	}()
	for ctx.Err() == nil {
		if c, err := w.session(ctx); err != nil {
			w.failed(err)
		} else {
			op(ctx, c)
		}
		pause := time.Duration(w.rng.Int64N(int64(w.pace) + 1))
		if w.backoff {
			pause, w.backoff = 100*time.Millisecond, false
		}
		if !w.wait(ctx, pause) {
			return
		}
	}
}

// exec runs one statement within opTimeout.
func exec(ctx context.Context, c *client.Conn, sql string) error {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := c.Exec(octx, sql)
	return err
}

// queryRow runs a query within opTimeout and returns its single row's
// integer columns.
func queryRow(ctx context.Context, c *client.Conn, sql string) ([]int64, error) {
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := c.Query(octx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: no row", sql)
	}
	vals, err := rows.Values()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		switch x := v.(type) {
		case int64:
			out[i] = x
		case int32:
			out[i] = int64(x)
		default:
			return nil, fmt.Errorf("%s: column %d is %T", sql, i, v)
		}
	}
	for rows.Next() {
	}
	return out, rows.Err()
}

// registerWorker writes and strong-reads a few keys, recording a history
// for the linearizability checker.
type registerWorker struct {
	*worker
	seq     int64
	history []porcupine.Operation
}

func (w *registerWorker) step(ctx context.Context, c *client.Conn) {
	key := w.rng.IntN(registerKeys)
	node := w.node
	if w.rng.IntN(2) == 0 {
		w.seq++
		val := int64(w.id)<<32 | w.seq
		sql := fmt.Sprintf("INSERT OR REPLACE INTO kv VALUES (%d, %d)", key, val)
		if w.rng.IntN(2) == 0 {
			sql = fmt.Sprintf("UPDATE kv SET v = %d WHERE k = %d", val, key)
		}
		call := w.rec.now()
		err := exec(ctx, c, sql)
		ret := w.rec.now()
		op := porcupine.Operation{ClientId: w.id, Input: regInput{Key: key, Write: true, Value: val},
			Call: call, Return: ret, Output: regOutput{}, Metadata: node}
		if err != nil {
			// The write may have happened or not, at any time from now
			// on: it stays open until the end of the history.
			op.Return, op.Output = math.MaxInt64, regOutput{Unknown: true}
			w.rec.op(w.workload, "write", "unknown")
			w.failed(err)
		} else {
			w.rec.op(w.workload, "write", "ok")
			w.rec.ack(call, ret)
		}
		w.history = append(w.history, op)
		return
	}
	call := w.rec.now()
	row, err := queryRow(ctx, c, fmt.Sprintf("SELECT v FROM kv WHERE k = %d", key))
	ret := w.rec.now()
	if err != nil {
		// A failed read has no effect: it constrains nothing.
		w.rec.op(w.workload, "read", "failed")
		w.failed(err)
		return
	}
	w.rec.op(w.workload, "read", "ok")
	w.history = append(w.history, porcupine.Operation{ClientId: w.id, Input: regInput{Key: key},
		Call: call, Return: ret, Output: regOutput{Value: row[0]}, Metadata: node})
}

// appendState is what a client knows of one inserted id.
type appendState uint8

const (
	appendAcked appendState = iota + 1
	appendUnknown
)

// appendWorker inserts unique ids three ways (one-row INSERT, many-row
// INSERT, Quack append) and remembers which were acknowledged.
type appendWorker struct {
	*worker
	seq int64
	ids map[int64]appendState
}

func (w *appendWorker) step(ctx context.Context, c *client.Conn) {
	n := 1 + w.rng.IntN(3)
	ids := make([]int64, n)
	for i := range ids {
		w.seq++
		ids[i] = int64(w.id)<<40 | w.seq
	}
	how := []string{"insert", "insert-many", "append"}[w.rng.IntN(3)]
	if n == 1 && how == "insert-many" {
		how = "insert"
	}
	call := w.rec.now()
	var err error
	switch how {
	case "append":
		err = appendIDs(ctx, c, ids)
	default:
		sql := "INSERT INTO appends VALUES "
		for i, id := range ids {
			if i > 0 {
				sql += ", "
			}
			sql += fmt.Sprintf("(%d)", id)
		}
		err = exec(ctx, c, sql)
	}
	ret := w.rec.now()
	state := appendAcked
	if err != nil {
		state = appendUnknown
		w.rec.op(w.workload, how, "unknown")
		w.failed(err)
	} else {
		w.rec.op(w.workload, how, "ok")
		w.rec.ack(call, ret)
	}
	for _, id := range ids {
		w.ids[id] = state
	}
}

// appendIDs sends ids as one BIGINT data chunk through Quack's append.
func appendIDs(ctx context.Context, c *client.Conn, ids []int64) error {
	data := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(id))
	}
	chunk := &wire.DataChunk{Rows: len(ids), Columns: []*wire.Vector{
		{Type: wire.LogicalType{ID: wire.TypeBigInt}, Count: len(ids), Data: data},
	}}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	return c.Append(octx, "main", "appends", chunk)
}

// bankWorker moves money between accounts in explicit transactions and
// checks after each that its own session still sees the total.
type bankWorker struct{ *worker }

func (w *bankWorker) step(ctx context.Context, c *client.Conn) {
	from := w.rng.IntN(bankAccounts)
	to := (from + 1 + w.rng.IntN(bankAccounts-1)) % bankAccounts
	amount := 1 + w.rng.IntN(50)
	debit := fmt.Sprintf("UPDATE bank SET balance = balance - %d WHERE id = %d", amount, from)
	credit := fmt.Sprintf("UPDATE bank SET balance = balance + %d WHERE id = %d", amount, to)
	call := w.rec.now()
	var err error
	if w.rng.IntN(2) == 0 {
		err = exec(ctx, c, "BEGIN; "+debit+"; "+credit+"; COMMIT")
	} else {
		for _, sql := range []string{"BEGIN", debit, credit, "COMMIT"} {
			if err = exec(ctx, c, sql); err != nil {
				break
			}
		}
	}
	ret := w.rec.now()
	if err != nil {
		w.rec.op(w.workload, "transfer", "unknown")
		w.failed(err)
		if w.conn != nil {
			// The session may still hold the open transaction.
			exec(ctx, c, "ROLLBACK")
		}
		return
	}
	w.rec.op(w.workload, "transfer", "ok")
	w.rec.ack(call, ret)
	checkTotal(ctx, w.worker, c, "session")
}

// bankReader reads the bank's total at one consistency level.
type bankReader struct {
	*worker
	level string
}

func (w *bankReader) step(ctx context.Context, c *client.Conn) {
	checkTotal(ctx, w.worker, c, w.level)
}

// checkTotal reads the sum of all balances: every transfer applies
// atomically on every node, so at any consistency level it is conserved.
func checkTotal(ctx context.Context, w *worker, c *client.Conn, level string) {
	row, err := queryRow(ctx, c, "SELECT CAST(coalesce(sum(balance), 0) AS BIGINT), count(*) FROM bank")
	if err != nil {
		w.rec.op(w.workload, "read "+level, "failed")
		w.failed(err)
		return
	}
	if row[1] == 0 && level == "any" {
		// An 'any' read may run on a node that has not yet applied the
		// setup's rows; every other level must see them.
		w.rec.op(w.workload, "read "+level, "before setup")
		return
	}
	w.rec.op(w.workload, "read "+level, "ok")
	if row[0] != bankAccounts*bankBalance || row[1] != bankAccounts {
		w.rec.violate("bank", "%s read on %s: total %d over %d accounts, want %d over %d",
			level, w.node, row[0], row[1], bankAccounts*bankBalance, bankAccounts)
	}
}

// sessionWorker writes increasing values to a key of its own and reads it
// back with the default (session) consistency: a session must see its own
// last acknowledged write, and never a value nobody wrote.
type sessionWorker struct {
	*worker
	seq int64
	// acked is the last value this session wrote with an acknowledgement;
	// session is the session it was acknowledged in.
	acked   int64
	session *client.Conn
}

func (w *sessionWorker) step(ctx context.Context, c *client.Conn) {
	if c != w.session {
		// Read-your-writes holds within a session: a new one starts over.
		w.session, w.acked = c, 0
	}
	w.seq++
	call := w.rec.now()
	err := exec(ctx, c, fmt.Sprintf("INSERT OR REPLACE INTO sess VALUES (%d, %d)", w.id, w.seq))
	ret := w.rec.now()
	if err != nil {
		w.rec.op(w.workload, "write", "unknown")
		w.failed(err)
		return
	}
	w.rec.op(w.workload, "write", "ok")
	w.rec.ack(call, ret)
	w.acked = w.seq
	row, err := queryRow(ctx, c, fmt.Sprintf("SELECT v FROM sess WHERE k = %d", w.id))
	if err != nil {
		w.rec.op(w.workload, "read", "failed")
		w.failed(err)
		return
	}
	w.rec.op(w.workload, "read", "ok")
	switch v := row[0]; {
	case v < w.acked:
		w.rec.violate("session", "client %d on %s wrote %d (acknowledged) and then read %d", w.id, w.node, w.acked, v)
	case v > w.seq:
		w.rec.violate("session", "client %d on %s read %d, but wrote at most %d", w.id, w.node, v, w.seq)
	}
}

// workloads runs every workload's workers until ctx ends.
type workloads struct {
	register []*registerWorker
	appends  []*appendWorker
	wg       sync.WaitGroup
}

// Worker counts per workload.
const (
	registerWorkers = 3
	appendWorkers   = 2
	bankWorkers     = 2
	sessionWorkers  = 2
)

// startWorkloads starts the workers; each draws its choices from its own
// generator seeded from seed.
func startWorkloads(ctx context.Context, seed int64, nodes []*testcluster.Node, rec *recorder, pace time.Duration) *workloads {
	wl := &workloads{}
	id := 0
	run := func(w *worker, step func(context.Context, *client.Conn)) {
		wl.wg.Add(1)
		go func() {
			defer wl.wg.Done()
			w.loop(ctx, step)
		}()
	}
	mk := func(name string) *worker {
		id++
		return newWorker(id, name, seed, nodes, rec, pace)
	}
	for range registerWorkers {
		w := &registerWorker{worker: mk("register")}
		w.setup = "SET duckraft_consistency = 'strong'"
		wl.register = append(wl.register, w)
		run(w.worker, w.step)
	}
	for range appendWorkers {
		w := &appendWorker{worker: mk("appends"), ids: map[int64]appendState{}}
		wl.appends = append(wl.appends, w)
		run(w.worker, w.step)
	}
	for range bankWorkers {
		w := &bankWorker{worker: mk("bank")}
		run(w.worker, w.step)
	}
	for _, level := range []string{"strong", "any"} {
		w := &bankReader{worker: mk("bank"), level: level}
		w.setup = fmt.Sprintf("SET duckraft_consistency = '%s'", level)
		run(w.worker, w.step)
	}
	for range sessionWorkers {
		w := &sessionWorker{worker: mk("session")}
		run(w.worker, w.step)
	}
	return wl
}

// wait waits for every worker to stop.
func (wl *workloads) wait() { wl.wg.Wait() }

// history returns every register operation.
func (wl *workloads) history() []porcupine.Operation {
	var h []porcupine.Operation
	for _, w := range wl.register {
		h = append(h, w.history...)
	}
	return h
}

// appended returns what clients know of every id they tried to insert.
func (wl *workloads) appended() map[int64]appendState {
	all := map[int64]appendState{}
	for _, w := range wl.appends {
		for id, s := range w.ids {
			all[id] = s
		}
	}
	return all
}
