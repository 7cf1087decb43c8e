package sqltext

import "testing"

func TestLiteralInsert(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO bench VALUES (1, 2, 'payload-1-2')":     true,
		`insert into main."T" (a, "B") VALUES (-1, NULL);`:   true,
		"INSERT INTO t VALUES (?, $1, E'x', true)":           true,
		"INSERT INTO t VALUES (random())":                    false,
		"INSERT INTO t VALUES ('1'::INT)":                    false,
		"INSERT INTO t VALUES (DEFAULT)":                     false,
		"INSERT INTO t SELECT 1":                             false,
		"INSERT INTO t VALUES (1) RETURNING rowid":           false,
		"INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING":    false,
		"INSERT INTO t BY NAME VALUES (1)":                   false,
		"UPDATE t SET a = 1":                                 false,
		"INSERT INTO t VALUES ('x":                           false,
		"INSERT INTO t (a) VALUES (1); UPDATE t SET a = 2":   false,
		"WITH x AS (SELECT 1) INSERT INTO t VALUES (1)":      false,
		"INSERT INTO t VALUES (1) , (2)":                     true,
		"INSERT OR REPLACE INTO t VALUES (1)":                false,
		"INSERT INTO t VALUES (1.5e3, X'ff', 0x10, 1_000)":   true,
		"INSERT INTO t VALUES (\"random\"())":                false,
		"INSERT INTO t VALUES (current_date)":                false,
		"INSERT INTO t (a, b VALUES (1)":                     false,
		"INSERT INTO t VALUES ($$x$$)":                       true,
		"INSERT INTO t VALUES (1) /* comment */ -- and more": true,
	} {
		if got := Parse(sql).LiteralInsert(); got != want {
			t.Errorf("LiteralInsert(%q) = %v, want %v", sql, got, want)
		}
	}
}

// BenchmarkLiteralInsert is what the hot path adds to a write: one more
// pass over the statement's tokens, and the lexing.
func BenchmarkLiteralInsert(b *testing.B) {
	for b.Loop() {
		if !Parse("INSERT INTO bench VALUES (1, 2, 'payload-1-2')").LiteralInsert() {
			b.Fatal("not a literal insert")
		}
	}
}
