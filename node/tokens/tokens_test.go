package tokens

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	readTok  = "read-token-0123456789"
	writeTok = "write-token-0123456789"
	adminTok = "admin-token-0123456789"
)

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader("# roles\n\nread " + readTok + "\n  write\t" + writeTok + "  \nadmin " + adminTok + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token string
		role  Role
		ok    bool
	}{
		{readTok, Read, true},
		{writeTok, Write, true},
		{adminTok, Admin, true},
		{"unknown-token-0123456789", 0, false},
		{"", 0, false},
		{readTok[:len(readTok)-1], 0, false},
		{readTok + "x", 0, false},
	} {
		role, ok := s.Role(c.token)
		if role != c.role || ok != c.ok {
			t.Errorf("Role(%q) = %v, %v; want %v, %v", c.token, role, ok, c.role, c.ok)
		}
	}
	if s.Len() != 3 || s.Count(Read) != 1 || s.Count(Admin) != 1 {
		t.Errorf("Len %d, Count(read) %d, Count(admin) %d", s.Len(), s.Count(Read), s.Count(Admin))
	}
}

// TestParseCommentsAfterTheToken loads the example of docs/cli.md, whose
// lines end in comments (it was refused: "found 4 fields").
func TestParseCommentsAfterTheToken(t *testing.T) {
	file := `# /etc/duckraft/tokens (mode 0600): ROLE TOKEN, one per line
read   3f1c9a0d5b7e4a2c8d6f0e1b2a3c4d5e     # dashboards
write  9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d     # the loader
admin  0f1e2d3c4b5a69788796a5b4c3d2e1f0	#operators
read   token#with-a-hash-inside-it
`
	s, err := Parse(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]Role{"3f1c9a0d5b7e4a2c8d6f0e1b2a3c4d5e": Read, "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d": Write,
		"0f1e2d3c4b5a69788796a5b4c3d2e1f0": Admin, "token#with-a-hash-inside-it": Read} {
		if role, ok := s.Role(tok); !ok || role != want {
			t.Errorf("Role(%s) = %v, %v; want %v", tok, role, ok, want)
		}
	}
}

// TestParseRefusesMalformedFiles: every malformed line is an error naming
// its line, and no error shows the token it holds.
func TestParseRefusesMalformedFiles(t *testing.T) {
	const secret = "secret-token-0123456789"
	for _, c := range []struct {
		name, file, want string
	}{
		{"one field", "read " + readTok + "\n" + secret + "\n", "line 2: want ROLE TOKEN, found 1 fields"},
		{"three fields", "write " + secret + " extra\n", "line 1: want ROLE TOKEN, found 3 fields"},
		{"unknown role", "\n# c\nsuperuser " + secret + "\n", "line 3: the first word is not a role"},
		{"upper-case role", "READ " + secret + "\n", "line 1: the first word is not a role"},
		{"token first", secret + " read\n", "line 1: the first word is not a role"},
		{"short token", "read short-" + "\n", "line 1: the token is shorter than 16 characters"},
		{"duplicate", "read " + secret + "\nadmin " + secret + "\n", "line 2: the token of line 1 again"},
		{"long line", "read " + strings.Repeat("x", 70<<10) + "\n", "longer than 64 KiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.file))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want ErrMalformed with %q", err, c.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "xxxxxxxx") {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}

func TestRoleOrder(t *testing.T) {
	for _, c := range []struct {
		have, need Role
		ok         bool
	}{
		{Read, Read, true}, {Read, Write, false}, {Read, Admin, false},
		{Write, Read, true}, {Write, Write, true}, {Write, Admin, false},
		{Admin, Read, true}, {Admin, Write, true}, {Admin, Admin, true},
		{0, Read, false}, {Admin, 0, false},
	} {
		if got := c.have.Allows(c.need); got != c.ok {
			t.Errorf("%v.Allows(%v) = %v", c.have, c.need, got)
		}
	}
}

func TestAddKeepsTheHigherRole(t *testing.T) {
	s, err := Parse(strings.NewReader("read " + readTok + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	both := s.Add(readTok, Admin).Add(writeTok, Write)
	if r, _ := both.Role(readTok); r != Admin {
		t.Errorf("a token given as admin too has role %v", r)
	}
	if r, _ := s.Role(readTok); r != Read {
		t.Errorf("Add changed the Set it was called on: %v", r)
	}
	if both.Len() != 2 {
		t.Errorf("Len %d", both.Len())
	}
}

func TestKeyringReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte("write "+writeTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	k := NewKeyring(s)
	if r, ok := k.Role(writeTok); !ok || r != Write {
		t.Fatalf("Role = %v, %v", r, ok)
	}
	k.Replace(&Set{})
	if _, ok := k.Role(writeTok); ok {
		t.Fatal("a replaced token still has a role")
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file loads")
	}
	var zero Keyring
	if _, ok := zero.Role(writeTok); ok {
		t.Fatal("the zero Keyring holds a token")
	}
}
