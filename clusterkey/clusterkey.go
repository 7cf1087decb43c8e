// Package clusterkey derives the credentials the members of a duckraft
// cluster hold from one secret, the cluster key: the key that encrypts
// gossip, the bearer credential of the node-to-node HTTP API, and the
// certificate authority of the Raft transport's mutual TLS. Each is an
// HKDF-SHA256 expansion of the key under its own label, so learning one
// (a node API credential in a log, say) reveals neither the key nor the
// others. It also generates keys and keeps them in files (keyfile.go):
// the key a bootstrapping duckraftd generates in its data directory.
package clusterkey

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrBadKey is returned by Parse (and wrapped by ReadFile) for a key that
// is not 32, 48 or 64 hex digits.
var ErrBadKey = errors.New("clusterkey: a cluster key is 32, 48 or 64 hex digits")

// Labels of the derived credentials; a label never changes, or clusters
// of mixed versions stop recognising each other. (Releases before the
// generated key derived the key itself from the client token when none
// was given, under "duckraft cluster key from token"; a client token no
// longer implies membership.)
const (
	labelGossip  = "duckraft gossip"
	labelNodeAPI = "duckraft node api"
	labelRaftCA  = "duckraft raft ca"
	labelSession = "duckraft session id"
)

// Parse decodes a cluster key given as hex digits (duckraftd's
// --cluster-key): 16, 24 or 32 bytes.
func Parse(s string) ([]byte, error) {
	k, err := hex.DecodeString(s)
	if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
		return nil, ErrBadKey
	}
	return k, nil
}

// Gossip is the 32-byte key that encrypts gossip (memberlist's AES-GCM).
func Gossip(key []byte) []byte { return derive(key, labelGossip, 32) }

// NodeAPI is the bearer credential that authorizes a member's requests to
// another member's node API (forwarded writes, leadership transfer).
func NodeAPI(key []byte) string { return hex.EncodeToString(derive(key, labelNodeAPI, 32)) }

// SessionID is the 32-byte key with which members sign the session ids
// they hand out (node.SessionIDs), so that any member can tell which node
// opened a session, and with which role, from the id alone, and a client
// cannot forge one.
func SessionID(key []byte) []byte { return derive(key, labelSession, 32) }

// derive expands key under label into n bytes.
func derive(key []byte, label string, n int) []byte {
	out, err := hkdf.Key(sha256.New, key, nil, label, n)
	if err != nil {
		// hkdf.Key fails only for lengths beyond 255 hashes, and n is a
		// constant of this package.
		panic(fmt.Sprintf("clusterkey: derive %d bytes: %v", n, err))
	}
	return out
}
