package client

import (
	"context"
	"net"
	"syscall"
)

// Reads of a large answer body wake the reader once per lowatMax bytes
// instead of once per burst of segments. A router reading a member's
// FETCH answers (a few MB each) otherwise parks and wakes hundreds of times
// per scan, and on a bandwidth-limited link once per trickle: that cost
// it about 40% of its CPU at 50 MB/s and 10% unlimited on loopback
// (docs/benchmarks.md, "SO_RCVLOWAT").
//
// The kernel wakes a reader only once SO_RCVLOWAT bytes are queued (or the
// peer closes, or an error), so the mark must never exceed the bytes the
// peer will send. net/http reads headers and small bodies through its
// read buffer (readBufferSize) and hands a Read larger than that buffer
// only for a body's remainder, bounded by the Content-Length or chunk size
// the server announced: a read of at least lowatMin bytes therefore asks
// for bytes that are promised, and the mark is that read's size. Smaller
// reads set it back to 1. A server that promises bytes and never sends
// them stalls the read as it would without the mark, until the deadline
// or the close. Under TLS a read's size says nothing about the records to
// come, so only connections that carry no TLS are wrapped (plain, dialer).
const (
	readBufferSize = 4 << 10
	lowatMin       = 64 << 10
	lowatMax       = 1 << 20
)

// lowatConn is a TCP connection that sets SO_RCVLOWAT to the size of each
// large read.
type lowatConn struct {
	*net.TCPConn
	mark int // the socket's SO_RCVLOWAT, 1 by default
}

func (c *lowatConn) Read(p []byte) (int, error) {
	mark := 1
	if len(p) >= lowatMin {
		mark = min(len(p), lowatMax)
	}
	if mark != c.mark && c.setMark(mark) {
		c.mark = mark
	}
	return c.TCPConn.Read(p)
}

// setMark reports whether the socket took the mark; if not, reads go on
// as they would without it.
func (c *lowatConn) setMark(mark int) bool {
	rc, err := c.TCPConn.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, mark)
	}); err != nil {
		return false
	}
	return serr == nil
}

// dialer returns the Transport's DialContext for plain HTTP connections.
func dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			return &lowatConn{TCPConn: tc, mark: 1}, nil
		}
		return c, nil
	}
}
