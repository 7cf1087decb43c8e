package classify

import (
	"errors"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

// TestWriteDuckDBCannotParse: a statement DuckDB's parser rejects and the
// lexer takes for a write is answered with DuckDB's parser error, not sent
// on to the leader, whose rules would call an unknown verb such as SELEC
// nondeterministic.
func TestWriteDuckDBCannotParse(t *testing.T) {
	for _, sql := range []string{"SELEC 1", "INSERT INTO t VALUS (1)", "UPDATE t SET"} {
		_, err := Statements(sql)
		var e *engine.Error
		if !errors.As(err, &e) || e.Type != "Parser" || !strings.Contains(e.Error(), "syntax error") {
			t.Errorf("%s: %v, want DuckDB's parser error", sql, err)
		}
	}
	// A read DuckDB cannot parse keeps its class and fails where it runs.
	if st, err := Statements("SELECT 1 FROM"); err != nil || len(st) != 1 || st[0].Class != Read {
		t.Errorf("SELECT 1 FROM: %+v, %v; want one read", st, err)
	}
}
