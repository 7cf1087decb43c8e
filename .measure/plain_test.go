package measure

import (
	"context"
	"fmt"
	"testing"

	"github.com/duckraft/duckraft/node/engine"
)

func TestPlain(t *testing.T) {
	db, _ := engine.Open("", engine.Options{})
	ctx := context.Background()
	for _, c := range [][2]string{{"schema", "'main'"}, {"enable_progress_bar", "true"}, {"enable_progress_bar_print", "false"}, {"progress_bar_time", "10"}, {"explain_output", "'all'"}, {"TimeZone", "'Asia/Tokyo'"}, {"default_collation", "'nocase'"}, {"default_order", "'desc'"}, {"threads", "1"}, {"memory_limit", "'1GB'"}, {"search_path", "'main'"}, {"Calendar", "'japanese'"}, {"integer_division", "true"}, {"preserve_insertion_order", "false"}, {"lock_configuration", "false"}, {"errors_as_json", "true"}} {
		a, _ := db.Connect()
		b, _ := db.Connect()
		before, _ := b.QueryRow(ctx, fmt.Sprintf("SELECT current_setting('%s')::VARCHAR", c[0]))
		_, err := a.Exec(ctx, fmt.Sprintf("SET %s = %s", c[0], c[1]))
		after, _ := b.QueryRow(ctx, fmt.Sprintf("SELECT current_setting('%s')::VARCHAR", c[0]))
		own, _ := a.QueryRow(ctx, fmt.Sprintf("SELECT current_setting('%s')::VARCHAR", c[0]))
		fmt.Printf("%-25s err=%v other before=%v after=%v own=%v\n", c[0], err, before, after, own)
		a.Close(); b.Close()
	}
}
