package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/internal/buildinfo"
)

// writeConfig writes a --config file with text and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "duckraftd.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cleanEnv empties the DUCKRAFT_* variables of the environment the test
// runs in, which would otherwise leak into the settings under test.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix+"_") {
			t.Setenv(k, "")
		}
	}
}

// TestConfigPrecedence: a flag beats its environment variable, which beats
// the config file, which beats the default; each source sets what the
// stronger ones leave alone.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, "# a comment\nquack 127.0.0.1:7001\nvoters 5\nreap-after 1m\nreplica\ntoken file-token\n")
	cases := []struct {
		name      string
		args      []string
		env       map[string]string
		quack     string
		voters    int
		reapAfter time.Duration
		replica   bool
		token     string
	}{
		{"defaults", nil, nil, "127.0.0.1:9494", 3, 30 * time.Second, false, ""},
		{"file over defaults", []string{"--config", file}, nil, "127.0.0.1:7001", 5, time.Minute, true, "file-token"},
		{"env over file", []string{"--config", file}, map[string]string{"DUCKRAFT_QUACK": "127.0.0.1:7002", "DUCKRAFT_REAP_AFTER": "2m"},
			"127.0.0.1:7002", 5, 2 * time.Minute, true, "file-token"},
		{"flag over env and file", []string{"--config", file, "--quack", "127.0.0.1:7003", "--voters", "7"}, map[string]string{"DUCKRAFT_QUACK": "127.0.0.1:7002"},
			"127.0.0.1:7003", 7, time.Minute, true, "file-token"},
		{"config file named by env", nil, map[string]string{"DUCKRAFT_CONFIG": file}, "127.0.0.1:7001", 5, time.Minute, true, "file-token"},
		{"env variables that existed before keep working", nil, map[string]string{"DUCKRAFT_TOKEN": "env-token", "DUCKRAFT_DATA": "/tmp/d"},
			"127.0.0.1:9494", 3, 30 * time.Second, false, "env-token"},
		{"env over file for the token", []string{"--config", file}, map[string]string{"DUCKRAFT_TOKEN": "env-token"},
			"127.0.0.1:7001", 5, time.Minute, true, "env-token"},
		{"flag false over file true", []string{"--config", file, "--replica=false"}, nil, "127.0.0.1:7001", 5, time.Minute, false, "file-token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := parseFlags(tc.args, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			got := []any{c.QuackAddr, c.Voters, c.ReapAfter, c.Replica, c.Token}
			want := []any{tc.quack, tc.voters, tc.reapAfter, tc.replica, tc.token}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("setting %d: got %v, want %v", i, got[i], want[i])
				}
			}
			if d, ok := tc.env["DUCKRAFT_DATA"]; ok && c.DataDir != d {
				t.Errorf("data dir %q, want %q from DUCKRAFT_DATA", c.DataDir, d)
			}
		})
	}
}

// TestClusterKeyFromEnv: DUCKRAFT_CLUSTER_KEY, which existed before the
// configuration went through ff, still sets the cluster key.
func TestClusterKeyFromEnv(t *testing.T) {
	t.Setenv("DUCKRAFT_CLUSTER_KEY", strings.Repeat("ab", 32))
	c, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ClusterKey) != 32 || c.ClusterKey[0] != 0xab {
		t.Fatalf("cluster key %x, want 32 bytes of ab", c.ClusterKey)
	}
}

// TestConfigErrors: a bad setting from any source is a clear error that
// names the flag (and the file), never a silent default.
func TestConfigErrors(t *testing.T) {
	unknown := writeConfig(t, "quack 127.0.0.1:7001\nquack-addr 127.0.0.1:7002\n")
	badValue := writeConfig(t, "voters many\n")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"unknown key in the file", []string{"--config", unknown}, nil, []string{unknown, `unknown key "quack-addr"`}},
		{"bad value in the file", []string{"--config", badValue}, nil, []string{badValue, `"many"`, "voters"}},
		{"missing file", []string{"--config", "/nonexistent/duckraftd.conf"}, nil, []string{"--config", "/nonexistent/duckraftd.conf"}},
		{"bad flag value", []string{"--reap-after", "soon"}, nil, []string{"reap-after", `"soon"`}},
		{"bad env value", nil, map[string]string{"DUCKRAFT_VOTERS": "x"}, []string{"voters", "DUCKRAFT_VOTERS"}},
		{"bad enum value", []string{"--consistency", "eventual"}, nil, []string{"--consistency"}},
		{"bad raft log store", []string{"--raft-log-store", "rocksdb"}, nil, []string{"--raft-log-store", "rocksdb", "boltdb", "wal"}},
		{"bad gossip profile", []string{"--gossip-profile", "wan"}, nil, []string{"--gossip-profile", "wan"}},
		{"unknown flag", []string{"--quack-addr", "x"}, nil, []string{"quack-addr"}},
		{"positional argument", []string{"serve"}, nil, []string{"unexpected arguments", "serve"}},
		{"two cluster keys", []string{"--cluster-key", strings.Repeat("ab", 32), "--cluster-key-file", "/k"}, nil,
			[]string{"--cluster-key", "--cluster-key-file", "exclude"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parseFlags(tc.args, &bytes.Buffer{})
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestHelpListsEverySetting: --help names every flag with its environment
// variable and its default, the empty defaults too.
func TestHelpListsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"--help"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp", err)
	}
	help := out.String()
	for _, want := range []string{
		"--quack string", `(env DUCKRAFT_QUACK, default "127.0.0.1:9494")`,
		"--token string", `(env DUCKRAFT_TOKEN, default "")`,
		"--cluster-key string", "(env DUCKRAFT_CLUSTER_KEY,",
		"--cluster-key-file string", `(env DUCKRAFT_CLUSTER_KEY_FILE, default "")`,
		"--config file", "--log-format string", `default "text"`,
		"--reap-after duration", `default "30s"`,
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	n := 0
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "  --") {
			n++
		}
	}
	if envs := strings.Count(help, "(env DUCKRAFT_"); envs != n || n < 40 {
		t.Errorf("%d flags listed, %d with their environment variable", n, envs)
	}
}

// TestLogFormat: --log-format json writes one JSON object per line, text
// key=value pairs, and anything else is refused.
func TestLogFormat(t *testing.T) {
	cases := []struct {
		format string
		check  func(line string) bool
	}{
		{"json", func(line string) bool {
			var m map[string]any
			return json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "hello" && m["node"] == "n1"
		}},
		{"text", func(line string) bool { return strings.Contains(line, "msg=hello node=n1") }},
	}
	for _, tc := range cases {
		t.Run(tc.format, func(t *testing.T) {
			var out bytes.Buffer
			log, err := newLogger(&out, "info", tc.format)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("hidden")
			log.Info("hello", "node", "n1")
			line := strings.TrimSpace(out.String())
			if strings.Count(line, "\n") != 0 || !tc.check(line) {
				t.Errorf("log output %q", out.String())
			}
		})
	}
	if _, err := newLogger(&bytes.Buffer{}, "info", "xml"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("--log-format xml: %v", err)
	}
}

// TestVersionFlag: --version is a flag like the others, and what it
// prints names this build and the DuckDB it embeds.
func TestVersionFlag(t *testing.T) {
	c, err := parseFlags([]string{"--version"}, io.Discard)
	if err != nil || !c.version {
		t.Fatalf("parseFlags(--version) = %+v, %v", c, err)
	}
	if got, want := versionLine(), "duckraftd "+buildinfo.Version()+" (DuckDB v"; !strings.HasPrefix(got, want) {
		t.Fatalf("version line %q, want it to start with %q", got, want)
	}
}
