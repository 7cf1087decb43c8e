package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A wedged read is what a wrong mark causes, so every request here runs
// under a deadline far longer than it needs and fails rather than hangs.
const lowatDeadline = 60 * time.Second

func lowatTransport() *http.Transport {
	return &http.Transport{DialContext: dialer(), ReadBufferSize: readBufferSize, MaxConnsPerHost: 1, DisableCompression: true}
}

// serveOnce listens on loopback until the test ends and hands the first
// connection to serve, closing it after.
func serveOnce(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return ln.Addr().String()
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}

// TestLowatBodiesOfEverySize reads bodies around each threshold, large
// and small in turn on one connection, with a Content-Length and chunked,
// at once and trickled: every one must arrive whole.
func TestLowatBodiesOfEverySize(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		body := pattern(n)
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		piece := n
		if r.URL.Query().Get("trickle") != "" {
			piece = 16 << 10
		}
		for off := 0; off < n; off += piece {
			w.Write(body[off:min(n, off+piece)])
			if f, ok := w.(http.Flusher); ok && piece < n {
				f.Flush()
				time.Sleep(time.Millisecond)
			}
		}
	}))
	defer srv.Close()
	hc := &http.Client{Transport: lowatTransport()}
	sizes := []int{0, 1, readBufferSize - 1, readBufferSize, lowatMin - 1, lowatMin, lowatMin + 1, 300 << 10,
		lowatMax, lowatMax + 1, 3<<20 + 7, 17}
	for _, mode := range []string{"", "&chunked=1", "&trickle=1", "&chunked=1&trickle=1"} {
		for _, n := range sizes {
			ok := t.Run(fmt.Sprintf("%d%s", n, mode), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), lowatDeadline)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/?n=%d%s", srv.URL, n, mode), nil)
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				got := make([]byte, n)
				if _, err := io.ReadFull(resp.Body, got); err != nil {
					t.Fatalf("read %d bytes: %v", n, err)
				}
				if !bytes.Equal(got, pattern(n)) {
					t.Fatalf("body of %d bytes differs", n)
				}
				if extra, err := io.ReadAll(resp.Body); err != nil || len(extra) != 0 {
					t.Fatalf("after the body: %d bytes, %v", len(extra), err)
				}
			})
			if !ok {
				return // the next would wedge the same way
			}
		}
	}
}

// TestLowatPeerClosesMidBody: a server that promises more than it sends
// and closes gives the reader an error, not a wait for the mark.
func TestLowatPeerClosesMidBody(t *testing.T) {
	addr := serveOnce(t, func(c net.Conn) {
		c.Read(make([]byte, 4096))
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", 2<<20)
		c.Write(pattern(100 << 10))
	})
	ctx, cancel := context.WithTimeout(context.Background(), lowatDeadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/", nil)
	resp, err := (&http.Client{Transport: lowatTransport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.ReadFull(resp.Body, make([]byte, 2<<20))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read of a cut body: %v, want %v", err, io.ErrUnexpectedEOF)
	}
	if ctx.Err() != nil {
		t.Fatal("the read waited for the deadline")
	}
}

// TestLowatMarkFollowsReads pins that the socket's SO_RCVLOWAT is the size
// of a large read, capped, and back to 1 for a small one.
func TestLowatMarkFollowsReads(t *testing.T) {
	addr := serveOnce(t, func(c net.Conn) {
		c.Write(pattern(2*lowatMax + 300<<10)) // more than the reads below take: it ends at their close
	})
	nc, err := dialer()(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := nc.(*lowatConn)
	c.SetDeadline(time.Now().Add(lowatDeadline))
	mark := func() int {
		t.Helper()
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		var gerr error
		rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT) })
		if gerr != nil {
			t.Fatal(gerr)
		}
		return v
	}
	// The kernel caps the mark at half of net.ipv4.tcp_rmem's maximum.
	limit := lowatMax
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_rmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				limit = min(limit, n/2)
			}
		}
	}
	// One Read each: the mark is set for the read's size before it reads.
	for _, tc := range []struct{ read, want int }{
		{2 * lowatMax, lowatMax},
		{200 << 10, 200 << 10},
		{10, 1},
		{lowatMin, lowatMin},
	} {
		if _, err := c.Read(make([]byte, tc.read)); err != nil {
			t.Fatalf("read %d: %v", tc.read, err)
		}
		if got, want := mark(), min(tc.want, limit); got != want {
			t.Errorf("after a read of %d bytes SO_RCVLOWAT is %d, want %d", tc.read, got, want)
		}
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		url, proxy string
		want       bool
	}{
		{"http://10.0.0.1:9494/quack", "", true},
		{"https://10.0.0.1:9494/quack", "", false},
		{"http://10.0.0.1:9494/quack", "http://proxy:3128", true},
		{"http://10.0.0.1:9494/quack", "https://proxy:3128", false},
		{"https://10.0.0.1:9494/quack", "http://proxy:3128", false},
	} {
		t.Run(tc.url+" via "+tc.proxy, func(t *testing.T) {
			proxy := func(*http.Request) (*url.URL, error) {
				if tc.proxy == "" {
					return nil, nil
				}
				return url.Parse(tc.proxy)
			}
			if got := plain(tc.url, proxy); got != tc.want {
				t.Errorf("plain(%q) through %q = %v, want %v", tc.url, tc.proxy, got, tc.want)
			}
		})
	}
}
