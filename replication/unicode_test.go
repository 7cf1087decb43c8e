package replication

import (
	"testing"

	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// TestUnicodeSpacesInAppliedSQL: DuckDB reads U+00A0 (and the other
// Unicode spaces sqltext's lexer knows) as white space, so the applier's token
// rules must too: a statement joined by no-break spaces still reads rows
// while it writes (one thread, so nextval hands out values in the same
// order everywhere), still names RETURNING, and one trailing no-break
// space after its semicolon is not a second statement.
func TestUnicodeSpacesInAppliedSQL(t *testing.T) {
	const nbsp = "\u00a0"
	seq := "INSERT" + nbsp + "INTO" + nbsp + "t" + nbsp + "SELECT" + nbsp + "nextval('s')" + nbsp + "FROM" + nbsp + "range(10)"
	if !serialApply([]pending{{cmd: wal.Command{Entry: wal.Statement{SQL: seq}}}}) {
		t.Errorf("serialApply(%q) = false, want true: it reads rows while it writes", seq)
	}
	if ret := "INSERT INTO t VALUES (1)" + nbsp + "RETURNING" + nbsp + "*"; !hasWord(sqltext.Parse(ret), "RETURNING") {
		t.Errorf("hasWord(%q, RETURNING) = false", ret)
	}
	for sql, refused := range map[string]bool{
		"INSERT INTO t VALUES (1);" + nbsp:                   false,
		"INSERT INTO t VALUES (1);" + nbsp + "COMMIT":        true,
		"SET" + nbsp + "threads = 1":                         true,
		"\u3000INSERT INTO t VALUES (1)":                     false,
		"INSERT INTO t VALUES ('" + nbsp + ";" + nbsp + "')": false,
	} {
		if err := checkStatement(sqltext.Parse(sql)); (err != nil) != refused {
			t.Errorf("checkStatement(%q) = %v, want refused %v", sql, err, refused)
		}
	}
}
