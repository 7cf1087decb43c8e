package routing

import (
	"slices"
	"strings"
	"sync"
)

// Classification cache bounds: a generation holds at most cacheEntries
// texts or cacheBytes bytes of text, and two generations are kept. Texts
// longer than cacheMaxText (bulk INSERTs) are not cached.
const (
	cacheEntries = 2048
	cacheBytes   = 4 << 20
	cacheMaxText = 64 << 10
)

// classCache remembers the classification of client texts: dashboards send
// the same texts again and again, and DuckDB's parser costs tens of
// microseconds per statement.
var classCache = newStatementCache()

// statementCache is a two-generation cache: hits in the old generation move
// to the new one, and when the new one is full it becomes the old one, so
// texts used again within a generation's span stay and the rest age out.
type statementCache struct {
	mu       sync.Mutex
	cur, old map[string][]Statement
	curBytes int
}

func newStatementCache() *statementCache {
	return &statementCache{cur: map[string][]Statement{}, old: map[string][]Statement{}}
}

// get returns a copy of the statements cached for sql.
func (c *statementCache) get(sql string) ([]Statement, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stmts, ok := c.cur[sql]
	if !ok {
		if stmts, ok = c.old[sql]; !ok {
			return nil, false
		}
		delete(c.old, sql)
		c.add(sql, stmts)
	}
	return slices.Clone(stmts), true
}

// put caches a copy of stmts for sql.
func (c *statementCache) put(sql string, stmts []Statement) {
	if len(sql) > cacheMaxText {
		return
	}
	// Copy the text so that the cache holds no larger string it may be
	// a slice of; the statements' texts become slices of the copy.
	sql = strings.Clone(sql)
	own := make([]Statement, len(stmts))
	pos := 0
	for i, st := range stmts {
		own[i] = Statement{SQL: st.SQL, Class: st.Class}
		if k := strings.Index(sql[pos:], st.SQL); k >= 0 {
			own[i].SQL = sql[pos+k : pos+k+len(st.SQL)]
			pos += k + len(st.SQL)
		} else {
			own[i].SQL = strings.Clone(st.SQL)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[sql]; !ok {
		c.add(sql, own)
	}
}

func (c *statementCache) add(sql string, stmts []Statement) {
	if len(c.cur) >= cacheEntries || c.curBytes+len(sql) > cacheBytes {
		c.old, c.cur, c.curBytes = c.cur, make(map[string][]Statement, len(c.cur)), 0
	}
	c.cur[sql] = stmts
	c.curBytes += len(sql)
}

// len returns the number of cached texts.
func (c *statementCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
