package bandwidth

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// source serves every connection n bytes and closes it.
func source(t *testing.T, n int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for left := n; left > 0; left -= len(buf) {
					if _, err := c.Write(buf[:min(left, len(buf))]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestRateIsHonoured reads 6 MB through a 2 MB/s proxy, on one connection
// and on three at once: the cap is shared, so either takes at least about
// 3 s less the burst. Only the lower bound is tight; a loaded machine can
// only make it slower.
func TestRateIsHonoured(t *testing.T) {
	const rate, total = 2_000_000, 6_000_000
	for _, conns := range []int{1, 3} {
		p, err := Listen("127.0.0.1:0", source(t, total/conns), rate)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		got := make([]int64, conns)
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				got[i], _ = io.Copy(io.Discard, c)
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		var sum int64
		for _, n := range got {
			sum += n
		}
		if sum != total/int64(conns)*int64(conns) || p.Sent() != sum {
			t.Errorf("%d conns: read %d bytes, proxy counted %d, want %d", conns, sum, p.Sent(), total)
		}
		// 6 MB at 2 MB/s is 3 s; the burst (100 KB) lets at most 0.05 s through early.
		if min := 2500 * time.Millisecond; elapsed < min {
			t.Errorf("%d conns: %d bytes in %v through a %d B/s cap: faster than the cap", conns, sum, elapsed, rate)
		}
		if elapsed > 60*time.Second {
			t.Errorf("%d conns: took %v", conns, elapsed)
		}
		t.Logf("%d conns: %.2f MB/s", conns, float64(sum)/elapsed.Seconds()/1e6)
		p.Close()
	}
}

func TestCloseEndsConnections(t *testing.T) {
	p, err := Listen("127.0.0.1:0", source(t, 1<<30), 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, c); close(done) }()
	time.Sleep(100 * time.Millisecond)
	p.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a connection outlived the proxy's Close")
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"50MB/s", 50_000_000, true},
		{"512KB/s", 512_000, true},
		{"1.5GB", 1_500_000_000, true},
		{"100", 100, true},
		{"100B/s", 100, true},
		{"0MB/s", 0, false},
		{"-5MB/s", 0, false},
		{"fast", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
