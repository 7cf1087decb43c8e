package wire

import "testing"

func TestNewBuffer(t *testing.T) {
	for _, tc := range []struct {
		n, cap int
		pooled bool
	}{
		{0, 64 << 10, true},
		{1, 64 << 10, true},
		{64 << 10, 64 << 10, true},
		{64<<10 + 1, 80 << 10, true},
		{80 << 10, 80 << 10, true},
		{80<<10 + 1, 96 << 10, true},
		{127 << 10, 128 << 10, true},
		{128<<10 + 1, 160 << 10, true},
		{5 << 20, 5 << 20, true},
		{5<<20 + 1, 6 << 20, true},
		{64 << 20, 64 << 20, true},
		{64<<20 + 1, 64<<20 + 1, false},
	} {
		b := NewBuffer(tc.n)
		if len(b.B) != tc.n || cap(b.B) != tc.cap || (b.class >= 0) != tc.pooled {
			t.Errorf("NewBuffer(%d): len %d cap %d pooled %v, want cap %d pooled %v", tc.n, len(b.B), cap(b.B), b.class >= 0, tc.cap, tc.pooled)
		}
		b.Release()
	}
	// Every class is its own pool.
	seen := map[int]bool{}
	for n := 64 << 10; n <= 64<<20; n += 16 << 10 {
		class, size := bufferClass(n)
		if class < 0 || class >= len(bufferPools) || size < n || size > n+n/4 {
			t.Fatalf("bufferClass(%d) = %d, %d", n, class, size)
		}
		seen[class] = true
	}
	if len(seen) != len(bufferPools) {
		t.Fatalf("%d classes used of %d", len(seen), len(bufferPools))
	}
}

func TestBufferReleasedOnceAllHoldersAre(t *testing.T) {
	b := NewBuffer(10)
	b.Retain()
	b.Retain()
	for want := int32(2); want >= 0; want-- {
		b.Release()
		if got := b.refs.Load(); got != want {
			t.Fatalf("after a release: %d references, want %d", got, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release beyond the references taken did not panic")
		}
	}()
	b.Release()
}

func TestNilBuffer(t *testing.T) {
	var b *Buffer
	b.Retain()
	b.Release()
}
