package wire

import "testing"

func TestNewBuffer(t *testing.T) {
	for _, tc := range []struct {
		n, cap int
		pooled bool
	}{
		{0, 1 << 16, true},
		{1, 1 << 16, true},
		{1 << 16, 1 << 16, true},
		{1<<16 + 1, 1 << 17, true},
		{5 << 20, 8 << 20, true},
		{1 << 26, 1 << 26, true},
		{1<<26 + 1, 1<<26 + 1, false},
	} {
		b := NewBuffer(tc.n)
		if len(b.B) != tc.n || cap(b.B) != tc.cap || (b.class >= 0) != tc.pooled {
			t.Errorf("NewBuffer(%d): len %d cap %d pooled %v, want cap %d pooled %v", tc.n, len(b.B), cap(b.B), b.class >= 0, tc.cap, tc.pooled)
		}
		b.Release()
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
