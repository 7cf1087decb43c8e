package node

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// TestSessionIDsSay checks that an id says what it was minted with, and
// that any member with the key reads it, whichever run of the node.
func TestSessionIDsSay(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	ids := NewSessionIDs("n1", key)
	for _, tc := range []struct {
		gen  wire.Generation
		role tokens.Role
	}{{wire.Q1, tokens.Read}, {wire.Q3, tokens.Write}, {wire.Q3, tokens.Admin}} {
		id := ids.New(tc.gen, tc.role)
		if !strings.HasPrefix(id, "n1.") {
			t.Errorf("id %q does not start with its node", id)
		}
		c, err := NewSessionIDs("n2", key).Parse(id)
		if err != nil {
			t.Fatalf("parse %q on another member: %v", id, err)
		}
		if c.ID != id || c.Owner != "n1" || c.Boot != ids.Boot() || c.Gen != tc.gen || c.Role != tc.role {
			t.Errorf("claims of %q = %+v, want n1, boot %d, %v, %v", id, c, ids.Boot(), tc.gen, tc.role)
		}
	}
	if a, b := ids.New(wire.Q1, tokens.Read), ids.New(wire.Q1, tokens.Read); a == b {
		t.Errorf("two ids are equal: %s", a)
	}
	if got := NewSessionIDs("node 1/ü", key).New(wire.Q1, tokens.Read); !strings.HasPrefix(got, "x.") {
		t.Errorf("id of a node whose id needs quoting = %q, want the prefix x.", got)
	}
}

// TestSessionIDsCannotBeForged alters ids the ways a client could: a
// higher role, another node, another generation, another key, a truncated
// or padded id, another readable prefix. Every one is refused.
func TestSessionIDsCannotBeForged(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	ids := NewSessionIDs("n1", key)
	id := ids.New(wire.Q1, tokens.Read)
	label, enc, _ := strings.Cut(id, ".")
	payload, err := hex.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	with := func(i int, b byte) string {
		p := bytes.Clone(payload)
		p[i] = b
		return label + "." + strings.ToUpper(hex.EncodeToString(p))
	}
	for name, forged := range map[string]string{
		"admin role":       with(1, byte(tokens.Admin)),
		"Q3":               with(2, byte(wire.Q3)),
		"another boot":     with(3, payload[3]^1),
		"another node":     label + "." + strings.ToUpper(hex.EncodeToString(append(bytes.Clone(payload[:len(payload)-16-2]), append([]byte("n2"), payload[len(payload)-16:]...)...))),
		"MAC altered":      with(len(payload)-1, payload[len(payload)-1]^0x80),
		"truncated":        id[:len(id)-2],
		"padded":           id + "00",
		"other prefix":     "n2." + enc,
		"no prefix":        enc,
		"lower case":       label + "." + strings.ToLower(enc),
		"another key":      NewSessionIDs("n1", bytes.Repeat([]byte{8}, 32)).New(wire.Q1, tokens.Read),
		"a DuckDB id":      "0123456789ABCDEF0123456789ABCDEF",
		"empty":            "",
		"huge":             "n1." + strings.Repeat("AB", 10000),
		"odd hex":          id + "0",
		"only a separator": ".",
	} {
		_, err := ids.Parse(forged)
		if name == "lower case" {
			// Hex decodes either case; the MAC still binds the bytes.
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadSessionID) {
			t.Errorf("%s: Parse(%.80q) = %v, want ErrBadSessionID", name, forged, err)
		}
	}
}
