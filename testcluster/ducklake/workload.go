package ducklake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// Config configures a workload.
type Config struct {
	// Committers is how many DuckLake clients commit at once; each
	// writes its own table and all race for every snapshot id.
	Committers int
	// Readers is how many clients read tables at past snapshots.
	Readers int
	// Duration bounds the run; Commits, if set, ends it once that many
	// commits were acknowledged.
	Duration time.Duration
	Commits  int
	// Until, if set, extends the run past Duration until it holds (ten
	// times Duration at most).
	Until func(*Record) bool
	// Modes are the committers' modes, assigned in turn (default: all
	// three).
	Modes []Mode
	// ExpireKeep is how many of the newest snapshots ducklake_expire_snapshots
	// keeps (default 200); 0 snapshots are expired only when set.
	ExpireKeep int
	Retry      RetryConfig
	Seed       int64
	// Dial connects client i (committers first, then readers) to the
	// catalog; reconnect counts its reconnections, so that a client
	// whose node died moves to another.
	Dial func(ctx context.Context, client, reconnect int) (Backend, error)
	// Oracle opens a session that reads the catalog's final state
	// (linearizable on a cluster): it resolves unknown outcomes and
	// checks the end state.
	Oracle func(ctx context.Context) (Backend, error)
	// Data is the lake's data path and the engine that writes its files.
	Data   *Data
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Committers <= 0 {
		c.Committers = 4
	}
	if len(c.Modes) == 0 {
		c.Modes = []Mode{Autocommit, Transactional, TransactionalOneText}
	}
	if c.ExpireKeep <= 0 {
		c.ExpireKeep = 200
	}
	if c.Retry.MaxRetries == 0 && c.Retry.Wait == 0 {
		c.Retry = DefaultRetry
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Event is one commit (or expire) a client attempted.
type Event struct {
	Client   int
	Tag      string
	Op       string
	Table    string
	Mode     Mode
	Outcome  Outcome
	Landed   bool
	SID      int64
	Inserted []int64
	Deleted  []int64
	Attempts int
	Retried  int
	Latency  time.Duration
	Err      string
	// Candidates are the snapshot ids an unknown outcome may have landed
	// at: every attempt whose outcome was unknown.
	Candidates []int64
	// Trace lists the failed attempts.
	Trace []string
	// End is when the client learned the outcome.
	End time.Time
}

// Record is everything a run did and saw.
type Record struct {
	mu      sync.Mutex
	Events  []Event
	Reads   []Read
	Expires []ExpireResult
	Tables  map[string]*Table
	// Sent counts the texts sent to the catalog.
	Sent     atomic.Int64
	Start    time.Time
	Elapsed  time.Duration
	Problems []string
}

func (r *Record) add(e Event) {
	r.mu.Lock()
	r.Events = append(r.Events, e)
	r.mu.Unlock()
}

// AckedAfter counts the commits acknowledged after t.
func (r *Record) AckedAfter(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.Events {
		if e.Outcome == Committed && e.Op != "expire" && e.End.After(t) {
			n++
		}
	}
	return n
}

func (r *Record) problem(format string, args ...any) {
	r.mu.Lock()
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// workload is a running workload.
type workload struct {
	cfg  Config
	rec  *Record
	stop atomic.Bool
	// acked counts acknowledged commits.
	acked atomic.Int64
	// floors are the snapshots commits under way, or whose outcome was
	// unknown, may land at: expire keeps the lowest and every snapshot
	// after it, so that the outcome can be resolved by its tag. An entry
	// lasts until its time (zero: until released).
	floorMu sync.Mutex
	floors  map[int64]time.Time
}

// Run runs the workload: cfg.Committers clients each create a table and
// commit to it (data files, inlined rows, deletes, compactions; client 0
// also expires snapshots) while cfg.Readers clients read tables at past
// snapshots, until cfg.Duration has passed or cfg.Commits commits were
// acknowledged. faults, if set, runs on the caller's goroutine meanwhile
// and should return when its context ends. Run returns what happened; Check
// judges it.
func Run(ctx context.Context, cfg Config, faults func(ctx context.Context)) (*Record, error) {
	cfg.setDefaults()
	rec := &Record{Tables: map[string]*Table{}, Start: time.Now()}
	w := &workload{cfg: cfg, rec: rec, floors: map[int64]time.Time{}}
	setup, err := cfg.Dial(ctx, 0, 0)
	if err != nil {
		return rec, err
	}
	if _, err := NewLake(setup, Transactional, cfg.Data, cfg.Retry, &rec.Sent).Attach(ctx, true); err != nil {
		setup.Close()
		return rec, fmt.Errorf("create the lake: %w", err)
	}
	setup.Close()

	// The committers create their tables at once, as DuckLake clients
	// starting together do: their commits race for the same snapshot id
	// and catalog ids, and each CREATE reaches the leader while the
	// applier may be creating another's (docs/ducklake.md, Known bugs,
	// fixed; TestConcurrentTableCreationKeepsReplicasEqual).
	tables := make([]*Table, cfg.Committers)
	for i := range tables {
		tables[i] = NewTable(fmt.Sprintf("t%d", i))
		rec.Tables[tables[i].Name] = tables[i]
	}
	created := make([]error, len(tables))
	var creating sync.WaitGroup
	for i, t := range tables {
		creating.Go(func() { created[i] = w.create(ctx, i, t) })
	}
	creating.Wait()
	if err := errors.Join(created...); err != nil {
		return rec, err
	}
	// The run lasts Duration, or until Commits commits were acknowledged
	// (the committers stop there, and the readers and faults with the
	// run), and then until Until holds, at most ten times Duration.
	runCtx, cancel := context.WithTimeout(ctx, 10*cfg.Duration)
	defer cancel()
	go func() {
		defer cancel()
		end := time.After(cfg.Duration)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for waiting := true; waiting; {
			select {
			case <-runCtx.Done():
				return
			case <-end:
				waiting = false
			case <-tick.C:
				waiting = cfg.Commits == 0 || w.acked.Load() < int64(cfg.Commits)
			}
		}
		for cfg.Until != nil && !cfg.Until(rec) {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for i, t := range tables {
		wg.Go(func() { w.committer(runCtx, ctx, i, t) })
	}
	for i := range cfg.Readers {
		wg.Go(func() { w.reader(runCtx, cfg.Committers+i) })
	}
	if faults != nil {
		faults(runCtx)
	}
	<-runCtx.Done()
	w.stop.Store(true)
	wg.Wait()
	rec.Elapsed = time.Since(rec.Start)
	return rec, nil
}

// lakeClient is one DuckLake client: its connection, reopened after the node
// it was on went away.
type lakeClient struct {
	w         *workload
	id        int
	mode      Mode
	lake      *Lake
	reconnect int
}

func (w *workload) newClient(ctx context.Context, id int, mode Mode) (*lakeClient, error) {
	c := &lakeClient{w: w, id: id, mode: mode}
	return c, c.connect(ctx)
}

// connect (re)attaches the client, as DuckLake's AttachMetadata retries
// a connection that failed, moving on to the next node each time.
func (c *lakeClient) connect(ctx context.Context) error {
	if c.lake != nil {
		c.lake.Backend().Close()
		c.lake = nil
	}
	var last error
	for ctx.Err() == nil {
		b, err := c.w.cfg.Dial(ctx, c.id, c.reconnect)
		c.reconnect++
		if err == nil {
			l := NewLake(b, c.mode, c.w.cfg.Data, c.w.cfg.Retry, &c.w.rec.Sent)
			if _, err = l.Attach(ctx, false); err == nil {
				c.lake = l
				return nil
			}
			b.Close()
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("client %d: attach: %w (last error: %v)", c.id, ctx.Err(), last)
}

// create creates committer i's table through its own client.
func (w *workload) create(ctx context.Context, i int, t *Table) error {
	c, err := w.newClient(ctx, i, w.cfg.Modes[i%len(w.cfg.Modes)])
	if err != nil {
		return err
	}
	defer func() { c.lake.Backend().Close() }()
	for try := 0; t.ID == 0; try++ {
		if try == 10 {
			return fmt.Errorf("create %s: 10 tries failed", t.Name)
		}
		o, err := c.lake.createTable(ctx, t)
		if err != nil {
			c.lake.abort(ctx)
			if !answered(err) {
				c.connect(ctx)
			}
			continue
		}
		c.commit(ctx, t, o, fmt.Sprintf("c%d-create-%d", i, try))
	}
	return nil
}

// committer runs one committing client until the run stops. ctx ends the
// run; outer outlives it, so that an operation under way finishes and its
// outcome is resolved.
func (w *workload) committer(ctx, outer context.Context, id int, t *Table) {
	rng := rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(id)))
	mode := w.cfg.Modes[id%len(w.cfg.Modes)]
	c, err := w.newClient(outer, id, mode)
	if err != nil {
		w.rec.problem("%v", err)
		return
	}
	defer func() { c.lake.Backend().Close() }()
	nextID := int64(id+1) * 1_000_000_000_000
	ids := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = nextID
			nextID++
		}
		return out
	}
	seq := 0
	for ctx.Err() == nil && (w.cfg.Commits == 0 || w.acked.Load() < int64(w.cfg.Commits)) {
		seq++
		tag := fmt.Sprintf("c%d-%d", id, seq)
		var o *op
		var err error
		switch p := rng.IntN(100); {
		case id == 0 && p < 4:
			c.expire(outer, tag)
			continue
		case p < 38:
			o, err = c.lake.insertFile(outer, t, ids(11+rng.IntN(30)))
		case p < 76:
			o, err = c.lake.insertInlined(outer, t, ids(1+rng.IntN(10)))
		case p < 90:
			o, err = c.delete(outer, t, rng)
		default:
			o, err = c.lake.compact(outer, t)
		}
		if err != nil {
			c.lake.abort(outer)
			if errors.Is(err, errCreatedUnseen) {
				w.rec.problem("client %d: %v", id, err)
				return
			}
			if !answered(err) && outer.Err() == nil {
				c.connect(outer)
			}
			continue
		}
		if o == nil {
			c.lake.end(outer)
			continue
		}
		c.commit(outer, t, o, tag)
	}
}

// delete deletes one to three live rows: inlined ones, or rows of one
// data file.
func (c *lakeClient) delete(ctx context.Context, t *Table, rng *rand.Rand) (*op, error) {
	var inlined []int64
	for id := range t.inlined {
		inlined = append(inlined, id)
	}
	slices.Sort(inlined)
	var files []*fileState
	for _, f := range t.files {
		if len(f.live) > 0 {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, func(a, b *fileState) int { return int(a.ID - b.ID) })
	pick := func(from []int64) []int64 {
		n := min(len(from), 1+rng.IntN(3))
		rng.Shuffle(len(from), func(i, j int) { from[i], from[j] = from[j], from[i] })
		out := slices.Clone(from[:n])
		slices.Sort(out)
		return out
	}
	if len(inlined) > 0 && (len(files) == 0 || rng.IntN(2) == 0) {
		return c.lake.deleteInlined(t, pick(inlined)), nil
	}
	if len(files) == 0 {
		return nil, nil
	}
	f := files[rng.IntN(len(files))]
	var live []int64
	for id := range f.live {
		live = append(live, id)
	}
	slices.Sort(live)
	return c.lake.deleteFromFile(ctx, t, f, pick(live))
}

// commit runs o through the commit loop, resolves an unknown outcome, and
// records the event.
func (c *lakeClient) commit(ctx context.Context, t *Table, o *op, tag string) {
	start := time.Now()
	var floor int64
	if s, err := c.lake.snapshot(ctx); err == nil {
		floor = s.ID + 1
		c.w.hold(floor)
	}
	res := c.lake.commit(ctx, o.change, tag)
	ev := Event{Client: c.id, Tag: tag, Op: o.name, Table: t.Name, Mode: c.mode, Outcome: res.Outcome,
		Inserted: o.inserted, Deleted: o.deleted, Attempts: res.Attempts, Retried: res.Retried, Latency: time.Since(start), Trace: res.Trace}
	if res.Err != nil {
		ev.Err = res.Err.Error()
	}
	for _, a := range res.Unknown {
		ev.Candidates = append(ev.Candidates, a.snap.ID)
	}
	landed := res.Attempt
	switch res.Outcome {
	case Committed:
		ev.Landed, ev.SID = true, res.Attempt.snap.ID
		c.w.acked.Add(1)
	case Failed:
		landed = nil
	case Unknown:
		sid, ok := c.resolve(ctx, tag)
		ev.Landed, ev.SID = ok, sid
		landed = nil
		if ok {
			for _, a := range res.Unknown {
				if a.snap.ID == sid {
					landed = a
				}
			}
			if landed == nil {
				c.w.rec.problem("%s landed at snapshot %d, which none of its attempts with an unknown outcome (%v) wrote", tag, sid, ev.Candidates)
			}
		}
	}
	if len(ev.Candidates) == 0 {
		c.w.release(floor, 0)
	} else {
		// The end check resolves the outcome again by its tag; keep
		// its snapshots a while, past any late answer.
		c.w.release(floor, time.Minute)
	}
	if landed != nil {
		o.apply(landed)
	} else if o.discard != nil && res.Outcome == Failed {
		o.discard()
	}
	ev.End = time.Now()
	c.w.rec.add(ev)
	if res.Lost && ctx.Err() == nil {
		c.connect(ctx)
	}
}

// hold keeps snapshots from s on from expiring; release lets them go
// after d.
func (w *workload) hold(s int64) {
	w.floorMu.Lock()
	w.floors[s] = time.Time{}
	w.floorMu.Unlock()
}

func (w *workload) release(s int64, d time.Duration) {
	w.floorMu.Lock()
	defer w.floorMu.Unlock()
	if d == 0 {
		delete(w.floors, s)
		return
	}
	w.floors[s] = time.Now().Add(d)
}

func (w *workload) lowestHeld() int64 {
	w.floorMu.Lock()
	defer w.floorMu.Unlock()
	low := int64(-1)
	for s, until := range w.floors {
		if !until.IsZero() && time.Now().After(until) {
			delete(w.floors, s)
			continue
		}
		if low < 0 || s < low {
			low = s
		}
	}
	return low
}

// resolve learns whether the commit tagged tag landed, and at which
// snapshot, from a linearizable read of the catalog once the commit can no
// longer apply: the read waits for a leader that has committed an entry
// of its own term, after which no entry of an older term can still apply.
func (c *lakeClient) resolve(ctx context.Context, tag string) (int64, bool) {
	q := fmt.Sprintf(`SELECT snapshot_id FROM %s.ducklake_snapshot_changes WHERE commit_message = %s ORDER BY 1`, schemaIdent, sqlquote.Literal(tag))
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		rows, err := c.w.oracleQuery(rctx, q)
		if err == nil {
			switch len(rows) {
			case 0:
				return 0, false
			case 1:
				return mustInt(rows[0][0]), true
			default:
				c.w.rec.problem("commit %s applied %d times (snapshots %v)", tag, len(rows), rows)
				return mustInt(rows[0][0]), true
			}
		}
		if rctx.Err() != nil {
			c.w.rec.problem("commit %s: outcome unresolved: %v", tag, err)
			return 0, false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// oracleQuery runs q in a fresh oracle session.
func (w *workload) oracleQuery(ctx context.Context, q string) ([][]any, error) {
	b, err := w.cfg.Oracle(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.Query(ctx, q)
}

// expire expires every snapshot but the newest ExpireKeep, and never one an
// unknown outcome may have landed at.
func (c *lakeClient) expire(ctx context.Context, tag string) {
	s, err := c.lake.snapshot(ctx)
	if err != nil {
		c.lake.abort(ctx)
		if !answered(err) {
			c.connect(ctx)
		}
		return
	}
	below := s.ID - int64(c.w.cfg.ExpireKeep)
	if h := c.w.lowestHeld(); h >= 0 && h < below {
		below = h
	}
	start := time.Now()
	res, err := c.lake.expire(ctx, below)
	ev := Event{Client: c.id, Tag: tag, Op: "expire", Mode: c.mode, Outcome: Committed, Landed: err == nil, Latency: time.Since(start), Attempts: 1}
	if err != nil {
		ev.Outcome, ev.Err = Failed, err.Error()
		if !answered(err) {
			ev.Outcome = Unknown
			c.connect(ctx)
		}
	} else {
		c.w.rec.mu.Lock()
		c.w.rec.Expires = append(c.w.rec.Expires, res)
		c.w.rec.mu.Unlock()
	}
	c.w.rec.add(ev)
}

// reader reads committers' tables at snapshots among the newest until the
// run stops.
func (w *workload) reader(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(id)))
	c, err := w.newClient(ctx, id, w.cfg.Modes[id%len(w.cfg.Modes)])
	if err != nil {
		if ctx.Err() == nil {
			w.rec.problem("%v", err)
		}
		return
	}
	defer func() { c.lake.Backend().Close() }()
	for ctx.Err() == nil {
		table := fmt.Sprintf("t%d", rng.IntN(w.cfg.Committers))
		s, err := c.lake.snapshot(ctx)
		if err == nil {
			err = c.lake.end(ctx)
		}
		if err != nil {
			c.lake.abort(ctx)
			if !answered(err) && ctx.Err() == nil {
				c.connect(ctx)
			}
			continue
		}
		at := s.ID - rng.Int64N(int64(w.cfg.ExpireKeep)/2+1)
		r, err := c.lake.readAt(ctx, table, max(at, 0))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !answered(err):
			c.connect(ctx)
			continue
		case err != nil:
			w.rec.problem("read of %s at %d: %v", table, at, err)
			continue
		}
		if r.Exists {
			r.IDs = nil
			w.rec.mu.Lock()
			w.rec.Reads = append(w.rec.Reads, r)
			w.rec.mu.Unlock()
		}
	}
}
