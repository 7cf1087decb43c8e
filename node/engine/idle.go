package engine

import (
	"errors"
	"sync"
)

// idlePool keeps up to max idle values that are costly to make (a
// connection; a connection with its prepared statement) for the next task
// that needs one. It is what Pool and Parser have in common, and is safe
// for concurrent use. It bounds the idle values, not those in use: get
// makes a new one when none is idle, and put closes one it cannot keep.
type idlePool[T any] struct {
	max   int
	open  func() (T, error)
	close func(T)

	mu     sync.Mutex
	idle   []T
	closed bool
}

// errPoolClosed fails a get after shut.
var errPoolClosed = errors.New("closed")

// get returns an idle value, the one put back last, or a new one when none
// is idle. The caller gives it back with put, or closes it.
func (p *idlePool[T]) get() (T, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		var zero T
		return zero, errPoolClosed
	}
	if n := len(p.idle); n > 0 {
		v := p.idle[n-1]
		clear(p.idle[n-1:])
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return v, nil
	}
	p.mu.Unlock()
	return p.open()
}

// put keeps v for the next get, or closes it when the pool is shut or
// holds max idle values already.
func (p *idlePool[T]) put(v T) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.max {
		p.idle = append(p.idle, v)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.close(v)
}

// shut closes the idle values; later gets fail with errPoolClosed, and
// values put back later are closed.
func (p *idlePool[T]) shut() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, v := range idle {
		p.close(v)
	}
}
