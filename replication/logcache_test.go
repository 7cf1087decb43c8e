package replication

import (
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore counts the reads that reach the store behind the cache.
type countingStore struct {
	*raft.InmemStore
	reads int
}

func (s *countingStore) GetLog(idx uint64, log *raft.Log) error {
	s.reads++
	return s.InmemStore.GetLog(idx, log)
}

func TestLogCacheBounds(t *testing.T) {
	entry := func(idx uint64, size int) *raft.Log {
		return &raft.Log{Index: idx, Term: 1, Data: make([]byte, size)}
	}
	tests := []struct {
		name   string
		stored [][]*raft.Log // each one StoreLogs call
		cached []uint64      // served from memory
		missed []uint64      // read from the store
	}{
		{"count bound", [][]*raft.Log{{entry(1, 1), entry(2, 1), entry(3, 1)}, {entry(4, 1), entry(5, 1)}},
			[]uint64{2, 3, 4, 5}, []uint64{1}},
		{"byte bound", [][]*raft.Log{{entry(1, 40), entry(2, 40)}, {entry(3, 40)}},
			[]uint64{2, 3}, []uint64{1}},
		{"entry larger than the cache", [][]*raft.Log{{entry(1, 10), entry(2, 101), entry(3, 10)}},
			[]uint64{3}, []uint64{1, 2}},
		{"truncated log", [][]*raft.Log{{entry(1, 1), entry(2, 1), entry(3, 1)}, {entry(2, 1)}},
			[]uint64{2}, []uint64{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &countingStore{InmemStore: raft.NewInmemStore()}
			c, err := newLogCache(4, 100, store)
			if err != nil {
				t.Fatal(err)
			}
			for _, logs := range tt.stored {
				if err := c.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
			}
			if c.bytes > c.maxBytes {
				t.Fatalf("cache holds %d bytes, bound %d", c.bytes, c.maxBytes)
			}
			for _, idx := range tt.cached {
				var l raft.Log
				before := store.reads
				if err := c.GetLog(idx, &l); err != nil || l.Index != idx {
					t.Fatalf("GetLog(%d) = %d, %v", idx, l.Index, err)
				}
				if store.reads != before {
					t.Errorf("entry %d was read from the store, want it cached", idx)
				}
			}
			for _, idx := range tt.missed {
				var l raft.Log
				before := store.reads
				c.GetLog(idx, &l)
				if store.reads == before {
					t.Errorf("entry %d came from the cache, want it evicted", idx)
				}
			}
			if err := c.DeleteRange(1, 10); err != nil {
				t.Fatal(err)
			}
			if c.bytes != 0 || c.first <= c.last {
				t.Fatalf("DeleteRange left %d bytes, range [%d, %d]", c.bytes, c.first, c.last)
			}
		})
	}
}
