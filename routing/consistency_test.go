package routing

import (
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
)

func TestConsistencySetting(t *testing.T) {
	for sql, want := range map[string]Level{
		"SET duckraft_consistency = 'strong'":                      Strong,
		"set session DUCKRAFT_CONSISTENCY to 'Any'":                Any,
		"SET /* c */ duckraft_consistency -- c\n = 'bounded' ;":    Bounded,
		"  Set duckraft_consistency='session';  -- the default":    Session,
		"\v\fSET\tSESSION\nduckraft_consistency\f=\v'strong'\n;\n": Strong,
	} {
		if got, ok, err := consistencySetting(sqltext.Parse(sql)); !ok || err != nil || got != want {
			t.Errorf("%q: %q %v %v, want %q", sql, got, ok, err, want)
		}
	}
	for _, sql := range []string{"SET duckraft_consistency = 'fast'", "SET duckraft_consistency TO ''"} {
		if _, ok, err := consistencySetting(sqltext.Parse(sql)); !ok || err == nil {
			t.Errorf("%q: recognised %v, error %v; want an unknown level", sql, ok, err)
		}
	}
	for _, sql := range []string{
		"SET duckraft_consistency = 'x' ; SELECT 1",
		"SET duckraft_consistency = 'strong';;",
		"SET duckraft_consistency = 'strong",
		"SET duckraft_consistencyTO 'strong'",
		`SET "duckraft_consistency" = 'strong'`,
		"SET duckraft_consistency = E'strong'",
		"SET duckraft_consistency = $$strong$$",
		"SET duckraft_consistency = strong",
		"SET duckraft_consistency = 'it''s'",
		"SET duckraft_consistency == 'strong'",
		"SET GLOBAL duckraft_consistency = 'strong'",
		"SET SESSION SESSION duckraft_consistency = 'strong'",
		"RESET duckraft_consistency",
		"SET threads = 4",
		"SELECT 'SET duckraft_consistency = ''strong'''",
		"-- SET duckraft_consistency = 'strong'",
	} {
		if l, ok, err := consistencySetting(sqltext.Parse(sql)); ok {
			t.Errorf("%q recognised: %q %v", sql, l, err)
		}
	}
}
