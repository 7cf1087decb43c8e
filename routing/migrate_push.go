package routing

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/duckraft/duckraft/routing/nodeapi"
)

// pusher sends session states to one data node, one push at a time, in
// the order they changed: a later state of a session replaces an earlier
// one still queued, so the queue holds at most one state per session held
// here. A push that fails is not retried; the next full sync repairs the
// node's copies (at once when the node comes back, since gossip's view of
// it changes).
type pusher struct {
	m    *migrator
	peer string

	mu      sync.Mutex
	pending map[string]*queued
	full    bool
	last    time.Time

	wake chan struct{}
	stop chan struct{}
}

type queued struct {
	state nodeapi.SessionState
	done  []chan error
}

func (p *pusher) lock()   { p.mu.Lock() }
func (p *pusher) unlock() { p.mu.Unlock() }

// poke wakes the pusher's goroutine.
func (p *pusher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// enqueue queues s; done, if not nil, hears how its push ended.
func (p *pusher) enqueue(s nodeapi.SessionState, done chan error) {
	p.lock()
	q := p.pending[s.ID]
	if q == nil {
		q = &queued{}
		p.pending[s.ID] = q
	}
	q.state = s
	if done != nil {
		q.done = append(q.done, done)
	}
	p.unlock()
	p.poke()
}

// take removes up to pushBatch queued states, and reports whether a full
// sync is due.
func (p *pusher) take() (batch []nodeapi.SessionState, dones []chan error, full bool) {
	p.lock()
	defer p.unlock()
	if p.full || time.Since(p.last) >= fullSyncEvery {
		full, p.full = true, false
		p.last = time.Now()
	}
	for id, q := range p.pending {
		if len(batch) == pushBatch {
			break
		}
		batch = append(batch, q.state)
		dones = append(dones, q.done...)
		delete(p.pending, id)
	}
	return batch, dones, full
}

// pushRetry is how long a pusher waits to send a full sync after a push
// failed.
const pushRetry = time.Second

// syncSoon has the pusher send a full sync after d (at once for 0).
func (p *pusher) syncSoon(d time.Duration) {
	p.lock()
	p.full = true
	p.unlock()
	if d == 0 {
		p.poke()
		return
	}
	time.AfterFunc(d, p.poke)
}

// errPusherStopped ends the waits of states queued for a node that left.
var errPusherStopped = errors.New("the node left")

func (p *pusher) run() {
	t := time.NewTicker(fullSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			p.lock()
			for _, q := range p.pending {
				for _, d := range q.done {
					d <- errPusherStopped
				}
			}
			p.pending = nil
			p.unlock()
			return
		case <-t.C:
		case <-p.wake:
		}
		for {
			batch, dones, full := p.take()
			if full {
				// The queued states are among the held ones, as new
				// or newer, but for those of sessions that ended. The
				// copies of sessions whose holder is gone go too, so
				// that they outlive the nodes that kept them.
				ended := batch[:0]
				for _, s := range batch {
					if s.Ended {
						ended = append(ended, s)
					}
				}
				batch = append(p.m.syncStates(), ended...)
			}
			if len(batch) == 0 && !full {
				break
			}
			// A full sync is sent even with nothing in it: it tells the
			// node this one's run (SessionPush.FromBoot).
			var err error
			for first := true; (first || len(batch) > 0) && err == nil; first = false {
				n, size := 0, 0
				for n < len(batch) && n < pushBatch && (n == 0 || size+batch[n].Size() <= pushBytes) {
					size += batch[n].Size()
					n++
				}
				err = p.send(batch[:n])
				batch = batch[n:]
			}
			if err != nil {
				p.m.log.Debug("session push failed", "node", p.peer, "err", err)
				p.syncSoon(pushRetry)
			}
			for _, d := range dones {
				d <- err
			}
			if err != nil {
				break
			}
		}
	}
}

// send pushes batch to the node.
func (p *pusher) send(batch []nodeapi.SessionState) error {
	addr, ok := p.m.e.cfg.Directory.QuackAddr(p.peer)
	if !ok {
		return errPusherStopped
	}
	ctx, cancel := context.WithTimeout(context.Background(), pushTimeout)
	defer cancel()
	return p.m.api.PushSessions(ctx, addr, nodeapi.SessionPush{From: p.m.ids.Node(), FromBoot: p.m.ids.Boot(), Sessions: batch})
}
