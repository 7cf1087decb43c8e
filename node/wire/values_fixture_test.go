package wire

import (
	"os"
	"path/filepath"
	"testing"
)

// typesFixture is the captured response to the 'types' case query; the
// steering repo's shared/ folder sits beside the project root.
const typesFixture = "../../../shared/fixtures/quack-wire/q1-duckdb-1.5/38-types-query-response.bin"

// TestTextOfDecodedFixture decodes DuckDB's own PREPARE_RESPONSE for the
// 'types' case and checks every cell's text against the CLI printout.
func TestTextOfDecodedFixture(t *testing.T) {
	body, err := os.ReadFile(filepath.FromSlash(typesFixture))
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	_, msg, err := DecodeMessage(body, Q1, Limits{})
	if err != nil {
		t.Fatalf("decoding the fixture: %v", err)
	}
	resp, ok := msg.(*PrepareResponse)
	if !ok {
		t.Fatalf("fixture decodes to %T, want *PrepareResponse", msg)
	}
	if len(resp.Chunks) != 1 {
		t.Fatalf("fixture has %d chunks, want 1", len(resp.Chunks))
	}
	header, want := parseCLIOutput(t, typesCaseOutput)
	checkChunkText(t, resp.Chunks[0], header, want)

	// The decoded types are those the in-memory test builds from.
	for k, f := range typesCaseColumns() {
		if got := resp.Types[k].String(); got != f.Type.String() || resp.Names[k] != f.Name {
			t.Errorf("column %d is %s %s, want %s %s", k, resp.Names[k], got, f.Name, f.Type.String())
		}
	}
}
