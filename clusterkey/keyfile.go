package clusterkey

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a generated cluster key: 32 bytes, 64 hex digits.
const KeySize = 32

// Generate returns a new random cluster key of KeySize bytes.
func Generate() []byte {
	k := make([]byte, KeySize)
	// crypto/rand.Read never fails: on a broken source it ends the
	// program rather than return predictable bytes.
	rand.Read(k)
	return k
}

// ReadFile reads the cluster key kept in the file at path as hex digits
// (white space around them is ignored) and returns it with the file's
// permission bits, so that a caller can warn about a key others may read.
// Errors name the file, never its contents.
func ReadFile(path string) ([]byte, fs.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("cluster key file %s is not a regular file", path)
	}
	// A key is at most 64 digits; a larger file is not a key file.
	b := make([]byte, 256)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, 0, fmt.Errorf("read cluster key file %s: %w", path, err)
	}
	if n == len(b) {
		return nil, 0, fmt.Errorf("cluster key file %s: %w", path, ErrBadKey)
	}
	k, err := Parse(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return nil, 0, fmt.Errorf("cluster key file %s: %w", path, err)
	}
	return k, fi.Mode().Perm(), nil
}

// WriteFile writes key as hex digits to a new file at path, readable and
// writable by its owner only (0600), synced with its directory. It never
// replaces a file: an existing one is an error.
func WriteFile(path string, key []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write cluster key file: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(key) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("write cluster key file %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
