// Package tokens is the client tokens a node accepts and the role each one
// holds: read, write or admin, each allowing what the one before it does.
// A Set is parsed from a file of "ROLE TOKEN" lines (duckraftd --tokens) and
// looked up in constant time; a Keyring holds the Set in force, which a
// reload replaces while sessions run. The package has no dependencies
// beyond the standard library, so the Quack server (node), the node API
// (routing/nodeapi) and the daemon share it.
//
// No error or String of this package ever contains a token.
package tokens

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// Role is what a token may do. The zero Role allows nothing.
type Role uint8

// Roles, each allowing everything the ones before it allow.
const (
	// Read runs statements that change nothing: queries, session
	// settings, read-only transactions; and reads a node's status and
	// state hash.
	Read Role = iota + 1
	// Write also changes the database: writes, DDL, appends, CHECKPOINT.
	Write
	// Admin also operates the cluster: membership, leadership transfer,
	// backups.
	Admin
)

func (r Role) String() string {
	switch r {
	case Read:
		return "read"
	case Write:
		return "write"
	case Admin:
		return "admin"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Allows reports whether r may do what needs need.
func (r Role) Allows(need Role) bool { return need != 0 && r >= need }

// ParseRole returns the Role named s ("read", "write" or "admin").
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return Read, nil
	case "write":
		return Write, nil
	case "admin":
		return Admin, nil
	}
	return 0, fmt.Errorf("unknown role %q: want read, write or admin", s)
}

// MinLength is the shortest token a tokens file may hold: 16 characters,
// as `openssl rand -hex 16` gives 32. (duckraftd's own tokens have 32.)
const MinLength = 16

// ErrMalformed marks a tokens file that does not parse; the error names
// the line, never its token.
var ErrMalformed = errors.New("malformed tokens file")

// Set is a fixed set of tokens with their roles.
type Set struct {
	entries []entry
}

// entry keeps a token's SHA-256 rather than the token: every comparison
// is then of 32 bytes, so its time does not depend on the token's length
// either, and the Set holds no token a memory dump could show.
type entry struct {
	digest [sha256.Size]byte
	role   Role
}

// Add returns a Set holding s's tokens and token with role. A token
// already in s keeps the higher of its two roles: a --token given as well
// as in the file stays admin.
func (s *Set) Add(token string, role Role) *Set {
	out := &Set{}
	if s != nil {
		out.entries = append(out.entries, s.entries...)
	}
	d := sha256.Sum256([]byte(token))
	for i, e := range out.entries {
		if subtle.ConstantTimeCompare(e.digest[:], d[:]) == 1 {
			out.entries[i].role = max(e.role, role)
			return out
		}
	}
	out.entries = append(out.entries, entry{digest: d, role: role})
	return out
}

// Role returns the role of token; ok is false when s does not hold it.
// Every token of s is compared, each in constant time, so the time taken
// tells nothing of which token matched or how much of it did.
func (s *Set) Role(token string) (role Role, ok bool) {
	if s == nil {
		return 0, false
	}
	d := sha256.Sum256([]byte(token))
	found := 0
	for _, e := range s.entries {
		eq := subtle.ConstantTimeCompare(e.digest[:], d[:])
		role = Role(subtle.ConstantTimeSelect(eq, int(e.role), int(role)))
		found |= eq
	}
	return role, found == 1
}

// Count returns how many tokens of s hold exactly role.
func (s *Set) Count(role Role) int {
	if s == nil {
		return 0
	}
	n := 0
	for _, e := range s.entries {
		if e.role == role {
			n++
		}
	}
	return n
}

// Len returns how many tokens s holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.entries)
}

// Parse reads a tokens file: one "ROLE TOKEN" per line, separated by
// spaces or tabs; blank lines and lines starting with # are skipped, and a
// word starting with # after the token begins a comment (a token may hold
// a #, but not start with one). A
// line that does not parse, a token shorter than MinLength, and a token
// given twice are errors (ErrMalformed) naming the line.
func Parse(r io.Reader) (*Set, error) {
	s := &Set{}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		for i, f := range fields {
			if strings.HasPrefix(f, "#") {
				fields = fields[:i]
				break
			}
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("%w: line %d: want ROLE TOKEN, found %d fields", ErrMalformed, n, len(fields))
		}
		role, err := ParseRole(fields[0])
		if err != nil {
			// Not the word itself: a line written the wrong way round
			// has its token there.
			return nil, fmt.Errorf("%w: line %d: the first word is not a role: want read, write or admin, then the token", ErrMalformed, n)
		}
		tok := fields[1]
		if len(tok) < MinLength {
			return nil, fmt.Errorf("%w: line %d: the token is shorter than %d characters", ErrMalformed, n, MinLength)
		}
		if first, ok := seen[tok]; ok {
			return nil, fmt.Errorf("%w: line %d: the token of line %d again", ErrMalformed, n, first)
		}
		seen[tok] = n
		s.entries = append(s.entries, entry{digest: sha256.Sum256([]byte(tok)), role: role})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: a line is longer than 64 KiB", ErrMalformed)
		}
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return s, nil
}

// Load parses the tokens file at path.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return s, nil
}

// Roles gives the role of a token; *Set and *Keyring are Roles.
type Roles interface {
	Role(token string) (Role, bool)
}

// Keyring is the Set in force, replaced whole by a reload: a lookup sees
// the old Set or the new one, never a mix. The zero Keyring holds no
// token.
type Keyring struct {
	set atomic.Pointer[Set]
}

// NewKeyring returns a Keyring holding s.
func NewKeyring(s *Set) *Keyring {
	k := &Keyring{}
	k.set.Store(s)
	return k
}

// Role returns the role token holds in the Set in force.
func (k *Keyring) Role(token string) (Role, bool) { return k.set.Load().Role(token) }

// Set returns the Set in force.
func (k *Keyring) Set() *Set { return k.set.Load() }

// Replace puts s in force.
func (k *Keyring) Replace(s *Set) { k.set.Store(s) }
