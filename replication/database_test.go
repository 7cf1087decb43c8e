package replication

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

// crashAfterEnv makes the test binary a process that runs one statement on
// a database and exits without closing it, as a node killed before DuckDB's
// checkpoint: the change is only in DuckDB's WAL.
const crashAfterEnv = "DUCKRAFT_TEST_CRASH_AFTER"

func TestMain(m *testing.M) {
	if sql := os.Getenv(crashAfterEnv); sql != "" {
		err := execOn(os.Getenv("DUCKRAFT_TEST_DB"), sql, false)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOpenDatabaseAfterUnreplayableWAL: DuckDB cannot replay some ALTER
// TABLEs that store an expression (1.5.6 none of these, 2.0.0 the change of
// type); a node killed after one must still start, at its last checkpoint,
// for Raft to replay the rest.
func TestOpenDatabaseAfterUnreplayableWAL(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		replays bool
	}{
		{"ALTER TABLE r ALTER COLUMN i SET DEFAULT 1 + 2", true},
		{"ALTER TABLE r ADD COLUMN d INTEGER DEFAULT abs(1)", true},
		{"ALTER TABLE r ALTER COLUMN i TYPE BIGINT USING abs(i)", false},
	} {
		sql := tc.sql
		t.Run(sql, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "duckraft.db")
			if err := execOn(path, "CREATE TABLE r(i INTEGER); INSERT INTO r VALUES (7)", true); err != nil {
				t.Fatal(err)
			}

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashAfterEnv+"="+sql, "DUCKRAFT_TEST_DB="+path)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("crashing process: %v: %s", err, out)
			}
			if _, err := os.Stat(path + ".wal"); err != nil {
				t.Fatalf("the crash left no WAL to replay: %v", err)
			}

			db, err := OpenDatabase(path, engine.Options{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("open after the crash: %v", err)
			}
			defer db.Close()
			conn, err := db.Connect()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			row, err := conn.QueryRow(context.Background(), "SELECT count(*) FROM r WHERE i = 7")
			if err != nil || len(row) != 1 || row[0] != int64(1) {
				t.Fatalf("the checkpointed row: %v, %v", row, err)
			}
			aside, _ := filepath.Glob(path + ".wal.unreplayable-*")
			if tc.replays != (len(aside) == 0) {
				t.Fatalf("DuckDB replays it: %v; WALs set aside: %v", tc.replays, aside)
			}
		})
	}
}

// execOn runs sql on the database at path, closing it (a checkpoint) or,
// as a crash would, not.
func execOn(path, sql string, close bool) error {
	db, err := engine.Open(path, engine.Options{})
	if err != nil {
		return err
	}
	conn, err := db.Connect()
	if err != nil {
		return err
	}
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		return err
	}
	if close {
		conn.Close()
		return db.Close()
	}
	return nil
}
