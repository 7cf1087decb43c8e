package daemon

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/internal/buildinfo"
	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing"
)

// metrics are one daemon's Prometheus metrics, in a registry of its own:
// testcluster runs several daemons in one process, and each must answer
// /metrics with its own numbers. Every duckraft metric carries the node's
// id as the label node. The packages that hold the facts report them
// through the hooks of their Config (node.Config.ObserveRequest,
// ObserveForward, ObserveAdopt and ObserveSessionLost,
// routing.Config.ObserveRead and ObserveWrite,
// replication.Config.ObserveSnapshot and ObserveLeader); indexes, lag,
// sessions and gossip members are read at scrape time.
type metrics struct {
	reg *prometheus.Registry

	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	bytesIn       prometheus.Counter
	bytesOut      prometheus.Counter
	errors        *prometheus.CounterVec
	reads         *prometheus.CounterVec
	writes        *prometheus.CounterVec
	leaderChanges prometheus.Counter
	snapDuration  prometheus.Histogram
	snapBytes     prometheus.Histogram
	forwarded     *prometheus.CounterVec
	adopted       *prometheus.CounterVec
	sessionsLost  prometheus.Counter
}

// newMetrics registers the metrics of the daemon with id, and the
// process's raft and memberlist metrics (processSink).
func newMetrics(id string) (*metrics, error) {
	reg := prometheus.NewRegistry()
	r := prometheus.WrapRegistererWith(prometheus.Labels{"node": id}, reg)
	f := func(c prometheus.Collector) prometheus.Collector {
		r.MustRegister(c)
		return c
	}
	m := &metrics{reg: reg}
	m.requests = f(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duckraft_quack_requests_total",
		Help: "Quack requests answered, by message type and outcome (ok or error)."}, []string{"type", "outcome"})).(*prometheus.CounterVec)
	m.duration = f(prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "duckraft_quack_request_duration_seconds",
		Help:    "Time from a Quack request's arrival to its answer written, by message type.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"type"})).(*prometheus.HistogramVec)
	m.bytesIn = f(prometheus.NewCounter(prometheus.CounterOpts{Name: "duckraft_quack_received_bytes_total",
		Help: "Bytes of Quack request bodies received, as sent (compressed when they were)."})).(prometheus.Counter)
	m.bytesOut = f(prometheus.NewCounter(prometheus.CounterOpts{Name: "duckraft_quack_sent_bytes_total",
		Help: "Bytes of Quack answer bodies sent."})).(prometheus.Counter)
	m.errors = f(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duckraft_errors_total",
		Help: "Errors by kind: a Quack answer's error code, statement (an error without a code), malformed (an undecodable request), snapshot."},
		[]string{"kind"})).(*prometheus.CounterVec)
	m.reads = f(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duckraft_reads_total",
		Help: "Reads routed by this node, by consistency level, the node that served them (none when no node could, split for a split scan) and outcome."},
		[]string{"level", "served_by", "outcome"})).(*prometheus.CounterVec)
	m.writes = f(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duckraft_writes_total",
		Help: "Writes (statements, appends, transactions at COMMIT) this node sent through the leader, by outcome."},
		[]string{"outcome"})).(*prometheus.CounterVec)
	m.leaderChanges = f(prometheus.NewCounter(prometheus.CounterOpts{Name: "duckraft_leader_changes_total",
		Help: "Changes of the Raft leader this node observed, including to no leader."})).(prometheus.Counter)
	m.snapDuration = f(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "duckraft_snapshot_duration_seconds",
		Help: "Time to persist a Raft snapshot.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 9)})).(prometheus.Histogram)
	m.snapBytes = f(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "duckraft_snapshot_size_bytes",
		Help: "Size of a persisted Raft snapshot.", Buckets: prometheus.ExponentialBuckets(4096, 8, 9)})).(prometheus.Histogram)
	m.forwarded = f(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duckraft_forwarded_requests_total",
		Help: "Quack requests this node forwarded to the node holding their session, by outcome: relayed (the answer came), retried (that node could not be reached, or failed before answering a request that may be sent again: the session was located anew), lost (it failed after it had the request: answered request_lost), canceled (the client went away)."},
		[]string{"outcome"})).(*prometheus.CounterVec)
	m.adopted = f(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "duckraft_sessions_adopted_total",
		Help: "Sessions this node adopted when the node holding them failed (ok), or failed to adopt (error: too many sessions, a state it could not install)."},
		[]string{"outcome"})).(*prometheus.CounterVec)
	m.sessionsLost = f(prometheus.NewCounter(prometheus.CounterOpts{Name: "duckraft_sessions_lost_total",
		Help: "Sessions this node answered session_lost: their node failed before any other node learned their state. Each is counted once per node that answered so."})).(prometheus.Counter)
	for _, o := range []string{"ok", "error"} {
		m.writes.WithLabelValues(o)
		m.adopted.WithLabelValues(o)
	}
	for _, o := range []node.ForwardOutcome{node.ForwardRelayed, node.ForwardRetried, node.ForwardLost, node.ForwardCanceled} {
		m.forwarded.WithLabelValues(string(o))
	}
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "duckraft_build_info",
		Help:        "Always 1; its labels say which build runs: duckraftd's version, the DuckDB it embeds and the Go that built it.",
		ConstLabels: prometheus.Labels{"version": buildinfo.Version(), "engine": engine.LibraryVersion(), "goversion": buildinfo.GoVersion()}},
		func() float64 { return 1 }))
	sink, err := processSink()
	if err != nil {
		return nil, err
	}
	reg.MustRegister(sink, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m, nil
}

