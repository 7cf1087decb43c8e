package routing

import (
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/sqltext"
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

// consistencySetting recognises SET duckraft_consistency = '…', which the
// router handles itself. The value is a plain string without quotes in it.
func consistencySetting(stmt sqltext.Statement) (Level, bool, error) {
	v, ok := setStatement(stmt, "duckraft_consistency")
	if !ok || v.Kind != sqltext.TokString || v.Text[0] != '\'' || strings.Count(v.Text, "'") != 2 {
		return "", false, nil
	}
	l, err := ParseLevel(v.Text[1 : len(v.Text)-1])
	return l, true, err
}

// setStatement recognises SET [SESSION] name (= | TO) value [;] as the whole
// of stmt, but for space and comments, and returns the value's token.
func setStatement(stmt sqltext.Statement, name string) (sqltext.Token, bool) {
	set, ok := stmt.Setting()
	if !ok || stmt.Err() != nil || set.Reset || set.Scope != "" && set.Scope != "session" ||
		!set.Name.Is(name) || set.Assign.Kind == 0 || len(set.Value) != 1 {
		return sqltext.Token{}, false
	}
	return set.Value[0], true
}

// significant returns the tokens of stmt that carry meaning, without a
// final semicolon; ok is false if stmt does not lex.
func significant(stmt sqltext.Statement) ([]sqltext.Token, bool) {
	if stmt.Err() != nil {
		return nil, false
	}
	sig := stmt.Significant()
	if n := len(sig); n > 0 && sig[n-1].IsPunct(';') {
		sig = sig[:n-1]
	}
	return sig, true
}
