package replication

import (
	"context"
	"testing"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// TestPinsKeepDefaults checks that pinning changes no setting's value on a
// fresh database but the ones pinnedValues names: the pins hold DuckDB's
// defaults (and UTC), so the applier computes what an unpinned connection
// of an untouched node computes with those.
func TestPinsKeepDefaults(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	pinned, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	if _, err := readPins(pinned); err != nil {
		t.Fatal(err)
	}
	fresh, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Exec(context.Background(), "SET SESSION TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	for name, value := range pinnedValues {
		if _, err := fresh.Exec(context.Background(), "SET SESSION "+sqlquote.Ident(name)+" = "+sqlquote.Literal(value)); err != nil {
			t.Fatal(err)
		}
	}
	// DuckDB reads default_order back as ASCENDING but, set so, as ASC.
	const all = "SELECT string_agg(name || '=' || replace(coalesce(value, 'NULL'), 'ASCENDING', 'ASC'), ', ' ORDER BY name) FROM duckdb_settings()"
	want, err := fresh.QueryRow(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pinned.QueryRow(context.Background(), all)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != want[0] {
		for _, name := range pinnedSettings {
			q := "SELECT current_setting(" + sqlquote.Literal(name) + ")::VARCHAR"
			a, _ := pinned.QueryRow(context.Background(), q)
			b, _ := fresh.QueryRow(context.Background(), q)
			if a[0] != b[0] && !(name == "default_order" && a[0] == "ASC" && b[0] == "ASCENDING") {
				t.Errorf("%s: pinned %v, default %v", name, a[0], b[0])
			}
		}
		t.Fatalf("pinning changed settings:\n got %v\nwant %v", got[0], want[0])
	}
}
