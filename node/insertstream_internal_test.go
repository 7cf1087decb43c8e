package node

import (
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

// FuzzInsertStreamIsOneStatement checks what makes recognising the insert
// statement safe: the server runs none of the text it recognises, so a text
// it recognises must hold nothing but that one statement. DuckDB's own
// parser must find exactly one statement in every text parseInsertStream
// accepts (or reject it whole), and the target and stream id must be the
// text's own.
func FuzzInsertStreamIsOneStatement(f *testing.F) {
	p, err := engine.NewParser()
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	const stream = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	for _, seed := range []string{
		"INSERT INTO s SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(col0 INTEGER), ordered := true)",
		"INSERT INTO main.\"odd.name \"\"x\"\"\" SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(col0 INTEGER, col1 VARCHAR), ordered := false)",
		`INSERT INTO s SELECT * FROM scan_data_from_quack_client('x', NULL::STRUCT(col0 STRUCT("a)b" INTEGER, c DECIMAL(18,3)[], m MAP(VARCHAR, ENUM('x)', 'y''z;')))), ordered := true)`,
		"INSERT INTO s SELECT * FROM scan_data_from_quack_client('x', NULL::STRUCT(col0 INTEGER), ordered := true); DROP TABLE s; SELECT (1)",
		"INSERT INTO s SELECT * FROM scan_data_from_quack_client('x', NULL::STRUCT(col0 INTEGER); DROP TABLE s; SELECT (1), ordered := true)",
		"INSERT INTO s SELECT * FROM scan_data_from_quack_client('x', NULL::STRUCT(col0 VARCHAR[3], col1 TIMESTAMP WITH TIME ZONE), ordered := true)",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		target, id, ok := parseInsertStream(sql)
		if !ok {
			return
		}
		if !strings.HasPrefix(sql, "INSERT INTO "+target+" SELECT * FROM "+streamFunction+"('"+id+"', NULL::STRUCT(col0 ") {
			t.Fatalf("%q: target %q and stream %q are not the text's", sql, target, id)
		}
		if n, err := p.Count(sql); err == nil && n != 1 {
			t.Fatalf("%q is recognised as an insert stream, and DuckDB's parser makes %d statements of it", sql, n)
		}
	})
}
