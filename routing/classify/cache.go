package classify

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
)

// Classification cache bounds: a generation holds at most cacheEntries
// texts or cacheBytes bytes of text, and two generations are kept. Texts
// longer than cacheMaxText (bulk INSERTs) are not cached. A generation of
// the doorkeeper remembers the hashes of up to seenEntries texts.
const (
	cacheEntries = 2048
	cacheBytes   = 4 << 20
	cacheMaxText = 64 << 10
	seenEntries  = 4 * cacheEntries
)

// classCache remembers the classes of the statements of client texts:
// dashboards send the same texts again and again, and DuckDB's parser costs
// tens of microseconds per statement. It holds classes, not the lexed
// statements: a hit lexes the text once (Statements), which costs a small
// part of a parse, and the cache's bound stays one of text.
var classCache = newStatementCache()

// statementCache is a two-generation cache: hits in the old generation move
// to the new one, and when the new one is full it becomes the old one, so
// texts used again within a generation's span stay and the rest age out.
// A doorkeeper admits a text only the second time it is put, so that
// one-off texts (point queries with their literals, INSERTs of new rows)
// do not push out the texts that repeat.
type statementCache struct {
	mu       sync.Mutex
	cur, old map[string][]Class
	curBytes int

	seed             maphash.Seed
	seenCur, seenOld map[uint64]struct{}
}

func newStatementCache() *statementCache {
	return &statementCache{cur: map[string][]Class{}, old: map[string][]Class{},
		seed: maphash.MakeSeed(), seenCur: map[uint64]struct{}{}, seenOld: map[uint64]struct{}{}}
}

// get returns a copy of the classes cached for sql, one per statement.
func (c *statementCache) get(sql string) ([]Class, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	classes, ok := c.cur[sql]
	if !ok {
		if classes, ok = c.old[sql]; !ok {
			return nil, false
		}
		delete(c.old, sql)
		c.add(sql, classes)
	}
	return slices.Clone(classes), true
}

// put caches a copy of classes for sql if sql was put before.
func (c *statementCache) put(sql string, classes []Class) {
	if len(sql) > cacheMaxText || !c.seen(maphash.String(c.seed, sql)) {
		return
	}
	// Copy the text so that the cache holds no larger string it may be
	// a slice of.
	sql = strings.Clone(sql)
	own := slices.Clone(classes)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[sql]; !ok {
		c.add(sql, own)
	}
}

// seen reports whether h was seen before, and remembers it.
func (c *statementCache) seen(h uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seenCur[h]; ok {
		return true
	}
	_, ok := c.seenOld[h]
	if len(c.seenCur) >= seenEntries {
		c.seenOld, c.seenCur = c.seenCur, make(map[uint64]struct{}, seenEntries)
	}
	c.seenCur[h] = struct{}{}
	return ok
}

func (c *statementCache) add(sql string, classes []Class) {
	if len(c.cur) >= cacheEntries || c.curBytes+len(sql) > cacheBytes {
		c.old, c.cur, c.curBytes = c.cur, make(map[string][]Class, len(c.cur)), 0
	}
	c.cur[sql] = classes
	c.curBytes += len(sql)
}

// len returns the number of cached texts.
func (c *statementCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
