package measure

import (
	"context"
	"fmt"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

func TestMeasure(t *testing.T) {
	db, err := engine.Open("", engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _ := db.Connect()
	names, _ := a.QueryStrings(ctx, "SELECT name FROM duckdb_settings() ORDER BY name")
	for _, n := range names {
		row, err := a.QueryRow(ctx, fmt.Sprintf("SELECT current_setting('%s')::VARCHAR", n))
		if err != nil {
			fmt.Printf("%-45s READ-ERR %v\n", n, err)
			continue
		}
		v := row[0]
		if v == nil {
			fmt.Printf("%-45s NULL\n", n)
			continue
		}
		_, err = a.Exec(ctx, fmt.Sprintf("SET SESSION \"%s\" = '%s'", n, v))
		if err != nil {
			fmt.Printf("%-45s GLOBAL-ONLY %.80v\n", n, err)
		} else {
			fmt.Printf("%-45s local-ok\n", n)
		}
	}
}
