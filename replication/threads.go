package replication

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/duckraft/duckraft/node/engine"
)

// serialLinger is how long DuckDB stays on one thread after the last entry
// that needed it. Setting DuckDB's thread count relaunches its thread pool
// (about 3 ms on a quiet machine, tens of ms on a loaded one), so setting
// and restoring it around every such entry capped a node catching up on
// bank-style UPDATEs at a few dozen entries per second.
const serialLinger = 500 * time.Millisecond

// serialThreads keeps DuckDB on one thread while the FSM applies entries
// whose outcome could depend on how work is split over threads, and gives
// the configured count back once none has come for serialLinger. The
// setting is global, so reads on this node run single-threaded meanwhile.
type serialThreads struct {
	conn *engine.Conn // its own connection: the restore runs on a timer
	log  *slog.Logger

	mu      sync.Mutex
	normal  int  // the thread count to restore
	limited bool // DuckDB is on one thread because of us
	busy    int  // applies in progress that need one thread
	timer   *time.Timer
}

func newSerialThreads(db *engine.DB, log *slog.Logger) (*serialThreads, error) {
	conn, err := db.Connect()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &serialThreads{conn: conn, log: log}, nil
}

// acquire puts DuckDB on one thread until the matching release.
func (s *serialThreads) acquire() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	if !s.limited {
		n, err := threadCount(s.conn)
		if err != nil {
			return err
		}
		if n > 1 {
			if _, err := s.conn.Exec(context.Background(), "SET GLOBAL threads = 1"); err != nil {
				return fmt.Errorf("limit apply to one thread: %w", err)
			}
			s.normal, s.limited = n, true
		}
	}
	s.busy++
	return nil
}

// release ends one acquire; the thread count comes back after serialLinger
// unless another acquire comes first.
func (s *serialThreads) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	if !s.limited || s.busy > 0 {
		return
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(serialLinger, s.expire)
	} else {
		s.timer.Reset(serialLinger)
	}
}

func (s *serialThreads) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == 0 {
		s.restore()
	}
}

// restore gives DuckDB its thread count back; s.mu is held.
func (s *serialThreads) restore() {
	if !s.limited {
		return
	}
	if _, err := s.conn.Exec(context.Background(), fmt.Sprintf("SET GLOBAL threads = %d", s.normal)); err != nil {
		s.log.Error("restore DuckDB threads", "threads", s.normal, "err", err)
		return
	}
	s.limited = false
}

// close restores the thread count at once and closes the connection.
func (s *serialThreads) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.restore()
	return s.conn.Close()
}

func threadCount(conn *engine.Conn) (int, error) {
	row, err := conn.QueryRow(context.Background(), "SELECT current_setting('threads')::BIGINT")
	if err != nil {
		return 0, fmt.Errorf("read threads setting: %w", err)
	}
	n, _ := row[0].(int64)
	return int(n), nil
}
