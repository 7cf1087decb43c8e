package daemon

import (
	"strings"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// libSink is the go-metrics sink through which hashicorp/raft,
// raft-boltdb and memberlist report. It exports the series listed in
// libSeries under names that follow Prometheus' conventions: snake_case,
// a unit suffix (_seconds, _bytes, _total), timings as histograms in
// seconds (the libraries report milliseconds or nanoseconds), and peer
// ids as a label rather than inside the name (raft reports each
// replication timing twice, once labelled and once with the peer's id
// appended to the key; only the labelled one is kept). Every other key
// the libraries emit is dropped: go-metrics gives a key no type, unit or
// description, so a series is exported only once it has been read in the
// library's source and described here (docs/operations.md lists them).
//
// It is safe for concurrent use: the libraries report from many
// goroutines, and the Prometheus vectors it writes to are.
type libSink struct {
	byKey    map[string]libTarget
	families []prometheus.Collector
}

// libTarget is where one go-metrics key goes: a family, the values of the
// family's fixed labels that the key stands for, and the factor that turns
// the library's unit into the family's.
type libTarget struct {
	family *libFamily
	fixed  []string
	scale  float64
}

// libFamily is one exported metric family.
type libFamily struct {
	counter   *prometheus.CounterVec
	gauge     *prometheus.GaugeVec
	histogram *prometheus.HistogramVec
	// fixedNames are the labels a key fixes (libTarget.fixed);
	// labelNames are the labels copied from the library's own labels,
	// under Prometheus' names (libLabelNames).
	fixedNames, labelNames []string
}

type libKind int

const (
	libCounter libKind = iota
	libGauge
	libHistogram
)

// Units of the values the libraries report, as factors to the exported unit.
const (
	fromMillis = 1e-3
	fromNanos  = 1e-9
	asIs       = 1
)

// Histogram buckets: durations from 0.1 ms to about 15 s; counts of log
// entries from 1 to 4096; sizes from 64 B to 256 MiB.
var (
	secondsBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 14)
	entriesBuckets = prometheus.ExponentialBuckets(1, 2, 13)
	bytesBuckets   = prometheus.ExponentialBuckets(64, 4, 12)
)

// libLabelNames renames the libraries' label names.
var libLabelNames = map[string]string{"peer_id": "peer", "rpcType": "rpc_type", "node_state": "state"}

// libKey is one go-metrics key (its parts joined with dots) and, when
// several keys make one family, the values of the family's fixed labels
// it stands for.
type libKey struct {
	key   string
	fixed []string
	scale float64
}

// libSpec describes one exported family and the keys that feed it.
type libSpec struct {
	name, help string
	kind       libKind
	buckets    []float64
	fixedNames []string
	labelNames []string
	keys       []libKey
}

func keys(scale float64, ks ...string) []libKey {
	out := make([]libKey, len(ks))
	for i, k := range ks {
		out[i] = libKey{key: k, scale: scale}
	}
	return out
}

