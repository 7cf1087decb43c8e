package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progressLine shows rows fetched so far on a terminal while a long result
// streams in. A nil *progressLine does nothing, so callers need not check.
type progressLine struct {
	w     io.Writer
	rows  atomic.Int64
	start time.Time
	done  chan struct{}
	wg    sync.WaitGroup
}

// progressDelay keeps the line away from fast queries.
const progressDelay = 500 * time.Millisecond

func startProgress(w io.Writer) *progressLine {
	p := &progressLine{w: w, start: time.Now(), done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-p.done:
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case now := <-t.C:
				if now.Sub(p.start) < progressDelay {
					continue
				}
				shown = true
				n := p.rows.Load()
				secs := now.Sub(p.start).Seconds()
				fmt.Fprintf(w, "\r\033[K%d rows fetched (%.0f rows/s)", n, float64(n)/secs)
			}
		}
	}()
	return p
}

func (p *progressLine) add(n int) {
	if p != nil {
		p.rows.Add(int64(n))
	}
}

func (p *progressLine) stop() {
	if p == nil {
		return
	}
	close(p.done)
	p.wg.Wait()
}
