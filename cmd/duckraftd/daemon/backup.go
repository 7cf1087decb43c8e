package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/duckraft/duckraft/cmd/internal/s3backup"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// Defaults of scheduled backups (Config.BackupEvery, Config.BackupKeep).
const (
	DefaultBackupEvery = time.Hour
	DefaultBackupKeep  = 7
)

// backupTmpPrefix names the directories in the data directory where a
// backup asked for over the API is written before it is sent; a node
// removes those a crash left behind when it starts.
const backupTmpPrefix = "backup-tmp-"

// backupStamp is the time in a scheduled backup's name: UTC, fixed width,
// so names sort by time.
const backupStamp = "20060102T150405.000Z"

// backupName matches the names of scheduled backups, which retention
// counts: duckraft-<time>-<index>.duckdb.
var backupName = regexp.MustCompile(`^duckraft-\d{8}T\d{6}\.\d{3}Z-\d+\.duckdb$`)

// BackupStats are what the scheduled backups of this node did, for
// metrics and the status page.
type BackupStats struct {
	// Taken and Failed count scheduled backups written and failed.
	Taken, Failed uint64
	// LastSuccess is when the last backup written finished; LastIndex,
	// LastBytes and LastDuration describe it.
	LastSuccess  time.Time
	LastIndex    uint64
	LastBytes    int64
	LastDuration time.Duration
	// LastError is the last failure's, empty after a success.
	LastError string
}

// backups is a node's backup state: one backup is written at a time,
// whether asked for over the API or scheduled, since each takes a copy's
// worth of disk and a pass over the database.
type backups struct {
	mu sync.Mutex

	statsMu sync.Mutex
	stats   BackupStats

	// schedule writes the scheduled backups; stopping it abandons a
	// backup being written.
	schedule leaderSchedule
}

// BackupStats returns what this node's scheduled backups did so far.
func (d *Daemon) BackupStats() BackupStats {
	d.backups.statsMu.Lock()
	defer d.backups.statsMu.Unlock()
	return d.backups.stats
}

// serveBackup writes a backup for BackupPath into a temporary directory of
// the data directory and sends it. A second backup asked for while one is
// written is refused (CodeBusy) rather than queued: each holds a copy on
// disk.
func (d *Daemon) serveBackup(ctx context.Context, send nodeapi.BackupSend) error {
	if !d.backups.mu.TryLock() {
		return nodeapi.Errorf(nodeapi.CodeBusy, "%s is already writing a backup; retry later", d.cfg.ID)
	}
	defer d.backups.mu.Unlock()
	dir, err := os.MkdirTemp(d.cfg.DataDir, backupTmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "backup.duckdb")
	start := time.Now()
	h, err := d.store.WriteBackup(ctx, path)
	if err != nil {
		d.log.Warn("backup failed", "err", err)
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	err = send(nodeapi.StateHash{Index: h.Index, Hash: h.Hash, Rows: h.Rows}, f, st.Size())
	d.log.Info("backup sent", "applied", h.Index, "bytes", st.Size(), "took", time.Since(start), "err", err)
	return err
}

// removeStaleBackupTmp removes the temporary backup directories a crash
// left in the data directory.
func removeStaleBackupTmp(dataDir string) error {
	stale, err := filepath.Glob(filepath.Join(dataDir, backupTmpPrefix+"*"))
	if err != nil {
		return err
	}
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove a stale backup: %w", err)
		}
	}
	return nil
}

// backupTarget is where scheduled backups go: a directory (--backup-dir)
// or a prefix in an object store (--backup-to).
type backupTarget interface {
	// write writes one backup of d, taken at start, and returns where it
	// went, its size and applied index.
	write(ctx context.Context, d *Daemon, start time.Time) (where string, size int64, index uint64, err error)
	// prune deletes the oldest backups beyond the newest keep.
	prune(ctx context.Context, keep int) error
	String() string
}

// scheduledName is the name of the scheduled backup taken at start at
// applied index idx; backupName matches it, and names sort by time.
func scheduledName(start time.Time, idx uint64) string {
	return fmt.Sprintf("duckraft-%s-%d.duckdb", start.UTC().Format(backupStamp), idx)
}

