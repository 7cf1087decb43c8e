package clusterkey

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyFile: a generated key is written owner-only and read back as it
// was; an existing file is never replaced.
func TestKeyFile(t *testing.T) {
	k := Generate()
	if len(k) != KeySize || bytes.Equal(k, Generate()) {
		t.Fatalf("Generate: %d bytes, or twice the same key", len(k))
	}
	path := filepath.Join(t.TempDir(), "cluster.key")
	if err := WriteFile(path, k); err != nil {
		t.Fatal(err)
	}
	got, perm, err := ReadFile(path)
	if err != nil || !bytes.Equal(got, k) || perm != 0o600 {
		t.Fatalf("ReadFile: %x, %v, %v; want the key written, mode 0600", got, perm, err)
	}
	if err := WriteFile(path, Generate()); !errors.Is(err, os.ErrExist) {
		t.Fatalf("WriteFile over an existing key file: %v, want ErrExist", err)
	}
	if again, _, err := ReadFile(path); err != nil || !bytes.Equal(again, k) {
		t.Fatalf("the key file changed: %x, %v", again, err)
	}
}

// TestReadFileRefuses: a file that holds no key is refused, naming the
// file and never what it holds.
func TestReadFileRefuses(t *testing.T) {
	dir := t.TempDir()
	const secretish = "0123456789abcdef0123456789abcdeX"
	for _, tc := range []struct {
		name, content string
		is            error
	}{
		{"not hex", secretish + "\n", ErrBadKey},
		{"too short", "00112233\n", ErrBadKey},
		{"empty", "", nil},
		{"too long", strings.Repeat("00", 200), ErrBadKey},
		{"two keys", "00112233445566778899aabbccddeeff\n00112233445566778899aabbccddeeff\n", ErrBadKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := ReadFile(path)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "0123456789abcdef") {
				t.Fatalf("err %q does not name the file, or quotes it", err)
			}
		})
	}
	if _, _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
	if _, _, err := ReadFile(dir); err == nil {
		t.Error("a directory was read as a key file")
	}
}
