package outcome

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestEveryCodeHasItsOwnSentinel: each code stands for a sentinel no other
// code stands for, and an error wrapping that sentinel has that code.
func TestEveryCodeHasItsOwnSentinel(t *testing.T) {
	codes := Codes()
	if len(codes) != len(table) {
		t.Fatalf("Codes returned %d codes, the table holds %d", len(codes), len(table))
	}
	seen := map[error]Code{}
	for _, c := range codes {
		if c == "" || strings.ContainsAny(string(c), " \t\r\n") {
			t.Errorf("code %q cannot travel in a header value before an index", c)
		}
		err := c.Err()
		if err == nil {
			t.Errorf("%s stands for no sentinel", c)
			continue
		}
		if other, ok := seen[err]; ok {
			t.Errorf("%s and %s stand for one sentinel", other, c)
		}
		seen[err] = c
		if got := Of(fmt.Errorf("while testing: %w", err)); got != c {
			t.Errorf("an error wrapping %s's sentinel has code %q", c, got)
		}
	}
}

// TestOfTakesTheFirstRow: an error that wraps several sentinels has the
// code of the one that says most about it.
func TestOfTakesTheFirstRow(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, ""},
		{"no sentinel", errors.New("Catalog Error: no table"), ""},
		{"unknown outcome after losing leadership", fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrNotLeader), UnknownOutcome},
		{"not leader, then unknown outcome", errors.Join(ErrNotLeader, ErrUnknownOutcome), UnknownOutcome},
		{"unknown outcome of a stalled applier", fmt.Errorf("%w: %w", ErrApplyStalled, ErrUnknownOutcome), UnknownOutcome},
		{"no quorum is a kind of not leader", errors.Join(ErrNotLeader, ErrNoQuorum), NoQuorum},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: code %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUnknownCodes: a code of a newer build, or none, stands for nothing.
func TestUnknownCodes(t *testing.T) {
	for _, c := range []Code{"", "from_a_newer_build", "Not_Leader", "not_leader "} {
		if err := c.Err(); err != nil {
			t.Errorf("%q stands for %v", c, err)
		}
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		code  Code
		index uint64
		want  string
	}{
		{NotLeader, 0, "not_leader"},
		{Behind, 42, "behind 42"},
		{Pinned, 1<<64 - 1, "pinned 18446744073709551615"},
		{"from_a_newer_build", 7, "from_a_newer_build 7"},
	} {
		v := Header(tc.code, tc.index)
		if v != tc.want {
			t.Errorf("Header(%s, %d) = %q, want %q", tc.code, tc.index, v, tc.want)
		}
		c, idx, ok := ParseHeader(v)
		if !ok || c != tc.code || idx != tc.index {
			t.Errorf("%q parsed as %q %d %v", v, c, idx, ok)
		}
	}
}

func TestParseHeaderRefuses(t *testing.T) {
	for _, v := range []string{"", " ", " 5", "pinned x", "behind -1", "behind 1 2", "behind 18446744073709551616"} {
		if c, idx, ok := ParseHeader(v); ok {
			t.Errorf("%q parsed as %q %d", v, c, idx)
		}
	}
}
