package daemon

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	if len(names) != 3 || names[2] != "notes.txt" || !name.MatchString(names[0]) || !name.MatchString(names[1]) {
		t.Fatalf("backup directory holds %v; want the 2 newest backups and notes.txt", names)
	}
	if !strings.HasSuffix(names[1], "-"+strconv.FormatUint(st.LastIndex, 10)+".duckdb") {
		t.Fatalf("newest backup %s, last index %d", names[1], st.LastIndex)
	}
	// The newest one restores.
	r := startNode(t, Config{Restore: filepath.Join(dir, names[1])})
	if got := query(t, r, "SELECT count(*) >= 1000 FROM t"); got != true {
		t.Fatalf("restored backup: %v", got)
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
