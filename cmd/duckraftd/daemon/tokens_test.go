package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/internal/syncbuf"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/wire"
)

func writeTokens(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func connectAs(t *testing.T, d *Daemon, token string) (*client.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, "quack:"+d.QuackAddr(), client.Options{Token: token, Generation: wire.Q1})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestTokensFileStart: a node refuses to start on a malformed tokens file,
// naming the line and not the token; a node that joins without the
// cluster key refuses to start whatever tokens it has (none implies the
// key); with a tokens file it takes no token of its own.
func TestTokensFileStart(t *testing.T) {
	const secret = "secret-token-0123456789"
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	base := func() Config {
		return Config{ID: "n1", DataDir: filepath.Join(t.TempDir(), "data"), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
			GossipAddr: freeAddr(t), TokensFile: file, ClusterKey: []byte("0123456789abcdef0123456789abcdef")}
	}
	for _, tc := range []struct {
		name, file string
		mod        func(*Config)
		want       string
	}{
		{"malformed", "read " + secret + "\nwriter " + secret + "x\n", nil, "line 2: the first word is not a role"},
		{"token shorter than 16", "admin short\n", nil, "line 1: the token is shorter than 16"},
		{"no token at all", "# nobody\n", nil, "holds no token, and no token is given"},
		{"joins without the cluster key", "read " + secret + "\n", func(c *Config) { c.ClusterKey, c.Join = nil, "127.0.0.1:1" },
			"--cluster-key-file"},
		{"missing file", "", func(c *Config) { c.TokensFile = filepath.Join(dir, "missing") }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeTokens(t, file, tc.file)
			cfg := base()
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			d, err := Start(cfg)
			if err == nil {
				d.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
				t.Fatalf("err = %v; want %q, without the token", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "token")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a node with a tokens file generated a token of its own (%v)", err)
			}
		})
	}
}

// TestReloadTokens: ReloadTokens puts a changed file in force: a removed
// token's session is refused at its next statement, a demoted token's
// write is refused in its session, a new token connects; a malformed
// file keeps the tokens in force and logs an error; no token is ever
// logged.
func TestReloadTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	const readTok, writeTok, adminTok, newTok = "read-token-0123456789", "write-token-0123456789",
		"admin-token-0123456789", "new-token-0123456789"
	file := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, file, "# roles\nread "+readTok+"\nwrite "+writeTok+"\nadmin "+adminTok+"\n")
	var log syncbuf.Buffer
	d, err := Start(Config{ID: "n1", DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t),
		GossipAddr: freeAddr(t), TokensFile: file, ClusterKey: []byte("0123456789abcdef0123456789abcdef"),
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.store.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d.Token() != "" {
		t.Fatal("a node with only a tokens file has a token of its own")
	}
	ctx := context.Background()
	admin, err := connectAs(t, d, adminTok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE TABLE r(i INTEGER)"); err != nil {
		t.Fatal(err)
	}
	reader, err := connectAs(t, d, readTok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Exec(ctx, "INSERT INTO r VALUES (1)"); err == nil || !strings.Contains(err.Error(), "needs the write role") {
		t.Fatalf("a read token's insert: %v", err)
	}
	writer, err := connectAs(t, d, writeTok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Exec(ctx, "INSERT INTO r VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	// The read token is removed, the write token demoted, a token added.
	writeTokens(t, file, "read "+writeTok+"\nadmin "+adminTok+"\nwrite "+newTok+"\n")
	if err := d.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	var se *client.ServerError
	if _, err := reader.Exec(ctx, "SELECT 1"); !errors.As(err, &se) || se.Code != string(outcome.Unauthorized) {
		t.Fatalf("the removed token's session: %v", err)
	}
	if _, err := connectAs(t, d, readTok); err == nil {
		t.Fatal("the removed token connects")
	}
	if _, err := writer.Exec(ctx, "INSERT INTO r VALUES (2)"); !errors.As(err, &se) || se.Code != string(outcome.Forbidden) {
		t.Fatalf("the demoted token's insert: %v", err)
	}
	if _, err := writer.Exec(ctx, "SELECT count(*) FROM r"); err != nil {
		t.Fatalf("the demoted token's read: %v", err)
	}
	added, err := connectAs(t, d, newTok)
	if err != nil {
		t.Fatalf("the added token: %v", err)
	}
	if _, err := added.Exec(ctx, "INSERT INTO r VALUES (3)"); err != nil {
		t.Fatal(err)
	}

	// A malformed file changes nothing.
	writeTokens(t, file, "admin "+adminTok+"\nread\n")
	if err := d.ReloadTokens(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("reload of a malformed file: %v", err)
	}
	if _, err := added.Exec(ctx, "INSERT INTO r VALUES (4)"); err != nil {
		t.Fatalf("after a failed reload the tokens in force changed: %v", err)
	}
	rows, err := admin.Query(ctx, "SELECT count(*) FROM r")
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatal("no count")
	}
	if v, err := rows.Values(); err != nil || v[0] != int64(3) {
		t.Fatalf("%v rows (%v), want 3", v, err)
	}
	rows.Close()
	out := log.String()
	if !strings.Contains(out, "tokens not reloaded; the previous tokens stay in force") || !strings.Contains(out, "level=ERROR") {
		t.Errorf("the failed reload was not logged as an error:\n%s", out)
	}
	for _, tok := range []string{readTok, writeTok, adminTok, newTok} {
		if strings.Contains(out, tok) {
			t.Errorf("the log shows a token")
		}
	}
}
