package replication

import (
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps the most recent log entries in memory, so that
// replicating a new entry to followers does not read it back from
// raft-boltdb: at most count entries and about maxBytes of their data.
// raft's own LogCache bounds only the count, and 512 entries of staged
// rows (several MB each) would hold gigabytes.
//
// The cached entries are a contiguous range [first, last]; an entry that
// does not extend it (a follower's log truncated after a conflict) or that
// alone exceeds maxBytes empties the cache.
type logCache struct {
	store    raft.LogStore
	maxBytes int
	// keep, if set, is the first index that compaction must keep (the
	// staged rows of open transactions, logHolds.keep), or 0 for none.
	keep func() uint64

	mu          sync.RWMutex
	slots       []*raft.Log
	bytes       int
	first, last uint64 // first > last when empty
}

func newLogCache(count, maxBytes int, store raft.LogStore) (*logCache, error) {
	if count <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("log cache of %d entries and %d bytes", count, maxBytes)
	}
	return &logCache{store: store, maxBytes: maxBytes, slots: make([]*raft.Log, count), first: 1}, nil
}

// IsMonotonic passes the store's answer through (raft.MonotonicLogStore).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog implements raft.LogStore.
func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	if idx >= c.first && idx <= c.last {
		*log = *c.slots[idx%uint64(len(c.slots))]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(idx, log)
}

// StoreLog implements raft.LogStore.
func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore: the entries are cached once the
// store has them.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %q", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if len(l.Data) > c.maxBytes || (c.first <= c.last && l.Index != c.last+1) {
			c.clear()
			if len(l.Data) > c.maxBytes {
				continue
			}
		}
		if c.first > c.last {
			c.first, c.last = l.Index, l.Index-1
		}
		if c.last-c.first+1 == uint64(len(c.slots)) {
			c.evictFirst()
		}
		c.slots[l.Index%uint64(len(c.slots))] = l
		c.last = l.Index
		c.bytes += len(l.Data)
		for c.bytes > c.maxBytes {
			c.evictFirst()
		}
	}
	return nil
}

func (c *logCache) evictFirst() {
	slot := c.first % uint64(len(c.slots))
	c.bytes -= len(c.slots[slot].Data)
	c.slots[slot] = nil
	c.first++
}

func (c *logCache) clear() {
	clear(c.slots)
	c.bytes, c.first, c.last = 0, 1, 0
}

// FirstIndex implements raft.LogStore.
func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex implements raft.LogStore.
func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange implements raft.LogStore; like raft's LogCache it forgets
// every cached entry. A compaction of the log's head stops before keep:
// raft reads a deleted range only to replicate it, and sends a snapshot
// when the entries are gone, so keeping more than it asked is safe. A
// deletion of the whole log (raft's after installing a snapshot, which
// carries the staged rows) or of its tail (a follower's conflicting
// entries, never applied), both of which end at the last index, is done as
// asked.
func (c *logCache) DeleteRange(lo, hi uint64) error {
	if c.keep != nil {
		if k := c.keep(); k != 0 && k <= hi {
			last, err := c.store.LastIndex()
			if err != nil {
				return err
			}
			if hi < last {
				hi = k - 1
			}
			if hi < lo {
				return nil
			}
		}
	}
	c.mu.Lock()
	c.clear()
	c.mu.Unlock()
	return c.store.DeleteRange(lo, hi)
}