// libSeries are the exported families. The help text says what the
// library measures, from its source (raft v1.7.3, raft-boltdb/v2 v2.3.1,
// memberlist v0.5.4).
var libSeries = []libSpec{
	// raft: the leader.
	{name: "raft_commit_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "On the leader, from a batch of log entries handed to the log to their commit by a quorum (raft.commitTime).",
		keys: keys(fromMillis, "raft.commitTime")},
	{name: "raft_apply_total", kind: libCounter,
		help: "Log entries this node was asked to append as leader (raft.apply): duckraft's writes, one entry per group-committed batch.",
		keys: keys(asIs, "raft.apply")},
	{name: "raft_leader_dispatch_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "On the leader, writing a batch of new entries to its own log store (raft.leader.dispatchLog).",
		keys: keys(fromMillis, "raft.leader.dispatchLog")},
	{name: "raft_leader_dispatch_entries", kind: libGauge,
		help: "Entries in the leader's last batch written to its log store (raft.leader.dispatchNumLogs).",
		keys: keys(asIs, "raft.leader.dispatchNumLogs")},
	{name: "raft_commit_entries", kind: libGauge,
		help: "Entries in the last batch the leader committed (raft.commitNumLogs).",
		keys: keys(asIs, "raft.commitNumLogs")},
	{name: "raft_leader_last_contact_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "On the leader, at each lease check, time since it last heard from each follower (raft.leader.lastContact).",
		keys: keys(fromMillis, "raft.leader.lastContact")},
	{name: "raft_leader_oldest_entry_age_seconds", kind: libGauge,
		help: "On the leader, age of the oldest entry in its log store: how far back the log reaches after compaction (raft.leader.oldestLogAge).",
		keys: keys(fromMillis, "raft.leader.oldestLogAge")},
	{name: "raft_peers", kind: libGauge,
		help: "Servers in the latest Raft configuration, as the leader last counted them (raft.peers).",
		keys: keys(asIs, "raft.peers")},
	{name: "raft_barriers_total", kind: libCounter,
		help: "Barriers the leader was asked for (raft.barrier).",
		keys: keys(asIs, "raft.barrier")},
	{name: "raft_verify_leader_total", kind: libCounter,
		help: "Leadership checks with a quorum (raft.verify_leader): strong reads' ReadIndex.",
		keys: keys(asIs, "raft.verify_leader")},

	// raft: replication from the leader to each follower.
	{name: "raft_replication_append_entries_duration_seconds", kind: libHistogram, buckets: secondsBuckets, labelNames: []string{"peer"},
		help: "On the leader, one AppendEntries RPC to a follower, sent to answered (raft.replication.appendEntries.rpc).",
		keys: keys(fromMillis, "raft.replication.appendEntries.rpc")},
	{name: "raft_replication_appended_entries_total", kind: libCounter, labelNames: []string{"peer"},
		help: "On the leader, log entries sent to a follower in AppendEntries RPCs (raft.replication.appendEntries.logs).",
		keys: keys(asIs, "raft.replication.appendEntries.logs")},
	{name: "raft_replication_heartbeat_duration_seconds", kind: libHistogram, buckets: secondsBuckets, labelNames: []string{"peer"},
		help: "On the leader, one heartbeat to a follower, sent to answered (raft.replication.heartbeat).",
		keys: keys(fromMillis, "raft.replication.heartbeat")},
	{name: "raft_replication_install_snapshot_duration_seconds", kind: libHistogram, buckets: secondsBuckets, labelNames: []string{"peer"},
		help: "On the leader, sending a snapshot to a follower that fell behind the log (raft.replication.installSnapshot).",
		keys: keys(fromMillis, "raft.replication.installSnapshot")},

	// raft: RPCs a follower handles.
	{name: "raft_rpc_duration_seconds", kind: libHistogram, buckets: secondsBuckets, fixedNames: []string{"rpc"},
		help: "Handling an RPC from the leader or a candidate, by RPC (raft.rpc.*).",
		keys: []libKey{
			{key: "raft.rpc.appendEntries", fixed: []string{"append_entries"}, scale: fromMillis},
			{key: "raft.rpc.processHeartbeat", fixed: []string{"heartbeat"}, scale: fromMillis},
			{key: "raft.rpc.requestVote", fixed: []string{"request_vote"}, scale: fromMillis},
			{key: "raft.rpc.installSnapshot", fixed: []string{"install_snapshot"}, scale: fromMillis},
		}},
	{name: "raft_rpc_append_entries_store_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "On a follower, writing the entries of one AppendEntries RPC to its log store (raft.rpc.appendEntries.storeLogs).",
		keys: keys(fromMillis, "raft.rpc.appendEntries.storeLogs")},
	{name: "raft_rpc_append_entries_process_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "On a follower, handing newly committed entries to the state machine after an AppendEntries RPC (raft.rpc.appendEntries.processLogs).",
		keys: keys(fromMillis, "raft.rpc.appendEntries.processLogs")},
	{name: "raft_transport_rpc_duration_seconds", kind: libHistogram, buckets: secondsBuckets, fixedNames: []string{"phase"}, labelNames: []string{"rpc_type"},
		help: "The Raft transport's work on an incoming RPC, by phase: decode, enqueue (until raft takes it), respond (until raft answers) (raft.net.rpcDecode, rpcEnqueue, rpcRespond).",
		keys: []libKey{
			{key: "raft.net.rpcDecode", fixed: []string{"decode"}, scale: fromMillis},
			{key: "raft.net.rpcEnqueue", fixed: []string{"enqueue"}, scale: fromMillis},
			{key: "raft.net.rpcRespond", fixed: []string{"respond"}, scale: fromMillis},
		}},

	// raft: roles and elections.
	{name: "raft_state_changes_total", kind: libCounter, fixedNames: []string{"state"},
		help: "Times this node entered a role (raft.state.*).",
		keys: []libKey{
			{key: "raft.state.follower", fixed: []string{"follower"}, scale: asIs},
			{key: "raft.state.candidate", fixed: []string{"candidate"}, scale: asIs},
			{key: "raft.state.leader", fixed: []string{"leader"}, scale: asIs},
		}},
	{name: "raft_timeouts_total", kind: libCounter, fixedNames: []string{"kind"},
		help: "A follower that heard no heartbeat in time and stood for election (heartbeat), or a leader that lost contact with a quorum and stepped down (leader_lease) (raft.transition.*).",
		keys: []libKey{
			{key: "raft.transition.heartbeat_timeout", fixed: []string{"heartbeat"}, scale: asIs},
			{key: "raft.transition.leader_lease_timeout", fixed: []string{"leader_lease"}, scale: asIs},
		}},
	{name: "raft_election_duration_seconds", kind: libHistogram, buckets: secondsBuckets, fixedNames: []string{"phase"},
		help: "A candidate asking for votes (vote) or pre-votes (pre_vote), until it won or gave up (raft.candidate.electSelf, preElectSelf).",
		keys: []libKey{
			{key: "raft.candidate.electSelf", fixed: []string{"vote"}, scale: fromMillis},
			{key: "raft.candidate.preElectSelf", fixed: []string{"pre_vote"}, scale: fromMillis},
		}},

	// raft: the state machine (duckraft's applier) and snapshots.
	{name: "raft_fsm_apply_batch_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "The state machine applying one batch of committed entries to DuckDB (raft.fsm.applyBatch).",
		keys: keys(fromMillis, "raft.fsm.applyBatch")},
	{name: "raft_fsm_apply_batch_entries", kind: libHistogram, buckets: entriesBuckets,
		help: "Entries in each batch the state machine applied (raft.fsm.applyBatchNum).",
		keys: keys(asIs, "raft.fsm.applyBatchNum")},
	{name: "raft_fsm_enqueue_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "Committed entries waiting for the state machine to take them: how far the applier is behind raft (raft.fsm.enqueue).",
		keys: keys(fromMillis, "raft.fsm.enqueue")},
	{name: "raft_fsm_snapshot_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "The state machine starting a snapshot: pinning a read transaction (raft.fsm.snapshot); writing it out is raft_snapshot_persist_duration_seconds.",
		keys: keys(fromMillis, "raft.fsm.snapshot")},
	{name: "raft_fsm_restore_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "The state machine replacing its database with a snapshot (raft.fsm.restore).",
		keys: keys(fromMillis, "raft.fsm.restore")},
	{name: "raft_snapshot_duration_seconds", kind: libHistogram, buckets: secondsBuckets, fixedNames: []string{"phase"},
		help: "Taking a snapshot, by phase: take (the whole), create (the snapshot store's file), persist (streaming the database into it) (raft.snapshot.*).",
		keys: []libKey{
			{key: "raft.snapshot.takeSnapshot", fixed: []string{"take"}, scale: fromMillis},
			{key: "raft.snapshot.create", fixed: []string{"create"}, scale: fromMillis},
			{key: "raft.snapshot.persist", fixed: []string{"persist"}, scale: fromMillis},
		}},
	{name: "raft_compact_log_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "Deleting log entries a snapshot covers (raft.compactLogs).",
		keys: keys(fromMillis, "raft.compactLogs")},
	{name: "raft_restores_total", kind: libCounter,
		help: "Snapshots this node installed from the leader or at start (raft.restore).",
		keys: keys(asIs, "raft.restore")},

	// raft-boltdb: the log store (with --raft-log-store boltdb).
	{name: "raft_boltdb_store_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "raft-boltdb writing and fsyncing a batch of log entries (raft.boltdb.storeLogs).",
		keys: keys(fromMillis, "raft.boltdb.storeLogs")},
	{name: "raft_boltdb_get_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "raft-boltdb reading one log entry: entries the log cache no longer holds (raft.boltdb.getLog).",
		keys: keys(fromMillis, "raft.boltdb.getLog")},
	{name: "raft_boltdb_entry_size_bytes", kind: libHistogram, buckets: bytesBuckets,
		help: "Size of each log entry raft-boltdb stored (raft.boltdb.logSize).",
		keys: keys(asIs, "raft.boltdb.logSize")},
	{name: "raft_boltdb_batch_size_bytes", kind: libHistogram, buckets: bytesBuckets,
		help: "Size of each batch of log entries raft-boltdb stored (raft.boltdb.logBatchSize).",
		keys: keys(asIs, "raft.boltdb.logBatchSize")},
	{name: "raft_boltdb_free_pages", kind: libGauge, fixedNames: []string{"kind"},
		help: "bbolt pages free (free) and waiting for readers to end before they are (pending) (raft.boltdb.numFreePages, numPendingPages).",
		keys: []libKey{
			{key: "raft.boltdb.numFreePages", fixed: []string{"free"}, scale: asIs},
			{key: "raft.boltdb.numPendingPages", fixed: []string{"pending"}, scale: asIs},
		}},
	{name: "raft_boltdb_freelist_bytes", kind: libGauge,
		help: "Bytes bbolt's freelist takes (raft.boltdb.freelistBytes).",
		keys: keys(asIs, "raft.boltdb.freelistBytes")},
	{name: "raft_boltdb_open_read_transactions", kind: libGauge,
		help: "Read transactions open on the log store (raft.boltdb.openReadTxn).",
		keys: keys(asIs, "raft.boltdb.openReadTxn")},
	{name: "raft_boltdb_write_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "bbolt's time writing pages to disk, per statistics interval (raft.boltdb.txstats.writeTime).",
		keys: keys(fromNanos, "raft.boltdb.txstats.writeTime")},

	// memberlist: gossip.
	{name: "memberlist_gossip_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "One gossip round to a few random members (memberlist.gossip).",
		keys: keys(fromMillis, "memberlist.gossip")},
	{name: "memberlist_probe_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "Probing one member for failure detection, direct and indirect (memberlist.probeNode).",
		keys: keys(fromMillis, "memberlist.probeNode")},
	{name: "memberlist_push_pull_duration_seconds", kind: libHistogram, buckets: secondsBuckets,
		help: "A full state exchange with one member (memberlist.pushPullNode).",
		keys: keys(fromMillis, "memberlist.pushPullNode")},
	{name: "memberlist_messages_total", kind: libCounter, fixedNames: []string{"type"},
		help: "Membership messages handled, by type: alive, suspect, dead (memberlist.msg.*).",
		keys: []libKey{
			{key: "memberlist.msg.alive", fixed: []string{"alive"}, scale: asIs},
			{key: "memberlist.msg.suspect", fixed: []string{"suspect"}, scale: asIs},
			{key: "memberlist.msg.dead", fixed: []string{"dead"}, scale: asIs},
		}},
	{name: "memberlist_degraded_total", kind: libCounter, fixedNames: []string{"reason"},
		help: "Failure detection under strain: a probe round slowed because this node's health score is above 0 (probe), or a suspicion that expired with fewer independent confirmations than wanted (timeout) (memberlist.degraded.*).",
		keys: []libKey{
			{key: "memberlist.degraded.probe", fixed: []string{"probe"}, scale: asIs},
			{key: "memberlist.degraded.timeout", fixed: []string{"timeout"}, scale: asIs},
		}},
	{name: "memberlist_health_score", kind: libGauge,
		help: "memberlist's awareness of this node's own health: 0 is healthy, higher means it probes more slowly (memberlist.health.score).",
		keys: keys(asIs, "memberlist.health.score")},
	{name: "memberlist_members", kind: libGauge, labelNames: []string{"state"},
		help: "Members this node knows, by state, counted when it sends its state in a push-pull (memberlist.node.instances).",
		keys: keys(asIs, "memberlist.node.instances")},
	{name: "memberlist_sent_bytes_total", kind: libCounter, fixedNames: []string{"transport"},
		help: "Bytes of gossip sent, by transport (memberlist.udp.sent, tcp.sent).",
		keys: []libKey{
			{key: "memberlist.udp.sent", fixed: []string{"udp"}, scale: asIs},
			{key: "memberlist.tcp.sent", fixed: []string{"tcp"}, scale: asIs},
		}},
	{name: "memberlist_received_bytes_total", kind: libCounter,
		help: "Bytes of gossip received over UDP (memberlist.udp.received).",
		keys: keys(asIs, "memberlist.udp.received")},
	{name: "memberlist_tcp_connections_total", kind: libCounter, fixedNames: []string{"direction"},
		help: "TCP connections of gossip's push-pull, accepted (in) and opened (out) (memberlist.tcp.accept, tcp.connect).",
		keys: []libKey{
			{key: "memberlist.tcp.accept", fixed: []string{"in"}, scale: asIs},
			{key: "memberlist.tcp.connect", fixed: []string{"out"}, scale: asIs},
		}},
}

