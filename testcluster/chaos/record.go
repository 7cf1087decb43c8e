package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// recorder collects what every client saw: operations by outcome, errors
// by kind, the call and return times of acknowledged writes (to measure
// failovers) and violations the workloads notice as they run.
type recorder struct {
	start time.Time

	mu         sync.Mutex
	ops        map[string]int    // "workload op outcome" → count
	errs       map[string]int    // error kind → count
	examples   map[string]string // error kind → first message seen
	acks       []span            // acknowledged writes
	violations map[string][]string
}

// span is an operation's call and return time in nanoseconds since start.
type span struct{ call, ret int64 }

func newRecorder() *recorder {
	return &recorder{start: time.Now(), ops: map[string]int{}, errs: map[string]int{},
		examples: map[string]string{}, violations: map[string][]string{}}
}

// now is the time since the run started, on the monotonic clock.
func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// op counts one operation of a workload with its outcome: ok, unknown
// (a write whose fate the client cannot know) or failed (a read that
// returned an error).
func (r *recorder) op(workload, op, outcome string) {
	r.mu.Lock()
	r.ops[workload+" "+op+" "+outcome]++
	r.mu.Unlock()
}

// ack records an acknowledged write for failover measurement.
func (r *recorder) ack(call, ret int64) {
	r.mu.Lock()
	r.acks = append(r.acks, span{call, ret})
	r.mu.Unlock()
}

// error counts err under its kind and keeps the first message of each.
func (r *recorder) error(err error) string {
	kind := errorKind(err)
	r.mu.Lock()
	r.errs[kind]++
	if _, ok := r.examples[kind]; !ok {
		r.examples[kind] = truncate(err.Error(), 160)
	}
	r.mu.Unlock()
	return kind
}

// violate records that checker saw something it must never see.
func (r *recorder) violate(checker, format string, args ...any) {
	r.mu.Lock()
	r.violations[checker] = append(r.violations[checker],
		fmt.Sprintf("t=%.3fs ", time.Since(r.start).Seconds())+fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// firstAckAfter returns when the first write called at or after at was
// acknowledged, and false if none was.
func (r *recorder) firstAckAfter(at int64) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, ok := int64(0), false
	for _, a := range r.acks {
		if a.call >= at && (!ok || a.ret < best) {
			best, ok = a.ret, true
		}
	}
	return best, ok
}

// errorKind sorts a client error into a few kinds for the report.
func errorKind(err error) string {
	var se *client.ServerError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "client timeout"
	case errors.Is(err, context.Canceled):
		return "canceled at stop"
	case !errors.As(err, &se):
		return "transport"
	}
	if code := nodeapi.CodeOf(err); code != "" {
		return strings.ReplaceAll(string(code), "_", " ")
	}
	// Errors without a code are the client's view of what the node it
	// talked to gave up on.
	for _, k := range []struct{ kind, text string }{
		{"unknown outcome", "outcome unknown"},
		{"not leader", "not the leader"},
		{"no leader", "no leader known"},
		{"forward failed", "forwarding the write to the leader"},
		{"forward failed", "leader changed while a write was forwarded"},
		{"server timeout", "deadline exceeded"},
		{"store closed", "store closed"},
	} {
		if strings.Contains(se.Message, k.text) {
			return k.kind
		}
	}
	return "other server error"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
