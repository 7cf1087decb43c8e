// Package hostlog throttles log lines about remote hosts: a host that keeps
// getting refused (a connection past a cap, a peer without the cluster's
// certificate) is logged at most once per interval, with the count of the
// lines not logged, so that it cannot flood the log. Standard library only.
package hostlog

import (
	"sync"
	"time"
)

// MaxHosts bounds the hosts a Throttle tells apart; past it, the entries
// older than the interval are forgotten, and if none is, the hosts not
// remembered share one entry (OtherHosts).
const MaxHosts = 4096

// OtherHosts is the entry of the hosts a full Throttle does not tell apart.
const OtherHosts = "other hosts"

// Throttle decides which lines about which host to log. It is safe for
// concurrent use.
type Throttle struct {
	interval time.Duration

	mu   sync.Mutex
	seen map[string]*entry
}

type entry struct {
	logged     time.Time
	suppressed int
}

// New returns a Throttle that lets one line per host through per interval.
func New(interval time.Duration) *Throttle {
	return &Throttle{interval: interval, seen: make(map[string]*entry)}
}

// Allow reports whether a line about host may be logged now and, if so, how
// many lines about it were held back since the last one logged.
func (t *Throttle) Allow(host string) (suppressed int, ok bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.seen[host]; !known && len(t.seen) >= MaxHosts {
		for h, old := range t.seen {
			if now.Sub(old.logged) >= t.interval {
				delete(t.seen, h)
			}
		}
		if len(t.seen) >= MaxHosts {
			host = OtherHosts
		}
	}
	e := t.seen[host]
	if e != nil && now.Sub(e.logged) < t.interval {
		e.suppressed++
		return 0, false
	}
	if e != nil {
		suppressed = e.suppressed
	}
	t.seen[host] = &entry{logged: now}
	return suppressed, true
}
