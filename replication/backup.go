package replication

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
)

// ErrNotBackup is wrapped by InstallBackup's error for a file that is not a
// duckraft backup: not a DuckDB database, a corrupt one, one whose metadata
// tables are missing or of another shape than duckraft's, or one whose
// applied index no log reaches (0, or MaxBackupIndex and above).
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
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return StateHash{}, fmt.Errorf("backup: %s exists already", path)
	}
	snap, schema, err := s.fsm.pinBackup()
	if err != nil {
		return StateHash{}, fmt.Errorf("backup: %w", err)
	}
	defer snap.Release()
	// DuckDB creates its file with the process's umask (0644 usually);
	// a backup is the whole database, so it is written in a directory
	// only this user can enter and made 0600 before it takes its name.
	private, err := os.MkdirTemp(filepath.Dir(path), ".backup-*")
	if err != nil {
		return StateHash{}, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "backup.duckdb")
	if err := writeBackupFile(ctx, snap, tmp); err != nil {
		return StateHash{}, fmt.Errorf("backup at %d: %w", snap.index, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return StateHash{}, fmt.Errorf("backup at %d: %w", snap.index, err)
	}
	h, err := hashRows(ctx, snap.conn, snap.index, schema)
	if err != nil {
		return StateHash{}, fmt.Errorf("backup at %d: %w", snap.index, err)
	}
	if err := os.Rename(tmp, path); err != nil {
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
	f.readsStages(snap)
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

// MaxBackupIndex bounds the applied index InstallBackup accepts: no log
// reaches 2^62 entries (a million a second would take 146,000 years), and
// raft's index arithmetic past the backup's index must not wrap. The term
// guard bounds terms the same way (rpcguard.go).
const MaxBackupIndex = 1 << 62

// ErrBackupHashMismatch is wrapped by InstallBackup's error for a backup
// whose state hash is not the one recorded for it: a file changed since it
// was taken, or another backup than the hash's.
var ErrBackupHashMismatch = errors.New("replication: the backup's state hash is not the one recorded for it")

// BackupHashSuffix names the file beside a backup that records its state
// hash (FILE.hash beside FILE): the JSON of StateHash, which is also
// nodeapi.StateHash's. duckraft backup and scheduled backups write it, and
// duckraftd --restore checks the backup against it.
const BackupHashSuffix = ".hash"

// InstallBackup makes the backup file at from the database file at dbPath,
// which must not exist, and returns the state hash of what it installed,
// at the applied index the backup holds. It copies the file beside dbPath
// first, so the operator's backup is never opened for writing, checks that
// DuckDB opens the copy and reads every block, that duckraft's metadata
// tables have the shape duckraft creates and hold an applied index above 0
// and below MaxBackupIndex, and, when want is not nil, that the copy's
// state hash is want; then it syncs and renames the copy into place. A
// file that fails a check is reported with ErrNotBackup (or
// ErrBackupHashMismatch) and nothing is left at dbPath.
func InstallBackup(from, dbPath string, want *StateHash) (StateHash, error) {
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		return StateHash{}, fmt.Errorf("restore: %s exists already", dbPath)
	}
	tmp := dbPath + ".restoring"
	removeDatabase(tmp)
	if err := copyFile(from, tmp); err != nil {
		removeDatabase(tmp)
		return StateHash{}, fmt.Errorf("restore: %w", err)
	}
	h, err := checkBackup(tmp)
	if err == nil && want != nil && (h.Index != want.Index || h.Hash != want.Hash || h.Rows != want.Rows) {
		err = fmt.Errorf("%w: it holds index %d, %d rows, hash %s; %s%s records index %d, %d rows, hash %s",
			ErrBackupHashMismatch, h.Index, h.Rows, h.Hash, filepath.Base(from), BackupHashSuffix, want.Index, want.Rows, want.Hash)
	}
	if err != nil {
		removeDatabase(tmp)
		return StateHash{}, fmt.Errorf("restore %s: %w", from, err)
	}
	if err := syncFile(tmp); err != nil {
		removeDatabase(tmp)
		return StateHash{}, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, dbPath); err != nil {
		removeDatabase(tmp)
		return StateHash{}, fmt.Errorf("restore: %w", err)
	}
	return h, syncDir(filepath.Dir(dbPath))
}

// checkBackup opens the database at path, checks it as InstallBackup says
// and returns its state hash.
func checkBackup(path string) (StateHash, error) {
	db, err := engine.Open(path, engine.Options{Threads: 1, MemoryLimit: backupMemory})
	if err != nil {
		return StateHash{}, fmt.Errorf("%w: DuckDB cannot open it: %w", ErrNotBackup, err)
	}
	defer db.Close()
	if err := verifyBlocks(db); err != nil {
		return StateHash{}, fmt.Errorf("%w: DuckDB finds it damaged: %w", ErrNotBackup, err)
	}
	conn, err := db.Connect()
	if err != nil {
		return StateHash{}, err
	}
	defer conn.Close()
	// The applied index is read with the FSM's own query, which expects
	// the shape of the tables it creates: another shape would fail it, or
	// hand it a value of another type.
	if err := checkMetaTables(conn); err != nil {
		return StateHash{}, fmt.Errorf("%w: %w", ErrNotBackup, err)
	}
	idx, err := readApplied(conn)
	if err != nil {
		return StateHash{}, fmt.Errorf("%w: %w", ErrNotBackup, err)
	}
	switch {
	case idx == 0:
		return StateHash{}, fmt.Errorf("%w: applied index 0: a backup holds the state after at least one log entry", ErrNotBackup)
	case idx >= MaxBackupIndex:
		return StateHash{}, fmt.Errorf("%w: applied index %d: no log reaches 2^62 entries", ErrNotBackup, idx)
	}
	h, err := backupHash(conn, idx)
	if err != nil {
		return StateHash{}, fmt.Errorf("%w: %w", ErrNotBackup, err)
	}
	if _, err := conn.Exec(context.Background(), "CHECKPOINT"); err != nil {
		return StateHash{}, fmt.Errorf("checkpoint: %w", err)
	}
	return h, nil
}

// backupHash is the state hash of the backup open on conn, at idx, computed
// as a node computes its own: with the applier's pinned settings, which on
// a database no client has used are its defaults, in one transaction.
func backupHash(conn *engine.Conn, idx uint64) (StateHash, error) {
	ctx := context.Background()
	if _, err := readPins(conn); err != nil {
		return StateHash{}, err
	}
	if err := conn.Begin(ctx); err != nil {
		return StateHash{}, err
	}
	defer conn.Rollback(ctx)
	schema, err := hashSchema(ctx, conn)
	if err != nil {
		return StateHash{}, err
	}
	return hashRows(ctx, conn, idx, schema)
}

// metaColumns lists each table of the metadata schema with its columns,
// one "table: name TYPE [NOT NULL], ..." line per table.
const metaColumns = `SELECT table_name || ': ' || string_agg(column_name || ' ' || data_type ||
	CASE WHEN is_nullable THEN '' ELSE ' NOT NULL' END, ', ' ORDER BY column_index)
	FROM duckdb_columns() WHERE database_name = current_database() AND schema_name = '` + metaSchema + `'
	GROUP BY table_name ORDER BY table_name`

// checkMetaTables checks that the metadata tables on conn have the columns
// the FSM creates (metaDDL), and that the applied table holds its one row.
// The stages and staged_entries tables may be missing: backups taken
// before they existed lack them, and the FSM creates them when it opens the
// database.
func checkMetaTables(conn *engine.Conn) error {
	ctx := context.Background()
	want, err := metaTables()
	if err != nil {
		return err
	}
	lines, err := conn.QueryStrings(ctx, metaColumns)
	if err != nil {
		return fmt.Errorf("read the %s schema: %w", metaSchema, err)
	}
	if len(lines) == 0 {
		return fmt.Errorf("it has no %s schema with an applied index", metaSchema)
	}
	got := tableLines(lines)
	for table, cols := range want {
		switch have, ok := got[table]; {
		case !ok && (table == "stages" || table == "staged_entries"):
		case !ok:
			return fmt.Errorf("it has no table %s.%s", metaSchema, table)
		case have != cols:
			return fmt.Errorf("table %s.%s has columns (%s), not (%s)", metaSchema, table, have, cols)
		}
	}
	row, err := conn.QueryRow(ctx, `SELECT count(*)::BIGINT, count(*) FILTER (WHERE id = 1)::BIGINT FROM "`+metaSchema+`".applied`)
	if err != nil {
		return fmt.Errorf("read %s.applied: %w", metaSchema, err)
	}
	if all, one := row[0].(int64), row[1].(int64); all != 1 || one != 1 {
		return fmt.Errorf("table %s.applied holds %d rows, %d of them with id 1; duckraft keeps exactly one, id 1", metaSchema, all, one)
	}
	return nil
}

// metaTables returns the columns of each metadata table as metaColumns
// reads them, from a fresh in-memory database where metaDDL created them.
func metaTables() (map[string]string, error) {
	db, err := engine.Open("", engine.Options{Threads: 1})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	conn, err := db.Connect()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, ddl := range metaDDL {
		if _, err := conn.Exec(context.Background(), ddl); err != nil {
			return nil, fmt.Errorf("create metadata: %w", err)
		}
	}
	lines, err := conn.QueryStrings(context.Background(), metaColumns)
	if err != nil {
		return nil, fmt.Errorf("read the %s schema: %w", metaSchema, err)
	}
	return tableLines(lines), nil
}

// tableLines splits metaColumns' lines into table → columns.
func tableLines(lines []string) map[string]string {
	out := make(map[string]string, len(lines))
	for _, l := range lines {
		table, cols, _ := strings.Cut(l, ": ")
		out[table] = cols
	}
	return out
}

// ReadBackupHash reads the state hash recorded beside the backup at path
// (path + BackupHashSuffix); ok is false when there is none.
func ReadBackupHash(path string) (h StateHash, ok bool, err error) {
	b, err := os.ReadFile(path + BackupHashSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return StateHash{}, false, nil
	}
	if err != nil {
		return StateHash{}, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || h.Index == 0 || h.Hash == "" {
		return StateHash{}, false, fmt.Errorf("%s%s is not a recorded state hash (JSON with applied_index, hash and rows): %v", path, BackupHashSuffix, err)
	}
	return h, true, nil
}

// WriteBackupHash records h beside the backup at path (path +
// BackupHashSuffix), atomically: written beside, synced and renamed.
func WriteBackupHash(path string, h StateHash) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	dst := path + BackupHashSuffix
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(dst))
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
	s.fsm.readsStages(snap)
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
