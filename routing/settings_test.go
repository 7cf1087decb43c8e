package routing

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestSettingsOutsideTheAllowListAreRefused sends settings a client could
// use to change its node for everyone: DuckDB applies a plain SET
// default_collation or SET memory_limit to every connection, the applier's
// included, so before the allow-list they ran on the client's session and
// changed what replication computed on that node. Each is refused with
// ErrSettingRefused and leaves the node's settings as they were; the
// allowed session settings still run.
func TestSettingsOutsideTheAllowListAreRefused(t *testing.T) {
	net := newInmemNet(t, "n1", "n2")
	n2 := net.node("n2")
	s := n2.session(t)
	for _, sql := range []string{
		"SET default_collation = 'nocase'",
		"SET default_order TO 'desc'",
		"SET SESSION default_null_order = 'nulls_first'",
		"SET memory_limit = '16MB'",
		"SET threads = 1",
		"SET lock_configuration = true",
		`SET "integer_division" = true`,
		"SET VARIABLE x = 42",
		"RESET default_collation",
		"RESET ALL",
		"PRAGMA default_collation = 'nocase'",
		"PRAGMA memory_limit = '16MB'",
		"PRAGMA threads = 1",
		"PRAGMA enable_profiling",
		"PRAGMA profiling_output = '/tmp/duckraft-profile'",
		"SET profiling_output = '/tmp/duckraft-profile'",
		"SET log_query_path = '/tmp/duckraft-queries'",
		"SET debug_checkpoint_abort = 'before_header'",
		"SET TimeZone = 'UTC'; SET default_order = 'DESC'",
	} {
		if _, err := run(t, n2, s, sql); !errors.Is(err, ErrSettingRefused) {
			t.Errorf("%s: %v, want ErrSettingRefused", sql, err)
		}
	}
	mustRun(t, n2, s, "BEGIN")
	if _, err := run(t, n2, s, "SET default_collation = 'nocase'"); !errors.Is(err, ErrSettingRefused) {
		t.Errorf("SET in a transaction: %v", err)
	}
	mustRun(t, n2, s, "ROLLBACK")
	conn, err := n2.db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for setting, want := range map[string]string{"default_collation": "", "default_order": "ASCENDING", "lock_configuration": "false"} {
		row, err := conn.QueryRow(context.Background(), "SELECT current_setting('"+setting+"')::VARCHAR")
		if err != nil || fmt.Sprint(row[0]) != want {
			t.Errorf("after the refusals %s is %v (%v), want %q", setting, row, err, want)
		}
	}
	for _, sql := range []string{
		"SET TimeZone = 'Asia/Tokyo'",
		"SET SESSION TimeZone TO 'UTC'",
		`SET "timezone" = 'Europe/Paris'`,
		"RESET TimeZone",
		"SET Calendar = 'gregorian'",
		"SET search_path = 'main'",
		"SET schema = 'main'",
		"USE memory",
		"SET enable_progress_bar = false",
		"SET explain_output = 'all'",
		"SET duckraft_consistency = 'strong'",
		"PRAGMA table_info('t')",
		"PRAGMA version",
	} {
		if _, err := run(t, n2, s, sql); err != nil && errors.Is(err, ErrSettingRefused) {
			t.Errorf("%s: %v, want it allowed", sql, err)
		}
	}
}
