package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/cmd/internal/s3backup"
	"github.com/duckraft/duckraft/cmd/internal/s3backup/s3test"
	"github.com/duckraft/duckraft/internal/syncbuf"
	"github.com/duckraft/duckraft/replication"
)

// TestScheduledBackupsToS3: --backup-to writes each scheduled backup and
// its hash as objects under the prefix of a real S3-compatible server,
// keeps the newest --backup-keep, touches no other object, and the newest
// restores with --restore s3://…, checked against its hash; no log line
// holds a credential.
func TestScheduledBackupsToS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft, gossip and an S3 server")
	}
	srv := s3test.Start(t)
	srv.Env(t)
	srv.CreateBucket(t, "backups")
	others := []string{"nightly/notes.txt", "nightly/old/duckraft-20200101T000000.000Z-1.duckdb", "nightly2/duckraft-20200101T000000.000Z-1.duckdb"}
	for _, k := range others {
		srv.Put(t, "backups", k, []byte("an operator's object"))
	}
	var log syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := startNode(t, Config{BackupTo: "s3://backups/nightly/", BackupEvery: 300 * time.Millisecond, BackupKeep: 2, Logger: logger})
	query(t, d, "CREATE TABLE t AS SELECT range AS i FROM range(1000)")
	deadline := time.Now().Add(90 * time.Second)
	for d.BackupStats().Taken < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("scheduled backups after 90s: %+v", d.BackupStats())
		}
		query(t, d, "INSERT INTO t VALUES (1)")
		time.Sleep(100 * time.Millisecond)
	}
	// The credentials are in the node's environment; no client reads them.
	for _, q := range []string{"SELECT getenv('AWS_SECRET_ACCESS_KEY')", "SELECT content FROM read_text('/proc/self/environ')"} {
		if v, err := queryErr(t, d, q); err == nil || strings.Contains(fmt.Sprint(v), srv.Secret) {
			t.Fatalf("%s: %v, %v; want it refused", q, v, err)
		} else {
			t.Logf("%s: refused: %v", q, err)
		}
	}
	d.Close()
	st := d.BackupStats()
	if st.Failed != 0 || st.LastIndex == 0 || st.LastBytes == 0 {
		t.Fatalf("stats %+v", st)
	}
	if tmp, _ := filepath.Glob(filepath.Join(d.cfg.DataDir, backupTmpPrefix+"*")); len(tmp) != 0 {
		t.Fatalf("local copies left: %v", tmp)
	}
	keys := srv.Keys(t, "backups")
	var backups []string
	name := regexp.MustCompile(`^nightly/duckraft-\d{8}T\d{6}\.\d{3}Z-\d+\.duckdb$`)
	for _, k := range keys {
		if name.MatchString(k) {
			backups = append(backups, k)
		}
	}
	want := append(slices.Clone(others), backups[0], backups[0]+".hash", backups[1], backups[1]+".hash")
	slices.Sort(want)
	if len(backups) != 2 || !slices.Equal(keys, want) {
		t.Fatalf("bucket holds %v; want the 2 newest backups, each with its hash, and the operator's objects", keys)
	}
	newest := backups[1]
	var h replication.StateHash
	if err := json.Unmarshal(srv.Get(t, "backups", newest+".hash"), &h); err != nil || h.Index != st.LastIndex ||
		!strings.HasSuffix(newest, "-"+strconv.FormatUint(st.LastIndex, 10)+".duckdb") {
		t.Fatalf("newest %s with hash %+v (%v); last index %d", newest, h, err, st.LastIndex)
	}

	r := startNode(t, Config{Restore: "s3://backups/" + newest, Logger: logger})
	if got := query(t, r, "SELECT count(*) >= 1000 FROM t"); got != true {
		t.Fatalf("restored backup: %v", got)
	}
	if rh, err := r.store.StateHash(context.Background()); err != nil || rh.Hash != h.Hash {
		t.Fatalf("restored state hash %+v, %v; the backup's %+v", rh, err, h)
	}
	out := log.String()
	if !strings.Contains(out, "hash_checked=true") || !strings.Contains(out, "scheduled backup written") {
		t.Fatalf("the log lacks the backups or the checked restore:\n%s", out)
	}
	if strings.Contains(out, srv.Secret) || strings.Contains(out, srv.AccessKey) {
		t.Fatalf("the log holds a credential:\n%s", out)
	}
}

