package engine

import "fmt"

// Pool keeps a few idle connections of a database for short tasks that
// would otherwise open one each: Connect costs a DuckDB connection and the
// settings every connection gets (SET streaming_buffer_size), together
// about 0.3 ms on a loaded machine, as much as binding a statement. It is
// safe for concurrent use.
//
// A connection comes back to the pool only as Connect left it, as far as
// the pool can tell: no transaction open and no result streaming. Tasks
// that change a connection's session (a SET, a USE, a temporary object)
// must close it rather than put it back.
type Pool struct {
	db    *DB
	conns idlePool[*Conn]
}

// NewPool returns a pool of db's connections that keeps at most maxIdle
// of them idle. It does not bound how many are in use at once: a Get when
// none is idle connects anew, and a Put into a full pool closes the
// connection.
func NewPool(db *DB, maxIdle int) *Pool {
	return &Pool{db: db, conns: idlePool[*Conn]{max: maxIdle, open: db.Connect, close: func(c *Conn) { c.Close() }}}
}

// DB is the pool's database.
func (p *Pool) DB() *DB { return p.db }

// Get returns an idle connection, or a new one when none is idle. The
// caller gives it back with Put or closes it.
func (p *Pool) Get() (*Conn, error) {
	c, err := p.conns.get()
	if err != nil {
		return nil, fmt.Errorf("connection pool: %w", err)
	}
	return c, nil
}

// Put gives c back. It keeps c for the next Get unless the pool is closed
// or full, or c holds a transaction (one that failed to roll back, or that
// the task left open): the next task would run inside it. Its open Result,
// if any, is closed.
func (p *Pool) Put(c *Conn) {
	if c.res != nil {
		c.res.Close()
	}
	c.mu.Lock()
	gone := c.closed
	c.mu.Unlock()
	if gone {
		return
	}
	if c.inTx {
		c.Close()
		return
	}
	p.conns.put(c)
}

// Close closes the idle connections; connections in use are closed when
// they are put back. Later Gets fail.
func (p *Pool) Close() error {
	p.conns.shut()
	return nil
}
