package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// pooled is a value of a test idlePool that says how it was used.
type pooled struct {
	inUse, closed atomic.Bool
}

// countingPool is an idlePool of pooled values that counts what it opens
// and closes and fails on a value handed out twice or closed twice.
type countingPool struct {
	idlePool[*pooled]
	opened, closed atomic.Int64
}

func newCountingPool(t *testing.T, max int) *countingPool {
	t.Helper()
	p := &countingPool{}
	p.idlePool = idlePool[*pooled]{max: max,
		open: func() (*pooled, error) {
			p.opened.Add(1)
			return &pooled{}, nil
		},
		close: func(v *pooled) {
			if !v.closed.CompareAndSwap(false, true) {
				t.Error("a value was closed twice")
			}
			p.closed.Add(1)
		},
	}
	return p
}

// take gets a value and marks it in use; nil, with the test failed, for
// an error or a value closed or in use. It may run on any goroutine.
func (p *countingPool) take(t *testing.T) *pooled {
	t.Helper()
	v, err := p.get()
	switch {
	case err != nil:
		t.Errorf("get: %v", err)
		return nil
	case v.closed.Load() || !v.inUse.CompareAndSwap(false, true):
		t.Error("get handed out a closed value or one in use")
		return nil
	}
	return v
}

func (p *countingPool) give(v *pooled) {
	v.inUse.Store(false)
	p.put(v)
}

// TestIdlePoolUnderLoad: tasks getting and putting values at once never
// share one, and the pool keeps at most max idle, closing the rest, and
// every value once it is shut.
func TestIdlePoolUnderLoad(t *testing.T) {
	for _, max := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("max %d", max), func(t *testing.T) {
			p := newCountingPool(t, max)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 200 {
						v := p.take(t)
						if v == nil {
							return
						}
						p.give(v)
					}
				})
			}
			wg.Wait()
			idle := len(p.idle)
			if idle > max || p.opened.Load()-p.closed.Load() != int64(idle) {
				t.Fatalf("%d idle of at most %d; opened %d, closed %d", idle, max, p.opened.Load(), p.closed.Load())
			}
			busy := p.take(t)
			if busy == nil {
				t.FailNow()
			}
			p.shut()
			if p.opened.Load()-p.closed.Load() != 1 {
				t.Errorf("after shut: opened %d, closed %d, with one in use", p.opened.Load(), p.closed.Load())
			}
			p.give(busy)
			if !busy.closed.Load() {
				t.Error("a value put back after shut was kept")
			}
			if _, err := p.get(); !errors.Is(err, errPoolClosed) {
				t.Errorf("get after shut: %v, want errPoolClosed", err)
			}
		})
	}
}

// TestIdlePoolReusesTheLastPutBack: get hands out the value put back last,
// so the fewest values stay warm.
func TestIdlePoolReusesTheLastPutBack(t *testing.T) {
	p := newCountingPool(t, 2)
	a, b := p.take(t), p.take(t)
	if a == nil || b == nil {
		t.FailNow()
	}
	p.give(a)
	p.give(b)
	if got := p.take(t); got != b {
		t.Error("get did not hand out the value put back last")
	}
	if p.opened.Load() != 2 {
		t.Errorf("opened %d values, want 2", p.opened.Load())
	}
}

// TestIdlePoolOpenFails: get returns open's error, and nothing is kept.
func TestIdlePoolOpenFails(t *testing.T) {
	boom := errors.New("cannot connect")
	p := idlePool[*pooled]{max: 2, open: func() (*pooled, error) { return nil, boom }, close: func(*pooled) {}}
	if _, err := p.get(); !errors.Is(err, boom) {
		t.Fatalf("get: %v, want %v", err, boom)
	}
	if len(p.idle) != 0 {
		t.Errorf("%d idle after a failed open", len(p.idle))
	}
}