// TestRestoreFromS3Refuses: --restore s3://… of a tampered object, of a
// backup without its hash object or with a malformed one, of a missing
// object or bucket, with wrong or no credentials, or of a bad URL is
// refused with the reason, and the data directory is left as it was.
func TestRestoreFromS3Refuses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft, gossip and an S3 server")
	}
	srv := s3test.Start(t)
	srv.Env(t)
	srv.CreateBucket(t, "backups")
	src := startNode(t, Config{})
	query(t, src, "CREATE TABLE t AS SELECT range AS i FROM range(50000)")
	good, h, err := backupOf(t, src, src.Token())
	if err != nil {
		t.Fatal(err)
	}
	query(t, src, "INSERT INTO t VALUES (-1)")
	other, _, err := backupOf(t, src, src.Token())
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hash, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	damaged := read(good)
	for i := 16 << 10; i < len(damaged); i += 4096 {
		damaged[i] ^= 0xff
	}
	for key, body := range map[string][]byte{
		"good.duckdb": read(good), "good.duckdb.hash": hash,
		// Another backup of the same cluster under the good one's hash:
		// a valid duckraft backup, with one row more than recorded.
		"swapped.duckdb": read(other), "swapped.duckdb.hash": hash,
		"damaged.duckdb": damaged, "damaged.duckdb.hash": hash,
		"nohash.duckdb":  read(good),
		"badhash.duckdb": read(good), "badhash.duckdb.hash": []byte("not json"),
	} {
		srv.Put(t, "backups", key, body)
	}
	for _, tc := range []struct {
		name string
		url  string
		env  map[string]string
		is   error
		says string
	}{
		{"backup swapped under another's hash", "s3://backups/swapped.duckdb", nil, replication.ErrBackupHashMismatch, "not the one recorded"},
		{"damaged object", "s3://backups/damaged.duckdb", nil, replication.ErrNotBackup, "not a duckraft backup"},
		{"no hash object", "s3://backups/nohash.duckdb", nil, s3backup.ErrNoHash, "s3://backups/nohash.duckdb"},
		{"malformed hash object", "s3://backups/badhash.duckdb", nil, nil, "is not a recorded state hash"},
		{"missing object", "s3://backups/missing.duckdb", nil, s3backup.ErrNotFound, "s3://backups/missing.duckdb"},
		{"missing bucket", "s3://nobucket/good.duckdb", nil, s3backup.ErrNoBucket, "no such bucket"},
		{"wrong secret", "s3://backups/good.duckdb", map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-" + srv.Secret}, s3backup.ErrDenied, "refused the credentials"},
		{"no credentials", "s3://backups/good.duckdb", map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, s3backup.ErrNoCredentials, "AWS_ACCESS_KEY_ID"},
		{"bad URL", "s3://Backups/good.duckdb", nil, s3backup.ErrBadURL, "bucket name"},
		{"URL of a prefix", "s3://backups/", nil, s3backup.ErrBadURL, "names no object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var log syncbuf.Buffer
			dir := t.TempDir()
			cfg := Config{ID: "n1", QuackAddr: freeAddr(t), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t), DataDir: dir,
				Token: "backup-test-token", Restore: tc.url, Logger: slog.New(slog.NewTextHandler(&log, nil))}
			d, err := Start(cfg)
			if err == nil {
				d.Close()
				t.Fatalf("--restore %s started a node", tc.url)
			}
			if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("--restore %s: %v; want %v saying %q", tc.url, err, tc.is, tc.says)
			}
			t.Logf("refused: %v", err)
			for _, s := range []string{err.Error(), log.String()} {
				if strings.Contains(s, srv.Secret) || strings.Contains(s, srv.AccessKey) {
					t.Fatalf("a credential in the error or the log: %s", s)
				}
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name() != "token" && e.Name() != KeyFileName {
					t.Fatalf("a refused restore left %s in the data directory", e.Name())
				}
			}
		})
	}
	// The good one restores, checked, into a data directory where a
	// download cut short by a crash was left.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, backupTmpPrefix+"123"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, backupTmpPrefix+"123", "backup.duckdb"), []byte("half a download"), 0o600); err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	r := startNode(t, Config{DataDir: dir, Restore: "s3://backups/good.duckdb", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if tmp, _ := filepath.Glob(filepath.Join(dir, backupTmpPrefix+"*")); len(tmp) != 0 {
		t.Fatalf("temporary downloads left: %v", tmp)
	}
	if rh, err := r.store.StateHash(context.Background()); err != nil || rh.Hash != h.Hash || rh.Rows != h.Rows {
		t.Fatalf("restored state hash %+v, %v; the backup's %+v", rh, err, h)
	}
	if !strings.Contains(log.String(), "hash_checked=true") {
		t.Fatalf("the restore did not check the hash:\n%s", log.String())
	}
}

// TestBackupToRefused: --backup-to with --backup-dir, with a bad URL or
// without credentials stops the start with the reason.
func TestBackupToRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, tc := range []struct {
		name string
		cfg  Config
		is   error
		says string
	}{
		{"with --backup-dir", Config{BackupTo: "s3://backups/p", BackupDir: t.TempDir()}, nil, "exclude each other"},
		{"bad URL", Config{BackupTo: "s3://b/p"}, s3backup.ErrBadURL, "--backup-to"},
		{"not s3", Config{BackupTo: "/backups"}, s3backup.ErrBadURL, "does not start with s3://"},
		{"no credentials", Config{BackupTo: "s3://backups/p"}, s3backup.ErrNoCredentials, "--backup-to s3://backups/p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.ID, cfg.QuackAddr, cfg.RaftAddr, cfg.GossipAddr = "n1", freeAddr(t), freeAddr(t), freeAddr(t)
			cfg.DataDir, cfg.Token = t.TempDir(), "backup-test-token"
			d, err := Start(cfg)
			if err == nil {
				d.Close()
				t.Fatal("started")
			}
			if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v; want %v saying %q", err, tc.is, tc.says)
			}
			t.Logf("refused: %v", err)
		})
	}
}
