package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/duckraft/duckraft/cmd/internal/s3backup"
	"github.com/duckraft/duckraft/replication"
)

// openStoreTimeout bounds finding credentials at start, which may ask an
// instance's metadata service.
const openStoreTimeout = 30 * time.Second

// checkBackupConfig checks the object store locations of Config before
// anything starts: a bad URL is refused with the flag's name.
func checkBackupConfig(c Config) error {
	if c.BackupTo == "" {
		return nil
	}
	if c.BackupDir != "" {
		return errors.New("--backup-dir and --backup-to exclude each other: scheduled backups go to one place")
	}
	if _, err := s3backup.ParsePrefix(c.BackupTo); err != nil {
		return fmt.Errorf("--backup-to: %w", err)
	}
	return nil
}

// objectTarget writes scheduled backups to a prefix of an object store
// (--backup-to): each is written into a temporary directory of the data
// directory, uploaded, and then the state hash recorded for it is
// uploaded beside it; the local copy goes.
type objectTarget struct {
	store   *s3backup.Store
	prefix  s3backup.Location
	dataDir string
}

// objectTarget opens the object store of Config.BackupTo; a node without
// credentials for it does not start.
func (d *Daemon) objectTarget() (backupTarget, error) {
	prefix, err := s3backup.ParsePrefix(d.cfg.BackupTo)
	if err != nil {
		return nil, fmt.Errorf("--backup-to: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), openStoreTimeout)
	defer cancel()
	store, err := s3backup.Open(ctx, d.log)
	if err != nil {
		return nil, fmt.Errorf("--backup-to %s: %w", prefix, err)
	}
	return objectTarget{store: store, prefix: prefix, dataDir: d.cfg.DataDir}, nil
}

func (t objectTarget) String() string { return t.prefix.String() }

func (t objectTarget) write(ctx context.Context, d *Daemon, start time.Time) (string, int64, uint64, error) {
	dir, err := os.MkdirTemp(t.dataDir, backupTmpPrefix+"*")
	if err != nil {
		return "", 0, 0, fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "backup.duckdb")
	h, err := d.store.WriteBackup(ctx, path)
	if err != nil {
		return "", 0, 0, err
	}
	hash, err := json.Marshal(h)
	if err != nil {
		return "", 0, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", 0, 0, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", 0, 0, fmt.Errorf("backup: %w", err)
	}
	to := t.prefix.Child(scheduledName(start, h.Index))
	recorded := func() ([]byte, error) { return append(hash, '\n'), nil }
	if _, err := t.store.Put(ctx, to, f, st.Size(), recorded); err != nil {
		return "", 0, 0, err
	}
	return to.String(), st.Size(), h.Index, nil
}

// prune deletes the oldest backups under the prefix beyond the newest
// keep: each backup object, then its hash object, so that no reader finds
// a backup without its hash. Only objects named as scheduled backups
// count; nothing else is touched.
func (t objectTarget) prune(ctx context.Context, keep int) error {
	all, err := t.store.List(ctx, t.prefix)
	if err != nil {
		return err
	}
	var names []string
	for _, n := range all {
		if backupName.MatchString(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var errs []error
	for len(names) > keep {
		o := t.prefix.Child(names[0])
		err := t.store.Delete(ctx, o)
		if err == nil {
			err = t.store.Delete(ctx, t.prefix.Child(names[0]+s3backup.HashSuffix))
		}
		errs = append(errs, err)
		names = names[1:]
	}
	return errors.Join(errs...)
}

// restoreObject restores Config.Restore, an object (s3://bucket/key): it
// downloads the backup and the state hash recorded beside it into a
// temporary directory of the data directory and installs the backup as a
// local one, checked against that hash. Unlike a local file, a backup
// without its hash object is refused: an object store is where a backup
// still being uploaded has none yet.
func (d *Daemon) restoreObject(dbPath string) error {
	from := d.cfg.Restore
	loc, err := s3backup.ParseObject(from)
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	ctx := context.Background()
	octx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	store, err := s3backup.Open(octx, d.log)
	cancel()
	if err != nil {
		return fmt.Errorf("--restore %s: %w", from, err)
	}
	dir, err := os.MkdirTemp(d.cfg.DataDir, backupTmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "backup.duckdb")
	start := time.Now()
	d.log.Info("restore: downloading the backup", "from", from)
	if err := store.Get(ctx, loc, local); err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	st, err := os.Stat(local)
	if err != nil {
		return fmt.Errorf("--restore: %w", err)
	}
	d.log.Info("restore: downloaded", "from", from, "bytes", st.Size(), "took", time.Since(start))
	want, _, err := replication.ReadBackupHash(local)
	if err != nil {
		return fmt.Errorf("--restore %s: the object %s%s: %w", from, from, s3backup.HashSuffix, err)
	}
	h, err := replication.InstallBackup(local, dbPath, &want)
	if err != nil {
		return fmt.Errorf("--restore %s: %w", from, err)
	}
	d.log.Info("restored a backup: this node bootstraps a new cluster at its index", "from", from, "applied", h.Index,
		"rows", h.Rows, "hash", h.Hash, "hash_checked", true)
	return nil
}