// outcomeLabel labels an error.
func outcomeLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// requestTypes are the Quack message types counted by name; anything else
// a client sends is counted as other, so that hostile bytes cannot grow
// the label set.
var requestTypes = map[wire.MessageType]bool{
	wire.MsgConnectionRequest: true, wire.MsgPrepareRequest: true, wire.MsgFetchRequest: true,
	wire.MsgAppendRequest: true, wire.MsgDisconnect: true, wire.MsgCancelRequest: true,
	wire.MsgProgressRequest: true, wire.MsgAcknowledgement: true, wire.MsgHeartbeatRequest: true,
}

// observeRequest is node.Config.ObserveRequest.
func (m *metrics) observeRequest(r node.RequestStats) {
	typ := "other"
	switch {
	case r.Type == 0:
		typ = "malformed"
	case requestTypes[r.Type]:
		typ = r.Type.String()
	}
	out := "ok"
	if r.Failed {
		out = "error"
		switch {
		case r.Code != "":
			m.errors.WithLabelValues(r.Code).Inc()
		case r.Type == 0:
			m.errors.WithLabelValues("malformed").Inc()
		default:
			m.errors.WithLabelValues("statement").Inc()
		}
	}
	m.requests.WithLabelValues(typ, out).Inc()
	m.duration.WithLabelValues(typ).Observe(r.Duration.Seconds())
	m.bytesIn.Add(float64(r.BytesIn))
	m.bytesOut.Add(float64(r.BytesOut))
}

// observeForward is node.Config.ObserveForward.
func (m *metrics) observeForward(o node.ForwardOutcome) { m.forwarded.WithLabelValues(string(o)).Inc() }

// observeAdopt is node.Config.ObserveAdopt.
func (m *metrics) observeAdopt(err error) {
	o := "ok"
	if err != nil {
		o = "error"
	}
	m.adopted.WithLabelValues(o).Inc()
}

// observeRead is routing.Config.ObserveRead.
func (m *metrics) observeRead(level routing.Level, servedBy string, err error) {
	if servedBy == "" {
		servedBy = "none"
	}
	m.reads.WithLabelValues(string(level), servedBy, outcomeLabel(err)).Inc()
}

// observeWrite is routing.Config.ObserveWrite.
func (m *metrics) observeWrite(err error) { m.writes.WithLabelValues(outcomeLabel(err)).Inc() }

// observeSnapshot is replication.Config.ObserveSnapshot.
func (m *metrics) observeSnapshot(took time.Duration, bytes int64, err error) {
	if err != nil {
		m.errors.WithLabelValues("snapshot").Inc()
		return
	}
	m.snapDuration.Observe(took.Seconds())
	m.snapBytes.Observe(float64(bytes))
}