// startBackups starts the scheduled backups when a backup directory or
// object store prefix is set. Every node runs the schedule, and at each
// tick only the node that leads then writes: the leader has applied
// everything committed, and exactly one node writes per tick, whichever
// leads.
func (d *Daemon) startBackups() error {
	c := d.cfg
	if c.BackupDir == "" && c.BackupTo == "" {
		return nil
	}
	every, keep := c.BackupEvery, c.BackupKeep
	if every <= 0 {
		every = DefaultBackupEvery
	}
	if keep <= 0 {
		keep = DefaultBackupKeep
	}
	var target backupTarget
	var err error
	if c.BackupTo != "" {
		target, err = d.objectTarget()
	} else {
		target, err = d.dirTarget()
	}
	if err != nil {
		return err
	}
	d.backups.schedule.start(every, d.store.IsLeader, func(ctx context.Context) {
		d.scheduledBackup(ctx, target, keep)
	})
	d.log.Info("scheduled backups", "to", target.String(), "every", every, "keep", keep)
	return nil
}

// dirTarget makes the backup directory, and removes the partial files a
// crash of this node left there.
func (d *Daemon) dirTarget() (backupTarget, error) {
	c := d.cfg
	if err := os.MkdirAll(c.BackupDir, 0o750); err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	partials, err := filepath.Glob(filepath.Join(c.BackupDir, partialPrefix(c.ID)+"*"))
	if err != nil {
		return nil, err
	}
	for _, p := range partials {
		os.RemoveAll(p)
	}
	return dirTarget{dir: c.BackupDir, id: c.ID}, nil
}

// stopBackups stops the schedule and waits for a backup being written,
// which is abandoned: a scheduled one, or one asked for over the API,
// whose request ended when the server closed its connection.
func (d *Daemon) stopBackups() {
	d.backups.schedule.stop()
	d.backups.mu.Lock()
	defer d.backups.mu.Unlock()
}

// partialPrefix names the files a node's scheduled backups are written to
// before they are complete: a crash leaves them, never a file with a
// backup's name.
func partialPrefix(id string) string { return ".partial-" + id + "-" }

// scheduledBackup writes one backup to target and then deletes the oldest
// backups beyond keep.
func (d *Daemon) scheduledBackup(ctx context.Context, target backupTarget, keep int) {
	d.backups.mu.Lock()
	defer d.backups.mu.Unlock()
	start := time.Now()
	name, size, idx, err := target.write(ctx, d, start)
	took := time.Since(start)
	if err != nil && ctx.Err() != nil {
		// Abandoned because the node stops: not a failure of backups.
		d.log.Info("scheduled backup abandoned: the node stops", "to", target.String())
		return
	}
	d.backups.statsMu.Lock()
	if err != nil {
		d.backups.stats.Failed++
		d.backups.stats.LastError = err.Error()
	} else {
		d.backups.stats.Taken++
		d.backups.stats.LastSuccess = time.Now()
		d.backups.stats.LastIndex, d.backups.stats.LastBytes, d.backups.stats.LastDuration = idx, size, took
		d.backups.stats.LastError = ""
	}
	d.backups.statsMu.Unlock()
	if err != nil {
		d.log.Error("scheduled backup failed", "to", target.String(), "err", err)
		return
	}
	d.log.Info("scheduled backup written", "file", name, "applied", idx, "bytes", size, "took", took)
	if err := target.prune(ctx, keep); err != nil {
		d.log.Error("scheduled backups: retention", "to", target.String(), "err", err)
	}
}

// dirTarget writes scheduled backups into a directory, atomically (a
// partial file, synced, renamed, the directory synced), each with its
// state hash beside it.
type dirTarget struct{ dir, id string }

func (t dirTarget) String() string { return t.dir }

func (t dirTarget) prune(_ context.Context, keep int) error { return pruneBackups(t.dir, keep) }

