package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/internal/syncbuf"
	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// startNode starts a single-node cluster with cfg's backup and restore
// fields and waits until it leads.
func startNode(t *testing.T, cfg Config) *Daemon {
	t.Helper()
	cfg.ID, cfg.QuackAddr, cfg.RaftAddr, cfg.GossipAddr = "n1", freeAddr(t), freeAddr(t), freeAddr(t)
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Token = "backup-test-token"
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.store.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return d
}

// backupOf takes a backup of d over its API into a file and returns it.
func backupOf(t *testing.T, d *Daemon, cred string) (string, nodeapi.StateHash, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var buf bytes.Buffer
	h, err := (&nodeapi.Client{Token: cred}).Backup(ctx, d.QuackAddr(), &buf)
	if err != nil {
		return "", h, err
	}
	path := filepath.Join(t.TempDir(), "backup.duckdb")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, h, nil
}

// TestRestoreRefuses: --restore starts only a new cluster's first node on
// an empty data directory from a file that is a duckraft backup, and says
// why otherwise; a refused restore leaves no database behind.
func TestRestoreRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	src := startNode(t, Config{})
	query(t, src, "CREATE TABLE t AS SELECT range AS i FROM range(100000)")
	good, _, err := backupOf(t, src, src.Token())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := backupOf(t, src, "not-the-token"); nodeapi.CodeOf(err) != nodeapi.CodeUnauthorized {
		t.Fatalf("backup without the token: %v, want %s", err, nodeapi.CodeUnauthorized)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	text := write("text.duckdb", []byte("SELECT 'this is not a database';\n"))
	truncated := write("truncated.duckdb", whole[:len(whole)/2])
	damaged := slices.Clone(whole)
	for i := 16 << 10; i < len(damaged); i += 4096 {
		damaged[i] ^= 0xff
	}
	flipped := write("damaged.duckdb", damaged)
	plain := filepath.Join(dir, "plain.duckdb")
	plainDB(t, plain)

	nonEmpty := t.TempDir()
	write2 := filepath.Join(nonEmpty, "duckraft.db")
	if err := os.WriteFile(write2, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		is      error
		message string
	}{
		{"non-empty data directory", Config{Restore: good, DataDir: nonEmpty}, ErrDataDirNotEmpty, "needs an empty data directory"},
		{"not a DuckDB file", Config{Restore: text}, replication.ErrNotBackup, "DuckDB cannot open it"},
		{"truncated backup", Config{Restore: truncated}, replication.ErrNotBackup, "not a duckraft backup"},
		{"damaged backup", Config{Restore: flipped}, replication.ErrNotBackup, "not a duckraft backup"},
		{"DuckDB file without duckraft's index", Config{Restore: plain}, replication.ErrNotBackup, "no _duckraft schema"},
		{"missing file", Config{Restore: filepath.Join(dir, "missing.duckdb")}, os.ErrNotExist, "--restore"},
		{"joining node", Config{Restore: good, Join: "127.0.0.1:1"}, nil, "excludes --join"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.DataDir == "" {
				cfg.DataDir = t.TempDir()
			}
			cfg.ID, cfg.QuackAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.Token = "r1", freeAddr(t), freeAddr(t), freeAddr(t), "backup-test-token"
			d, err := Start(cfg)
			if err == nil {
				d.Close()
				t.Fatal("restore started")
			}
			if (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want %v saying %q", err, tc.is, tc.message)
			}
			t.Logf("refused: %v", err)
			if tc.cfg.DataDir == "" {
				if _, err := os.Stat(filepath.Join(cfg.DataDir, "duckraft.db")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a refused restore left a database: %v", err)
				}
			}
		})
	}

	t.Run("good backup", func(t *testing.T) {
		d := startNode(t, Config{Restore: good})
		if got := query(t, d, "SELECT count(*) FROM t"); got != int64(100000) {
			t.Fatalf("restored %v rows, want 100000", got)
		}
	})
}

