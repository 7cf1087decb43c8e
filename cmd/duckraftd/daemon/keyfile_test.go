package daemon

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/clusterkey"
	"github.com/duckraft/duckraft/internal/syncbuf"
)

// tokenDerivedKey is the cluster key earlier releases derived from the
// client token when no key was given: what any holder of the token could
// compute.
func tokenDerivedKey(t *testing.T, token string) []byte {
	t.Helper()
	k, err := hkdf.Key(sha256.New, []byte(token), nil, "duckraft cluster key from token", 32)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestClusterKeyFile: a node that bootstraps a cluster without a key
// generates a random one into <data>/cluster.key, mode 0600, logged
// nowhere, neither the token's derivation nor the same twice; it reads it
// again when it restarts. A node with Raft state whose file is gone
// refuses to start rather than make a key of its own; a key file others
// may read is used with a warning; a key given that is not the file's is
// refused.
func TestClusterKeyFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Raft and gossip")
	}
	const token = "key-file-test-token"
	var log syncbuf.Buffer
	cfg := Config{ID: "n1", DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t),
		Token: token, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	start := func(cfg Config) *Daemon {
		t.Helper()
		d, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.store.WaitForLeader(30 * time.Second); err != nil {
			d.Close()
			t.Fatal(err)
		}
		return d
	}
	d := start(cfg)
	path := filepath.Join(cfg.DataDir, KeyFileName)
	key, perm, err := clusterkey.ReadFile(path)
	if err != nil || perm != 0o600 || len(key) != clusterkey.KeySize {
		d.Close()
		t.Fatalf("%s: %d bytes, mode %v, %v; want a key of %d bytes, mode 0600", path, len(key), perm, err, clusterkey.KeySize)
	}
	if d.KeyFile() != path || !bytes.Equal(d.clusterKey, key) || bytes.Equal(key, tokenDerivedKey(t, token)) {
		d.Close()
		t.Fatalf("the node's key is not its file's (KeyFile %q), or it is the token's derivation", d.KeyFile())
	}
	query(t, d, "CREATE TABLE t AS SELECT 1 AS x")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = start(cfg)
	same := bytes.Equal(d.clusterKey, key)
	d.Close()
	if !same {
		t.Fatal("the restarted node has another key")
	}
	for _, secret := range []string{hex.EncodeToString(key), strings.ToUpper(hex.EncodeToString(key))} {
		if strings.Contains(log.String(), secret) {
			t.Fatal("the log holds the cluster key")
		}
	}
	if !strings.Contains(log.String(), "generated the cluster key") {
		t.Errorf("the log does not say a key was generated:\n%s", log.String())
	}

	// Gone, with Raft state in place: refused, and no key made.
	if err := os.Rename(path, path+".kept"); err != nil {
		t.Fatal(err)
	}
	if d, err := Start(cfg); err == nil {
		d.Close()
		t.Fatal("a node with Raft state and no key started")
	} else if !errors.Is(err, ErrNoClusterKey) || !strings.Contains(err.Error(), "--cluster-key-file") {
		t.Fatalf("err = %v, want ErrNoClusterKey naming --cluster-key-file", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start made a key file (%v)", err)
	}

	// Given back through --cluster-key-file, readable by all: a warning.
	if err := os.Chmod(path+".kept", 0o644); err != nil {
		t.Fatal(err)
	}
	given := cfg
	given.ClusterKeyFile = path + ".kept"
	d = start(given)
	same = bytes.Equal(d.clusterKey, key)
	d.Close()
	if !same {
		t.Fatal("the node does not use the key file given")
	}
	if !strings.Contains(log.String(), "the cluster key file is readable by others") {
		t.Error("no warning about a key file others may read")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a node given its key wrote a key file (%v)", err)
	}

	// Another key than the file's.
	if err := os.Rename(path+".kept", path); err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.ClusterKey = clusterkey.Generate()
	if d, err := Start(other); err == nil {
		d.Close()
		t.Fatal("a node given another key than its file's started")
	} else if !strings.Contains(err.Error(), "not the one in "+path) {
		t.Fatalf("err = %v, want it to name %s", err, path)
	}
}

// TestNoClusterKeyRefused: a node that joins, or a router, with no cluster
// key refuses to start, naming the flag, and makes no key of its own,
// whatever token it holds; a key file that holds no key is refused with
// its name.
func TestNoClusterKeyRefused(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		is   error
		want string
	}{
		{"joining node", func(c *Config) { c.Join = "127.0.0.1:1" }, ErrNoClusterKey, "--cluster-key-file"},
		{"joining replica", func(c *Config) { c.Join, c.Replica = "127.0.0.1:1", true }, ErrNoClusterKey, "--cluster-key-file"},
		{"router", func(c *Config) { c.Join, c.Router = "127.0.0.1:1", true }, ErrNoClusterKey, "--cluster-key-file"},
		{"malformed key file", func(c *Config) { c.Join, c.ClusterKeyFile = "127.0.0.1:1", bad }, clusterkey.ErrBadKey, bad},
		{"both key and key file", func(c *Config) { c.ClusterKey, c.ClusterKeyFile = clusterkey.Generate(), bad }, nil, "exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{ID: "n2", DataDir: t.TempDir(), QuackAddr: freeAddr(t), RaftAddr: freeAddr(t), GossipAddr: freeAddr(t),
				Token: "no-key-test-token"}
			tc.mod(&cfg)
			d, err := Start(cfg)
			if err == nil {
				d.Close()
				t.Fatal("started")
			}
			if (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v naming %q", err, tc.is, tc.want)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, KeyFileName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused node made a key file (%v)", err)
			}
		})
	}
}
