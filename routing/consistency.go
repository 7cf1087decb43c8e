package routing

import (
	"fmt"
	"regexp"
	"strings"
)

// Level is a read consistency level.
type Level string

// Read consistency levels, weakest last.
const (
	// Strong reads run on the leader after it confirms its leadership and
	// has applied everything committed before the read (read index).
	Strong Level = "strong"
	// Session reads run on a node once it has applied the session's last
	// write: every session reads its own writes.
	Session Level = "session"
	// Bounded reads run on any node whose apply lag is within the bound.
	Bounded Level = "bounded"
	// Any reads run on any live node, however far behind.
	Any Level = "any"
)

// ParseLevel parses a level name.
func ParseLevel(s string) (Level, error) {
	switch l := Level(strings.ToLower(strings.TrimSpace(s))); l {
	case Strong, Session, Bounded, Any:
		return l, nil
	}
	return "", fmt.Errorf("duckraft: unknown consistency level %q: use strong, session, bounded or any", s)
}

var setConsistency = regexp.MustCompile(`(?is)^\s*SET\s+(?:SESSION\s+)?duckraft_consistency\s*(?:=|TO)\s*'([^']*)'\s*;?\s*$`)

// consistencySetting recognises SET duckraft_consistency = '…', which the
// router handles itself.
func consistencySetting(sql string) (Level, bool, error) {
	m := setConsistency.FindStringSubmatch(sql)
	if m == nil {
		return "", false, nil
	}
	l, err := ParseLevel(m[1])
	return l, true, err
}
