package replication

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/engine"
)

// TestSerialThreadsLinger checks that DuckDB stays on one thread across
// back-to-back serial applies and gets its thread count back once they stop.
func TestSerialThreadsLinger(t *testing.T) {
	db, err := engine.Open(filepath.Join(t.TempDir(), "duck.db"), engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := newSerialThreads(db, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	threads := func() int {
		t.Helper()
		n, err := threadCount(conn)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var released time.Time
	for i := 0; i < 3; i++ {
		if err := s.acquire(); err != nil {
			t.Fatal(err)
		}
		if n := threads(); n != 1 {
			t.Fatalf("apply %d: threads = %d while applying, want 1", i, n)
		}
		released = time.Now()
		s.release()
	}
	// The thread count comes back serialLinger after the release at the
	// earliest; a machine that stalled this long says nothing.
	if n, after := threads(), time.Since(released); n != 1 && after < serialLinger {
		t.Errorf("threads = %d %v after the last apply, want 1 until the linger (%v) ends", n, after, serialLinger)
	} else if after >= serialLinger {
		t.Logf("threads read %v after the last apply, past the linger: not checked", after)
	}
	deadline := time.Now().Add(serialLinger + 5*time.Second)
	for threads() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("threads still %d %v after the last apply", threads(), serialLinger+5*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.acquire(); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if n := threads(); n != 2 {
		t.Errorf("threads = %d after close, want 2", n)
	}
	if _, err := conn.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
}
