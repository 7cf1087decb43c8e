package wire

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Buffer is a message body shared by the encoded chunks cut from it, taken
// from a pool and put back when its last reference is released. A router
// forwarding a scan receives hundreds of megabytes a second; a fresh
// allocation per body, zeroed and then faulted in page by page, and the
// collections that follow, were a fifth of its CPU.
//
// Every holder of a reference calls Release once it no longer reads B.
// Dropping a Buffer without releasing it is always safe, the collector then
// frees it; releasing while another holder still reads B is not, which is
// why each holder takes its own reference (Retain) before it shares the
// bytes onward.
type Buffer struct {
	B     []byte
	refs  atomic.Int32
	class int // index into bufferPools, or -1 for a buffer never pooled
}

// Buffers from 64 KiB to 64 MiB are pooled in classes of four steps per
// doubling (64, 80, 96, 112, 128 KiB …), so that a buffer is at most a
// quarter larger than asked for.
const (
	minBufferShift = 16
	maxBufferShift = 26
	classSteps     = 4
)

var bufferPools [1 + (maxBufferShift-minBufferShift)*classSteps]sync.Pool

// bufferClass returns the pool class for n bytes and its capacity; class
// -1 for sizes beyond the pools.
func bufferClass(n int) (class, size int) {
	if n <= 1<<minBufferShift {
		return 0, 1 << minBufferShift
	}
	shift := bits.Len(uint(n - 1)) // 1<<(shift-1) < n <= 1<<shift
	if shift > maxBufferShift {
		return -1, n
	}
	base, step := 1<<(shift-1), 1<<(shift-1)/classSteps
	k := (n - base + step - 1) / step // 1..classSteps
	return 1 + (shift-1-minBufferShift)*classSteps + k - 1, base + k*step
}

// NewBuffer returns a Buffer of n bytes, of unspecified content, holding one
// reference.
func NewBuffer(n int) *Buffer {
	class, size := bufferClass(n)
	if class < 0 {
		b := &Buffer{B: make([]byte, n), class: -1}
		b.refs.Store(1)
		return b
	}
	b, _ := bufferPools[class].Get().(*Buffer)
	if b == nil {
		b = &Buffer{B: make([]byte, size), class: class}
	}
	b.B = b.B[:n]
	b.refs.Store(1)
	return b
}

// BufferOf wraps b in a Buffer holding one reference that is never pooled:
// for bytes that decoded values may alias.
func BufferOf(b []byte) *Buffer {
	buf := &Buffer{B: b, class: -1}
	buf.refs.Store(1)
	return buf
}

// Retain adds a reference. A nil Buffer is a no-op.
func (b *Buffer) Retain() {
	if b != nil {
		b.refs.Add(1)
	}
}

// Release drops a reference; the last one returns the buffer to its pool.
// A nil Buffer is a no-op. Releasing more references than were taken would
// hand out bytes still being read, so it panics, as sync.WaitGroup does for
// a negative counter.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	switch n := b.refs.Add(-1); {
	case n < 0:
		panic("wire: Buffer released more often than retained")
	case n == 0 && b.class >= 0:
		bufferPools[b.class].Put(b)
	}
}
