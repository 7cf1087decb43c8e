package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/duckraft/duckraft/clusterkey"
)

// KeyFileName is the file in the data directory that keeps the cluster
// key a node generated when it bootstrapped a new cluster: the nodes that
// join are given a copy (duckraftd --cluster-key-file), and the node reads
// it again at every start.
const KeyFileName = "cluster.key"

// ErrNoClusterKey is why a node that does not bootstrap a new cluster
// refuses to start without the cluster's key: a key of its own would make
// it a stranger to the members, and a client token implies no membership.
var ErrNoClusterKey = errors.New("no cluster key")

// loadClusterKey returns the members' key and, when it is the one kept in
// the data directory, that file's path. In order: Config.ClusterKey or
// Config.ClusterKeyFile as given; the data directory's KeyFileName; for a
// node that bootstraps a new cluster (no Join, no Raft state yet, not a
// router) a key generated into KeyFileName, mode 0600. Any other node has
// no key and fails with ErrNoClusterKey. The key is never logged.
func loadClusterKey(c Config, log *slog.Logger) (key []byte, kept string, err error) {
	if len(c.ClusterKey) > 0 && c.ClusterKeyFile != "" {
		return nil, "", errors.New("--cluster-key and --cluster-key-file exclude each other")
	}
	given := c.ClusterKey
	if c.ClusterKeyFile != "" {
		if given, err = readKeyFile(c.ClusterKeyFile, log); err != nil {
			return nil, "", fmt.Errorf("--cluster-key-file: %w", err)
		}
	}
	own := filepath.Join(c.DataDir, KeyFileName)
	held, err := readKeyFile(own, log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	switch {
	case len(given) > 0 && len(held) > 0 && !bytes.Equal(given, held):
		return nil, "", fmt.Errorf("the cluster key given is not the one in %s, which this node generated when it bootstrapped its cluster: give that key, or, to change the key of every node at once, remove the file", own)
	case len(given) > 0:
		return given, "", nil
	case len(held) > 0:
		return held, own, nil
	}
	if c.Router || c.Join != "" {
		return nil, "", fmt.Errorf("%w: a node that joins a cluster (--join) needs its key: give --cluster-key-file with a copy of the bootstrap node's %s (or --cluster-key)", ErrNoClusterKey, filepath.Join("<data>", KeyFileName))
	}
	if has, err := hasRaftState(c.DataDir); err != nil || has {
		if err != nil {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("%w: %s holds Raft state but no %s: give the cluster's key with --cluster-key-file (or --cluster-key); a data directory of a release that derived the key from the token needs a key set on every node (docs/upgrade.md)", ErrNoClusterKey, c.DataDir, KeyFileName)
	}
	key = clusterkey.Generate()
	if err := clusterkey.WriteFile(own, key); err != nil {
		return nil, "", err
	}
	log.Info("generated the cluster key of a new cluster; the nodes that join it need a copy (--cluster-key-file)", "path", own)
	return key, own, nil
}

// readKeyFile reads a cluster key file, and warns when others than its
// owner may read it: the key makes its holder a member. (Secret stores
// often mount files readable by a group, so this is not refused.)
func readKeyFile(path string, log *slog.Logger) ([]byte, error) {
	key, perm, err := clusterkey.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if perm&0o077 != 0 {
		log.Warn("the cluster key file is readable by others than its owner: whoever reads it is a member; chmod 600 it", "path", path, "mode", perm.String())
	}
	return key, nil
}

// hasRaftState reports whether the data directory holds Raft state: a node
// that ran before, whose cluster has a key already.
func hasRaftState(dataDir string) (bool, error) {
	entries, err := os.ReadDir(filepath.Join(dataDir, "raft"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("data directory: %w", err)
	}
	return len(entries) > 0, nil
}
