package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
)

// ErrNotBackup is wrapped by InstallBackup's error for a file that is not a
// duckraft backup: not a DuckDB database, a corrupt one, or one without the
// applied index of the metadata schema.
var ErrNotBackup = errors.New("replication: not a duckraft backup")

// backupMemory is the memory limit of the DuckDB instance that writes a
// backup file: it only appends rows that arrive chunk by chunk, and DuckDB
// writes a persistent database's row groups out as it goes, so a small
// limit bounds what a backup adds to the node's memory.
const backupMemory = "256MB"

// WriteBackup writes this node's database at one applied index into a new
// DuckDB database file at path, without stopping writes, and returns the
// index and this node's state hash at that index.
//
// It pins a read transaction between two entries, exactly as a Raft
// snapshot does (pinSnapshot), and rebuilds the database from the
// snapshot's frames, streamed through a pipe, in a fresh DuckDB file: the
// same code that restores a snapshot on a follower, so the file holds what
// a node restored from a snapshot at that index holds, metadata schema
// included. Neither side holds more than a chunk of rows in Go's memory.
// The hash is computed in the pinned transaction: its schema part while
// the FSM applies nothing (sequences are not transactional), its rows
// after the file is written. The file is checkpointed (no WAL beside it)
// and synced; on error it is removed.
func (s *Store) WriteBackup(ctx context.Context, path string) (StateHash, error) {
	snap, schema, err := s.fsm.pinBackup()
	if err != nil {
		return StateHash{}, fmt.Errorf("backup: %w", err)
	}
	defer snap.Release()
	if err := writeBackupFile(ctx, snap, path); err != nil {
		removeDatabase(path)
		return StateHash{}, fmt.Errorf("backup at %d: %w", snap.index, err)
	}
	h, err := hashRows(ctx, snap.conn, snap.index, schema)
	if err != nil {
		removeDatabase(path)
		return StateHash{}, fmt.Errorf("backup at %d: %w", snap.index, err)
	}
	s.log.Info("backup written", "applied", h.Index, "rows", h.Rows, "path", path)
	return h, nil
}

// pinBackup pins a snapshot between two entries and reads the schema part
// of its state hash before the next entry can move a sequence. The
// connection is opened and pinned to the applier's settings before the
// applier is held.
func (f *fsm) pinBackup() (*fsmSnapshot, []string, error) {
	conn, err := snapshotConn(f.db, f.pins)
	if err != nil {
		return nil, nil, err
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if err := f.haltErr(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: %w", ErrHalted, err)
	}
	snap, err := pinOn(conn, f.log)
	if err != nil {
		return nil, nil, err
	}
	schema, err := hashSchema(context.Background(), snap.conn)
	if err != nil {
		snap.Release()
		return nil, nil, err
	}
	return snap, schema, nil
}

// writeBackupFile creates the database at path from snap's frames.
func writeBackupFile(ctx context.Context, snap *fsmSnapshot, path string) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s exists already", path)
	}
	db, err := engine.Open(path, engine.Options{Threads: 1, MemoryLimit: backupMemory})
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Connect()
	if err != nil {
		return err
	}
	defer conn.Close()
	// A fresh database: readPins reads its defaults, which are the
	// applier's, and sets them as a restoring follower's connection has.
	if _, err := readPins(conn); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	// A caller that goes away (a client hanging up) stops both sides.
	stop := context.AfterFunc(ctx, func() { pr.CloseWithError(ctx.Err()) })
	defer stop()
	written := make(chan error, 1)
	go func() {
		w := &frameWriter{w: bufio.NewWriterSize(pw, 1<<20)}
		err := snap.write(w)
		if err == nil {
			err = w.w.Flush()
		}
		pw.CloseWithError(err)
		written <- err
	}()
	rerr := restoreInto(conn, pr)
	// A restore that failed early must not leave the writer blocked.
	pr.CloseWithError(errors.New("backup: restore ended"))
	if werr := <-written; werr != nil {
		return fmt.Errorf("read the database: %w", werr)
	}
	if rerr != nil {
		return rerr
	}
	if _, err := conn.Exec(context.Background(), "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	conn.Close()
	db.Close()
	return syncFile(path)
}