// scraped registers the gauges read at scrape time from what the daemon
// runs: sessions, and on a data node Raft's indexes, term and role, the
// apply lag, and gossip's members by state.
func (m *metrics) scraped(d *Daemon) {
	r := prometheus.WrapRegistererWith(prometheus.Labels{"node": d.cfg.ID}, m.reg)
	gauge := func(name, help string, v func() float64) {
		r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	gauge("duckraft_quack_sessions", "Open Quack sessions.", func() float64 { return float64(d.srv.SessionCount()) })
	r.MustRegister(admissionCollector{d.srv})
	r.MustRegister(gossipCollector{d.members})
	if d.store == nil {
		return
	}
	s := d.store
	gauge("duckraft_raft_applied_index", "Last Raft log index applied to this node's DuckDB.", func() float64 { return float64(s.AppliedIndex()) })
	gauge("duckraft_raft_commit_index", "Last Raft log index this node knows committed.", func() float64 { return float64(s.CommitIndex()) })
	gauge("duckraft_raft_last_index", "Last index in this node's Raft log.", func() float64 { return float64(s.LastIndex()) })
	gauge("duckraft_raft_term", "Current Raft term.", func() float64 {
		t, _ := strconv.ParseUint(s.Stats()["term"], 10, 64)
		return float64(t)
	})
	gauge("duckraft_raft_leader", "1 while this node is the Raft leader, else 0.", func() float64 {
		if s.IsLeader() {
			return 1
		}
		return 0
	})
	gauge("duckraft_apply_lag", "Log entries this node is behind: committed entries it has not applied, or how far its applied index is behind the furthest a live member reports through gossip, whichever is more.",
		func() float64 { return float64(d.lag()) })
	gauge("duckraft_apply_stalled_seconds", "How long this node's applier has been retrying an entry it failed to apply for a node-local reason (out of memory, I/O); 0 while it keeps up.",
		func() float64 {
			if st, ok := s.Stalled(); ok {
				return time.Since(st.Since).Seconds()
			}
			return 0
		})
	gauge("duckraft_staged_transactions", "Transactions whose rows are staged in this node's database ahead of their COMMIT (an abandoned one is dropped after --stage-timeout).",
		func() float64 {
			ids, err := s.IdleStages(context.Background(), math.MaxInt64)
			if err != nil {
				return math.NaN()
			}
			return float64(len(ids))
		})
	r.MustRegister(backupCollector{d})
}

// backupCollector reports this node's scheduled backups (BackupStats) at
// scrape time.
type backupCollector struct{ d *Daemon }

var (
	backupsDesc = prometheus.NewDesc("duckraft_scheduled_backups_total",
		"Scheduled backups this node wrote (ok) or failed to write (error); a backup abandoned because the node stops counts as neither.",
		[]string{"outcome"}, nil)
	backupLastSuccessDesc = prometheus.NewDesc("duckraft_backup_last_success_timestamp_seconds",
		"Unix time the last scheduled backup written finished; 0 before the first.", nil, nil)
	backupLastDurationDesc = prometheus.NewDesc("duckraft_backup_last_duration_seconds",
		"How long the last scheduled backup written took.", nil, nil)
	backupLastSizeDesc = prometheus.NewDesc("duckraft_backup_last_size_bytes",
		"Size of the last scheduled backup written.", nil, nil)
	backupLastIndexDesc = prometheus.NewDesc("duckraft_backup_last_index",
		"Applied index the last scheduled backup written holds.", nil, nil)
)

func (backupCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{backupsDesc, backupLastSuccessDesc, backupLastDurationDesc, backupLastSizeDesc, backupLastIndexDesc} {
		ch <- d
	}
}

func (b backupCollector) Collect(ch chan<- prometheus.Metric) {
	st := b.d.BackupStats()
	ch <- prometheus.MustNewConstMetric(backupsDesc, prometheus.CounterValue, float64(st.Taken), "ok")
	ch <- prometheus.MustNewConstMetric(backupsDesc, prometheus.CounterValue, float64(st.Failed), "error")
	var last float64
	if !st.LastSuccess.IsZero() {
		last = float64(st.LastSuccess.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(backupLastSuccessDesc, prometheus.GaugeValue, last)
	ch <- prometheus.MustNewConstMetric(backupLastDurationDesc, prometheus.GaugeValue, st.LastDuration.Seconds())
	ch <- prometheus.MustNewConstMetric(backupLastSizeDesc, prometheus.GaugeValue, float64(st.LastBytes))
	ch <- prometheus.MustNewConstMetric(backupLastIndexDesc, prometheus.GaugeValue, float64(st.LastIndex))
}

// admissionCollector reports the admission gate of client statements
// (node.Server.AdmissionStats) at scrape time.
type admissionCollector struct{ srv *node.Server }

var (
	statementsRunningDesc = prometheus.NewDesc("duckraft_statements_running",
		"Client statements holding a turn to run in this node's DuckDB (members' routed reads included); at most duckraft_statements_running_limit.", nil, nil)
	statementsLimitDesc = prometheus.NewDesc("duckraft_statements_running_limit",
		"Most client statements that run in this node's DuckDB at once (--max-running-statements).", nil, nil)
	statementsQueuedDesc = prometheus.NewDesc("duckraft_statements_queued",
		"Client statements waiting for a turn to run in this node's DuckDB.", nil, nil)
	statementsClientLimitDesc = prometheus.NewDesc("duckraft_statements_running_per_client_limit",
		"Most statements of one client that run in this node's DuckDB at once (--max-running-statements-per-client).", nil, nil)
	statementsClientsDesc = prometheus.NewDesc("duckraft_statements_clients",
		"Clients (a token from one address; a routed read counts for its client) holding or waiting for a turn to run in this node's DuckDB.", nil, nil)
	statementAdmissionsDesc = prometheus.NewDesc("duckraft_statement_admissions_total",
		"Turns to run in this node's DuckDB, by outcome: admitted (a turn given: a statement, or a streamed result's batches after it waited for its reader), refused (no turn within --admission-wait: answered busy), abandoned (cancelled, timed out or gone while waiting).",
		[]string{"outcome"}, nil)
)

func (admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{statementsRunningDesc, statementsLimitDesc, statementsQueuedDesc, statementsClientLimitDesc, statementsClientsDesc, statementAdmissionsDesc} {
		ch <- d
	}
}

func (a admissionCollector) Collect(ch chan<- prometheus.Metric) {
	st := a.srv.AdmissionStats()
	ch <- prometheus.MustNewConstMetric(statementsRunningDesc, prometheus.GaugeValue, float64(st.Running))
	ch <- prometheus.MustNewConstMetric(statementsLimitDesc, prometheus.GaugeValue, float64(st.Limit))
	ch <- prometheus.MustNewConstMetric(statementsQueuedDesc, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(statementsClientLimitDesc, prometheus.GaugeValue, float64(st.PerClient))
	ch <- prometheus.MustNewConstMetric(statementsClientsDesc, prometheus.GaugeValue, float64(st.Clients))
	ch <- prometheus.MustNewConstMetric(statementAdmissionsDesc, prometheus.CounterValue, float64(st.Admitted), "admitted")
	ch <- prometheus.MustNewConstMetric(statementAdmissionsDesc, prometheus.CounterValue, float64(st.Refused), "refused")
	ch <- prometheus.MustNewConstMetric(statementAdmissionsDesc, prometheus.CounterValue, float64(st.Abandoned), "abandoned")
}

// gossipCollector reports gossip's members by state at scrape time.
type gossipCollector struct{ m *membership }

var gossipMembersDesc = prometheus.NewDesc("duckraft_gossip_members", "Members gossip knows of, by state (alive, dead, left).",
	[]string{"state"}, nil)

func (g gossipCollector) Describe(ch chan<- *prometheus.Desc) { ch <- gossipMembersDesc }

func (g gossipCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]int{}
	for _, s := range []cluster.State{cluster.StateAlive, cluster.StateDead, cluster.StateLeft} {
		counts[s.String()] = 0
	}
	for _, mem := range g.m.gossip.Members() {
		counts[mem.State.String()]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(gossipMembersDesc, prometheus.GaugeValue, float64(n), state)
	}
}

// The raft and memberlist libraries emit their metrics through go-metrics'
// process-wide global (go-metrics/compat, whichever implementation the
// build selects), which has no notion of a daemon. So one libSink is
// installed as that global, once per process, and every daemon's registry
// collects it: in duckraftd, one daemon per process, it is that node's; in
// a test process running several daemons it is their sum, and only the
// duckraft_* metrics, which carry the node label, tell daemons apart.
var (
	sinkOnce sync.Once
	sink     *libSink
	sinkErr  error
)

// processSink returns the process's go-metrics sink, installing it as the
// go-metrics global on first use.
func processSink() (*libSink, error) {
	sinkOnce.Do(func() {
		sink = newLibSink()
		cfg := gometrics.DefaultConfig("")
		cfg.EnableHostname = false
		cfg.EnableHostnameLabel = false
		cfg.EnableRuntimeMetrics = false
		_, sinkErr = gometrics.NewGlobal(cfg, sink)
	})
	if sinkErr != nil {
		return nil, fmt.Errorf("go-metrics sink: %w", sinkErr)
	}
	return sink, nil
}