// plainDB creates a DuckDB database at path that duckraft never wrote.
func plainDB(t *testing.T, path string) {
	t.Helper()
	db, err := engine.Open(path, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Exec(context.Background(), "CREATE TABLE t AS SELECT 1 AS i"); err != nil {
		t.Fatal(err)
	}
}

// TestScheduledBackups: the leader writes a backup every BackupEvery into
// BackupDir, named by time and index, and keeps the newest BackupKeep;
// files that are not its backups are left alone; its stats count them.
func TestScheduledBackups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("operator's file"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startNode(t, Config{BackupDir: dir, BackupEvery: 300 * time.Millisecond, BackupKeep: 2, HTTPAddr: freeAddr(t)})
	query(t, d, "CREATE TABLE t AS SELECT range AS i FROM range(1000)")
	deadline := time.Now().Add(60 * time.Second)
	for d.BackupStats().Taken < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("scheduled backups after 60s: %+v", d.BackupStats())
		}
		query(t, d, "INSERT INTO t VALUES (1)")
		time.Sleep(100 * time.Millisecond)
	}
	// The metrics say what BackupStats says.
	code, body := opsGet(t, d, http.MethodGet, MetricsPath, "backup-test-token")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %q", code, body)
	}
	taken := 0
	if m := regexp.MustCompile(`duckraft_scheduled_backups_total\{node="n1",outcome="ok"\} (\d+)`).FindStringSubmatch(body); m != nil {
		taken, _ = strconv.Atoi(m[1])
	}
	if taken < 5 {
		t.Errorf("/metrics: %d scheduled backups ok, want at least 5", taken)
	}
	for _, want := range []string{`duckraft_scheduled_backups_total{node="n1",outcome="error"} 0`, `duckraft_backup_last_size_bytes{node="n1"} `,
		`duckraft_backup_last_success_timestamp_seconds{node="n1"} 1.`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	d.Close()
	st := d.BackupStats()
	if st.Failed != 0 || st.LastSuccess.IsZero() || st.LastBytes == 0 || st.LastIndex == 0 {
		t.Fatalf("stats %+v", st)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	name := regexp.MustCompile(`^duckraft-\d{8}T\d{6}\.\d{3}Z-(\d+)\.duckdb$`)
	if len(names) != 5 || names[4] != "notes.txt" || !name.MatchString(names[0]) || !name.MatchString(names[2]) ||
		names[1] != names[0]+replication.BackupHashSuffix || names[3] != names[2]+replication.BackupHashSuffix {
		t.Fatalf("backup directory holds %v; want the 2 newest backups, each with its hash, and notes.txt", names)
	}
	if !strings.HasSuffix(names[2], "-"+strconv.FormatUint(st.LastIndex, 10)+".duckdb") {
		t.Fatalf("newest backup %s, last index %d", names[2], st.LastIndex)
	}
	newest := filepath.Join(dir, names[2])
	if h, ok, err := replication.ReadBackupHash(newest); err != nil || !ok || h.Index != st.LastIndex {
		t.Fatalf("recorded hash of %s: %+v, %v, %v; want one at index %d", names[2], h, ok, err, st.LastIndex)
	}
	// The newest one restores, checked against its hash.
	var log syncbuf.Buffer
	r := startNode(t, Config{Restore: newest, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if got := query(t, r, "SELECT count(*) >= 1000 FROM t"); got != true {
		t.Fatalf("restored backup: %v", got)
	}
	if !strings.Contains(log.String(), "hash_checked=true") {
		t.Fatalf("the restore did not check the recorded hash:\n%s", log.String())
	}
}

func TestPruneBackups(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files, want []string
		keep        int
	}{
		{"fewer than keep", []string{"duckraft-20260101T000000.000Z-5.duckdb"}, []string{"duckraft-20260101T000000.000Z-5.duckdb"}, 2},
		{"oldest go, by time not index", []string{
			"duckraft-20260101T000000.000Z-90.duckdb", "duckraft-20260102T000000.000Z-7.duckdb",
			"duckraft-20260103T000000.000Z-8.duckdb"}, []string{
			"duckraft-20260102T000000.000Z-7.duckdb", "duckraft-20260103T000000.000Z-8.duckdb"}, 2},
		{"recorded hashes go with their backups", []string{
			"duckraft-20260101T000000.000Z-1.duckdb", "duckraft-20260101T000000.000Z-1.duckdb.hash",
			"duckraft-20260101T000000.000Z-1.duckdb.hash.tmp", "duckraft-20260102T000000.000Z-2.duckdb",
			"duckraft-20260102T000000.000Z-2.duckdb.hash"}, []string{
			"duckraft-20260102T000000.000Z-2.duckdb", "duckraft-20260102T000000.000Z-2.duckdb.hash"}, 1},
		{"other files stay", []string{
			"duckraft-20260101T000000.000Z-1.duckdb", "duckraft-20260102T000000.000Z-2.duckdb",
			"duckraft-x.duckdb", ".partial-n1-20260101T000000.000Z.duckdb", "README"}, []string{
			".partial-n1-20260101T000000.000Z.duckdb", "README", "duckraft-20260102T000000.000Z-2.duckdb", "duckraft-x.duckdb"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := pruneBackups(dir, tc.keep); err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("left %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBackupClientGoesAway: a client that hangs up in the middle of a
// backup leaves no copy in the data directory and does not keep the next
// backup from running; one asked for while another is written is refused
// as busy.
func TestBackupClientGoesAway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	d := startNode(t, Config{})
	query(t, d, "CREATE TABLE t AS SELECT range AS i, md5(range::VARCHAR) AS s FROM range(2000000)")
	noCopyLeft := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			left, _ := filepath.Glob(filepath.Join(d.cfg.DataDir, backupTmpPrefix+"*"))
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the abandoned backup left %v", left)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Hung up while the node writes the file, before any answer.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if _, err := (&nodeapi.Client{Token: d.Token()}).Backup(ctx, d.QuackAddr(), io.Discard); err == nil {
		t.Fatal("a backup asked for by a client that hung up completed")
	}
	cancel()
	noCopyLeft()
	// Hung up while the node sends it.
	ctx, cancel = context.WithCancel(context.Background())
	w := &cancelAfter{n: 1 << 20, cancel: cancel}
	if _, err := (&nodeapi.Client{Token: d.Token()}).Backup(ctx, d.QuackAddr(), w); err == nil {
		t.Fatal("a backup read by a client that hung up completed")
	}
	noCopyLeft()

	d.backups.mu.Lock()
	_, _, err := backupOf(t, d, d.Token())
	d.backups.mu.Unlock()
	if nodeapi.CodeOf(err) != nodeapi.CodeBusy {
		t.Fatalf("a backup while another is written: %v, want %s", err, nodeapi.CodeBusy)
	}
	if _, h, err := backupOf(t, d, d.Token()); err != nil || h.Rows != 2000000 {
		t.Fatalf("the next backup: %+v, %v", h, err)
	}
}

// cancelAfter accepts n bytes, then cancels the request and fails.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.n -= len(p)
	if c.n <= 0 {
		c.cancel()
		return 0, errors.New("client went away")
	}
	return len(p), nil
}

// forge copies the backup at good to a new file and runs sqls on the copy
// with a plain DuckDB, as someone who hands an operator a doctored backup
// would.
func forge(t *testing.T, good string, sqls ...string) string {
	t.Helper()
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "forged.duckdb")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(path, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, sql := range sqls {
		if _, err := c.Exec(context.Background(), sql); err != nil {
			t.Fatalf("forge %q: %v", sql, err)
		}
	}
	if _, err := c.Exec(context.Background(), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRestoreForgedBackups: --restore of a doctored backup — an applied
// index no log reaches, none at all, a metadata table missing or of
// another shape, a damaged file, rows that are not those of the state hash
// recorded beside it — is refused with the reason and leaves nothing
// behind; it never panics or bootstraps a cluster from it. The backup with
// its own recorded hash restores, into the data directory a refused
// attempt left its token and cluster key in.
func TestRestoreForgedBackups(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	src := startNode(t, Config{})
	query(t, src, "CREATE TABLE t AS SELECT range AS i FROM range(1000)")
	good, h, err := backupOf(t, src, src.Token())
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	other := h
	other.Hash = strings.Repeat("ab", 32)
	otherHash, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	notBackup := replication.ErrNotBackup
	const (
		noMarkers = "DELETE FROM _duckraft.keys"
		setIdx    = "UPDATE _duckraft.applied SET idx = "
		marker    = "INSERT INTO _duckraft.keys VALUES ('', %s, 0, 0, NULL, NULL, NULL)"
	)
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	damaged := slices.Clone(whole)
	for i := len(damaged) / 3; i < len(damaged); i += 997 {
		damaged[i] ^= 0x5a
	}
	damagedFile := filepath.Join(t.TempDir(), "damaged.duckdb")
	if err := os.WriteFile(damagedFile, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		file    string
		hash    []byte // recorded beside the file, if not nil
		is      error  // the error wraps it, if not nil
		message string
	}{
		{"applied index 0", forge(t, good, noMarkers, setIdx+"0"), nil, notBackup, "applied index 0"},
		{"applied index 2^62", forge(t, good, noMarkers, setIdx+"4611686018427387904"), nil, notBackup, "applied index 4611686018427387904"},
		{"applied index 2^63", forge(t, good, setIdx+"9223372036854775808"), nil, notBackup, "applied index 9223372036854775808"},
		{"applied index 2^64-1", forge(t, good, setIdx+"18446744073709551615"), nil, notBackup, "applied index 18446744073709551615"},
		{"marker at 2^64-1", forge(t, good, fmt.Sprintf(marker, "18446744073709551615")), nil, notBackup, "applied index 18446744073709551615"},
		{"marker at 2^63", forge(t, good, fmt.Sprintf(marker, "9223372036854775808")), nil, notBackup, "applied index 9223372036854775808"},
		{"no applied table", forge(t, good, "DROP TABLE _duckraft.applied"), nil, notBackup, "_duckraft.applied"},
		{"no keys table", forge(t, good, "DROP TABLE _duckraft.keys"), nil, notBackup, "_duckraft.keys"},
		{"no metadata schema", forge(t, good, "DROP SCHEMA _duckraft CASCADE"), nil, notBackup, "_duckraft"},
		{"applied index as text", forge(t, good, "ALTER TABLE _duckraft.applied ALTER idx TYPE VARCHAR", setIdx+"'12'"), nil, notBackup, "_duckraft.applied"},
		{"applied index negative", forge(t, good, "ALTER TABLE _duckraft.applied ALTER idx TYPE BIGINT", setIdx+"-1"), nil, notBackup, "_duckraft.applied"},
		{"markers as text", forge(t, good, "ALTER TABLE _duckraft.keys ALTER idx TYPE VARCHAR"), nil, notBackup, "_duckraft.keys"},
		{"two applied rows", forge(t, good, "INSERT INTO _duckraft.applied VALUES (2, 5)"), nil, notBackup, "_duckraft.applied"},
		{"no applied row", forge(t, good, "DELETE FROM _duckraft.applied"), nil, notBackup, "_duckraft.applied"},
		{"damaged file", damagedFile, nil, notBackup, "not a duckraft backup"},
		{"rows changed since the recorded hash", forge(t, good, "UPDATE t SET i = i + 1 WHERE i = 7"), recorded,
			replication.ErrBackupHashMismatch, "forged.duckdb.hash records index " + strconv.FormatUint(h.Index, 10)},
		{"another backup's hash", forge(t, good), otherHash, replication.ErrBackupHashMismatch, "hash " + other.Hash},
		{"malformed hash file", forge(t, good), []byte("index 12 hash 00\n"), nil, "is not a recorded state hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.hash != nil {
				if err := os.WriteFile(tc.file+replication.BackupHashSuffix, tc.hash, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := Config{Restore: tc.file, DataDir: t.TempDir()}
			cfg.ID, cfg.QuackAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.Token = "r1", freeAddr(t), freeAddr(t), freeAddr(t), "backup-test-token"
			d, err := Start(cfg)
			if err == nil {
				d.Close()
				t.Fatal("a forged backup was restored")
			}
			if (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("err = %v, want %v saying %q", err, tc.is, tc.message)
			}
			t.Logf("refused: %v", err)
			for _, left := range []string{"duckraft.db", "duckraft.db.restoring", "raft"} {
				if _, err := os.Stat(filepath.Join(cfg.DataDir, left)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the refused restore left %s (%v)", left, err)
				}
			}
		})
	}

	t.Run("recorded hash", func(t *testing.T) {
		file := forge(t, good)
		if err := os.WriteFile(file+replication.BackupHashSuffix, recorded, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		refused := Config{Restore: damagedFile, DataDir: dir, ID: "r1", QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
			GossipAddr: freeAddr(t), Token: "backup-test-token"}
		if d, err := Start(refused); err == nil {
			d.Close()
			t.Fatal("the damaged backup was restored")
		}
		var log syncbuf.Buffer
		d := startNode(t, Config{Restore: file, DataDir: dir, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if got := query(t, d, "SELECT count(*) FROM t"); got != int64(1000) {
			t.Fatalf("restored %v rows, want 1000", got)
		}
		if !strings.Contains(log.String(), "hash_checked=true") {
			t.Fatalf("the restore did not check the recorded hash:\n%s", log.String())
		}
	})
}