// newLibSink builds the sink's families from libSeries.
func newLibSink() *libSink {
	s := &libSink{byKey: map[string]libTarget{}}
	for _, spec := range libSeries {
		f := &libFamily{fixedNames: spec.fixedNames, labelNames: spec.labelNames}
		names := append(append([]string{}, spec.fixedNames...), spec.labelNames...)
		switch spec.kind {
		case libCounter:
			f.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: spec.name, Help: spec.help}, names)
			s.families = append(s.families, f.counter)
		case libGauge:
			f.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: spec.name, Help: spec.help}, names)
			s.families = append(s.families, f.gauge)
		case libHistogram:
			f.histogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: spec.name, Help: spec.help, Buckets: spec.buckets}, names)
			s.families = append(s.families, f.histogram)
		}
		for _, k := range spec.keys {
			s.byKey[k.key] = libTarget{family: f, fixed: k.fixed, scale: k.scale}
		}
	}
	return s
}

// labelValues are the values of f's labels: the key's fixed ones, then
// the library's labels by their Prometheus names ("" for one it left out).
func (f *libFamily) labelValues(fixed []string, labels []gometrics.Label) []string {
	vals := make([]string, 0, len(f.fixedNames)+len(f.labelNames))
	vals = append(vals, fixed...)
	for _, name := range f.labelNames {
		v := ""
		for _, l := range labels {
			if libLabelNames[l.Name] == name || l.Name == name {
				v = l.Value
			}
		}
		vals = append(vals, v)
	}
	return vals
}

