package daemon

import (
	"context"
	"sync"
	"time"
)

// leaderSchedule runs a task at each tick on the node that leads then.
// Every node runs the schedule, so exactly one node acts per tick whichever
// leads, and a new leader takes the task over without a hand-off.
type leaderSchedule struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start ticks every interval, calling task while leads reports true. The
// task's context ends with stop.
func (s *leaderSchedule) start(every time.Duration, leads func() bool, task func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			if leads() {
				task(ctx)
			}
		}
	}()
}

// stop ends the schedule and waits for a task running; it may be called
// on a schedule never started.
func (s *leaderSchedule) stop() {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
}
