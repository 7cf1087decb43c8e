package daemon

import (
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// TestLibSinkTranslates feeds the sink what raft and memberlist report
// (keys, units and labels as their sources emit them) and checks what a
// scrape shows.
func TestLibSinkTranslates(t *testing.T) {
	peer := []gometrics.Label{{Name: "peer_id", Value: "n3"}}
	for _, tc := range []struct {
		name   string
		emit   func(s *libSink)
		metric string
		labels map[string]string
		// want is the counter's or gauge's value, or the histogram's sum.
		want  float64
		count uint64
	}{
		{"timing in milliseconds becomes seconds",
			func(s *libSink) { s.AddSample([]string{"raft", "commitTime"}, 250) },
			"raft_commit_duration_seconds", nil, 0.25, 1},
		{"peer id is a label",
			func(s *libSink) {
				s.AddSampleWithLabels([]string{"raft", "replication", "heartbeat"}, 2, peer)
			},
			"raft_replication_heartbeat_duration_seconds", map[string]string{"peer": "n3"}, 0.002, 1},
		{"the twin key with the peer's id in its name is dropped",
			func(s *libSink) {
				s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 4, peer)
				s.AddSample([]string{"raft", "replication", "appendEntries", "rpc", "n3"}, 4)
			},
			"raft_replication_append_entries_duration_seconds", map[string]string{"peer": "n3"}, 0.004, 1},
		{"keys of one family are a label",
			func(s *libSink) {
				s.IncrCounter([]string{"raft", "state", "leader"}, 1)
				s.IncrCounter([]string{"raft", "state", "leader"}, 1)
				s.IncrCounter([]string{"raft", "state", "follower"}, 1)
			},
			"raft_state_changes_total", map[string]string{"state": "leader"}, 2, 0},
		{"gauge in milliseconds",
			func(s *libSink) { s.SetGauge([]string{"raft", "leader", "oldestLogAge"}, 1500) },
			"raft_leader_oldest_entry_age_seconds", nil, 1.5, 0},
		{"nanoseconds",
			func(s *libSink) { s.AddSample([]string{"raft", "boltdb", "txstats", "writeTime"}, 3e6) },
			"raft_boltdb_write_duration_seconds", nil, 0.003, 1},
		{"a count sample stays a count",
			func(s *libSink) { s.AddSample([]string{"raft", "fsm", "applyBatchNum"}, 7) },
			"raft_fsm_apply_batch_entries", nil, 7, 1},
		{"a library label renamed",
			func(s *libSink) {
				s.SetGaugeWithLabels([]string{"memberlist", "node", "instances"}, 3, []gometrics.Label{{Name: "node_state", Value: "alive"}})
			},
			"memberlist_members", map[string]string{"state": "alive"}, 3, 0},
		{"bytes counter by transport",
			func(s *libSink) { s.IncrCounter([]string{"memberlist", "udp", "sent"}, 120) },
			"memberlist_sent_bytes_total", map[string]string{"transport": "udp"}, 120, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLibSink()
			tc.emit(s)
			m := find(t, s, tc.metric, tc.labels)
			switch {
			case m.Histogram != nil:
				if got := m.Histogram.GetSampleSum(); math.Abs(got-tc.want) > 1e-9 {
					t.Errorf("sum = %v, want %v", got, tc.want)
				}
				if got := m.Histogram.GetSampleCount(); got != tc.count {
					t.Errorf("count = %d, want %d", got, tc.count)
				}
			case m.Counter != nil:
				if got := m.Counter.GetValue(); got != tc.want {
					t.Errorf("value = %v, want %v", got, tc.want)
				}
			case m.Gauge != nil:
				if got := m.Gauge.GetValue(); math.Abs(got-tc.want) > 1e-9 {
					t.Errorf("value = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

// TestLibSinkDropsUndescribedKeys: a key no entry of libSeries describes
// exports nothing, so a library upgrade cannot add camelCase names.
func TestLibSinkDropsUndescribedKeys(t *testing.T) {
	s := newLibSink()
	s.AddSample([]string{"raft", "replication", "heartbeat", "n3"}, 1)
	s.IncrCounter([]string{"raft", "boltdb", "txstats", "cursorCount"}, 5)
	s.SetGauge([]string{"memberlist", "someNewThing"}, 1)
	if n := testutil.CollectAndCount(s); n != 0 {
		t.Errorf("%d series exported for undescribed keys", n)
	}
}

// TestLibSeriesNamed checks every exported family against Prometheus'
// naming conventions and that no two entries claim one key.
func TestLibSeriesNamed(t *testing.T) {
	name := regexp.MustCompile(`^(raft|memberlist)_[a-z][a-z0-9_]*[a-z]$`)
	seen := map[string]string{}
	for _, spec := range libSeries {
		if !name.MatchString(spec.name) {
			t.Errorf("%s: not snake_case under raft_ or memberlist_", spec.name)
		}
		if spec.kind == libHistogram && !strings.HasSuffix(spec.name, "_seconds") && !strings.HasSuffix(spec.name, "_bytes") && !strings.HasSuffix(spec.name, "_entries") {
			t.Errorf("%s: a histogram without its unit", spec.name)
		}
		if spec.kind == libCounter && !strings.HasSuffix(spec.name, "_total") {
			t.Errorf("%s: a counter not ending in _total", spec.name)
		}
		if spec.help == "" {
			t.Errorf("%s: no help", spec.name)
		}
		for _, k := range spec.keys {
			if other, ok := seen[k.key]; ok {
				t.Errorf("%s: key %s already feeds %s", spec.name, k.key, other)
			}
			seen[k.key] = spec.name
			if len(k.fixed) != len(spec.fixedNames) {
				t.Errorf("%s: key %s fixes %d labels of %d", spec.name, k.key, len(k.fixed), len(spec.fixedNames))
			}
			if k.scale == 0 {
				t.Errorf("%s: key %s has no scale", spec.name, k.key)
			}
		}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(newLibSink()); err != nil {
		t.Fatalf("register: %v", err)
	}
}

// find returns the series of name whose labels include want.
func find(t *testing.T, c prometheus.Collector, name string, want map[string]string) *dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			return m
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return nil
}

// TestLibSeriesDocumented: docs/operations.md's table names every
// exported family, so the docs cannot fall behind the sink.
func TestLibSeriesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range libSeries {
		if !strings.Contains(string(doc), "| `"+spec.name+"` |") {
			t.Errorf("docs/operations.md has no row for %s", spec.name)
		}
	}
}