func (t dirTarget) write(ctx context.Context, d *Daemon, start time.Time) (string, int64, uint64, error) {
	tmp := filepath.Join(t.dir, partialPrefix(t.id)+start.UTC().Format(backupStamp)+".duckdb")
	h, err := d.store.WriteBackup(ctx, tmp)
	if err != nil {
		return "", 0, 0, err
	}
	st, err := os.Stat(tmp)
	if err != nil {
		os.Remove(tmp)
		return "", 0, 0, err
	}
	name := filepath.Join(t.dir, scheduledName(start, h.Index))
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return "", 0, 0, fmt.Errorf("backup: %w", err)
	}
	if err := syncDir(t.dir); err != nil {
		return name, st.Size(), h.Index, fmt.Errorf("backup: sync %s: %w", t.dir, err)
	}
	if err := replication.WriteBackupHash(name, h); err != nil {
		return name, st.Size(), h.Index, fmt.Errorf("backup %s written, its state hash not recorded: %w", name, err)
	}
	return name, st.Size(), h.Index, nil
}

// pruneBackups deletes the oldest backups in dir beyond the newest keep,
// each with the state hash recorded beside it. Only files named as
// scheduled backups count; nothing else is touched.
func pruneBackups(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && backupName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	var errs []error
	for len(names) > keep {
		path := filepath.Join(dir, names[0])
		errs = append(errs, os.Remove(path))
		for _, beside := range []string{path + replication.BackupHashSuffix, path + replication.BackupHashSuffix + ".tmp"} {
			if err := os.Remove(beside); !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		names = names[1:]
	}
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// checkRestore checks what --restore needs: a new cluster's first node,
// and a data directory with nothing in it but perhaps the token and the
// cluster key (kept from an earlier attempt that was refused).
func checkRestore(c Config) error {
	if c.Router || c.Replica || c.Join != "" {
		return errors.New("--restore seeds a new cluster on its first node: it excludes --join, --replica and --router (the other nodes join it and receive the data as a Raft snapshot)")
	}
	if s3backup.IsURL(c.Restore) {
		if _, err := s3backup.ParseObject(c.Restore); err != nil {
			return fmt.Errorf("--restore: %w", err)
		}
	} else if _, err := os.Stat(c.Restore); err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	entries, err := os.ReadDir(c.DataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	var found []string
	for _, e := range entries {
		// A backup-tmp- directory is what a crash left of a download from
		// an object store; the node removes it before it restores.
		if e.Name() != "token" && e.Name() != KeyFileName && !strings.HasPrefix(e.Name(), backupTmpPrefix) {
			found = append(found, e.Name())
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s holds %v; restore into a new, empty data directory", ErrDataDirNotEmpty, c.DataDir, found)
	}
	return nil
}

// ErrDataDirNotEmpty is why --restore refuses a data directory that already
// holds a database or Raft state: restoring replaces a cluster's data, which
// is done by starting a new cluster, never over a live one.
var ErrDataDirNotEmpty = errors.New("--restore needs an empty data directory")

// restore installs the backup Config.Restore as the node's database,
// checked against the state hash recorded beside it when there is one.
func (d *Daemon) restore(dbPath string) error {
	if s3backup.IsURL(d.cfg.Restore) {
		return d.restoreObject(dbPath)
	}
	return d.restoreFile(d.cfg.Restore, dbPath)
}

// restoreFile installs the backup file from as the node's database.
func (d *Daemon) restoreFile(from, dbPath string) error {
	want, recorded, err := replication.ReadBackupHash(from)
	if err != nil {
		return fmt.Errorf("--restore: %w; remove it to restore without the check", err)
	}
	var wantp *replication.StateHash
	if recorded {
		wantp = &want
	} else {
		d.log.Warn("restore: no state hash recorded beside the backup; its contents are checked but not against a hash",
			"file", from, "hash_file", from+replication.BackupHashSuffix)
	}
	h, err := replication.InstallBackup(from, dbPath, wantp)
	if err != nil {
		return err
	}
	d.log.Info("restored a backup: this node bootstraps a new cluster at its index", "file", from, "applied", h.Index,
		"rows", h.Rows, "hash", h.Hash, "hash_checked", recorded)
	return nil
}