// restoreInto creates the metadata tables in conn's fresh database and
// restores the snapshot read from r, in one transaction.
func restoreInto(conn *engine.Conn, r io.Reader) error {
	ctx := context.Background()
	if err := conn.Begin(ctx); err != nil {
		return err
	}
	for _, ddl := range metaDDL {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			conn.Rollback(ctx)
			return fmt.Errorf("create metadata: %w", err)
		}
	}
	if _, err := restoreSnapshot(conn, r); err != nil {
		conn.Rollback(ctx)
		return err
	}
	if err := conn.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// InstallBackup makes the backup file at from the database file at dbPath,
// which must not exist, and returns the applied index the backup holds. It
// copies the file beside dbPath first, so the operator's backup is never
// opened for writing, checks that DuckDB opens the copy and reads every
// block, and that the copy holds duckraft's applied index, then syncs and
// renames it into place. A file that fails a check is reported with
// ErrNotBackup and nothing is left at dbPath.
func InstallBackup(from, dbPath string) (uint64, error) {
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("restore: %s exists already", dbPath)
	}
	tmp := dbPath + ".restoring"
	removeDatabase(tmp)
	if err := copyFile(from, tmp); err != nil {
		removeDatabase(tmp)
		return 0, fmt.Errorf("restore: %w", err)
	}
	idx, err := checkBackup(tmp)
	if err != nil {
		removeDatabase(tmp)
		return 0, fmt.Errorf("restore %s: %w", from, err)
	}
	if err := syncFile(tmp); err != nil {
		removeDatabase(tmp)
		return 0, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, dbPath); err != nil {
		removeDatabase(tmp)
		return 0, fmt.Errorf("restore: %w", err)
	}
	return idx, syncDir(filepath.Dir(dbPath))
}

// checkBackup opens the database at path and returns its applied index.
func checkBackup(path string) (uint64, error) {
	db, err := engine.Open(path, engine.Options{Threads: 1, MemoryLimit: backupMemory})
	if err != nil {
		return 0, fmt.Errorf("%w: DuckDB cannot open it: %w", ErrNotBackup, err)
	}
	defer db.Close()
	if err := verifyBlocks(db); err != nil {
		return 0, fmt.Errorf("%w: DuckDB finds it damaged: %w", ErrNotBackup, err)
	}
	conn, err := db.Connect()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	idx, err := readApplied(conn)
	if err != nil {
		return 0, fmt.Errorf("%w: it has no %s schema with an applied index: %w", ErrNotBackup, metaSchema, err)
	}
	if _, err := conn.Exec(context.Background(), "CHECKPOINT"); err != nil {
		return 0, fmt.Errorf("checkpoint: %w", err)
	}
	return idx, nil
}

// seedSnapshot makes a database that already holds state at applied index
// N the start of a new cluster: a snapshot at N (term 1) whose
// configuration is this node alone, written before raft starts. Raft then
// starts its log after N, as after hashicorp/raft's RecoverCluster, instead
// of at 1, where every new entry would be skipped as already applied; and
// joiners receive the database as that snapshot.
func (s *Store) seedSnapshot(snaps raft.SnapshotStore) error {
	snap, err := pinSnapshot(s.cfg.DB, s.fsm.pins, s.log)
	if err != nil {
		return err
	}
	defer snap.Release()
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.ID), Address: s.trans.LocalAddr(),
	}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, snap.index, 1, conf, snap.index, s.trans)
	if err != nil {
		return fmt.Errorf("seed snapshot at %d: %w", snap.index, err)
	}
	if err := snap.Persist(sink); err != nil {
		return fmt.Errorf("seed snapshot: %w", err)
	}
	s.log.Info("bootstrapped from the database's state: the log starts after its applied index", "applied", snap.index)
	return nil
}

// removeDatabase removes a database file and what DuckDB keeps beside it.
func removeDatabase(path string) {
	os.Remove(path)
	os.Remove(path + ".wal")
	os.RemoveAll(path + ".tmp")
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return dst.Close()
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error { return syncFile(dir) }