func (s *libSink) target(key []string) (libTarget, bool) {
	t, ok := s.byKey[strings.Join(key, ".")]
	return t, ok
}

// SetGauge implements go-metrics' MetricSink.
func (s *libSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements go-metrics' MetricSink.
func (s *libSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if t, ok := s.target(key); ok && t.family.gauge != nil {
		t.family.gauge.WithLabelValues(t.family.labelValues(t.fixed, labels)...).Set(float64(val) * t.scale)
	}
}

// EmitKey implements go-metrics' MetricSink; neither library emits keys.
func (s *libSink) EmitKey([]string, float32) {}

// IncrCounter implements go-metrics' MetricSink.
func (s *libSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements go-metrics' MetricSink.
func (s *libSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if t, ok := s.target(key); ok && t.family.counter != nil && val >= 0 {
		t.family.counter.WithLabelValues(t.family.labelValues(t.fixed, labels)...).Add(float64(val) * t.scale)
	}
}

// AddSample implements go-metrics' MetricSink.
func (s *libSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements go-metrics' MetricSink.
func (s *libSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	if t, ok := s.target(key); ok && t.family.histogram != nil {
		t.family.histogram.WithLabelValues(t.family.labelValues(t.fixed, labels)...).Observe(float64(val) * t.scale)
	}
}

// Describe implements prometheus.Collector.
func (s *libSink) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range s.families {
		f.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *libSink) Collect(ch chan<- prometheus.Metric) {
	for _, f := range s.families {
		f.Collect(ch)
	}
}
