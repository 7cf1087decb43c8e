package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// benchProgress shows a benchmark's progress on stderr: a bar redrawn in
// place on a terminal, one line per step otherwise (make bench's log). A
// step's share of the bar is its expected duration.
type benchProgress struct {
	w        io.Writer
	tty      bool
	total    time.Duration
	mu       sync.Mutex
	done     time.Duration // expected durations of the finished steps
	label    string
	expected time.Duration
	started  time.Time
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newBenchProgress(w io.Writer, total time.Duration) *benchProgress {
	p := &benchProgress{w: w, total: max(total, time.Millisecond)}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
		p.stop = make(chan struct{})
		p.wg.Add(1)
		go p.draw()
	}
	return p
}

// begin starts a step expected to take d.
func (p *benchProgress) begin(label string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.expected, p.started = label, d, time.Now()
	if !p.tty {
		fmt.Fprintf(p.w, "bench: %s\n", label)
	}
}

func (p *benchProgress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += p.expected
	p.label, p.expected = "", 0
}

// finish clears the bar; it may be called more than once.
func (p *benchProgress) finish() {
	if !p.tty {
		return
	}
	p.mu.Lock()
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.wg.Wait()
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *benchProgress) draw() {
	defer p.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	p.mu.Lock()
	stop := p.stop
	p.mu.Unlock()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.mu.Lock()
			line := progressBar(p.done+min(time.Since(p.started), p.expected), p.total, p.label, 30)
			p.mu.Unlock()
			fmt.Fprint(p.w, "\r\033[K"+line)
		}
	}
}

// progressBar renders [#####-----] 50% label, width characters wide.
func progressBar(done, total time.Duration, label string, width int) string {
	frac := min(max(float64(done)/float64(total), 0), 1)
	n := int(frac * float64(width))
	return fmt.Sprintf("[%s%s] %3.0f%% %s", strings.Repeat("#", n), strings.Repeat("-", width-n), frac*100, label)
}
