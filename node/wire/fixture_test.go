package wire

import (
	"bytes"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fixtureRoot is the quack-wire fixture directory, which sits beside the
// repository clone (../shared from the repository root).
var fixtureRoot = filepath.Join("..", "..", "..", "shared", "fixtures", "quack-wire")

// fixtureFiles returns the non-empty message bodies of fixture set name,
// keyed by path relative to the set, skipping the test when the set is
// missing.
func fixtureFiles(t *testing.T, name, pattern string) map[string][]byte {
	t.Helper()
	dir := filepath.Join(fixtureRoot, name)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("fixture set %s not available (%v); it lives in ../shared beside the repository", dir, err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no fixtures matching %s in %s", pattern, dir)
	}
	out := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			continue // HTTP 500 answers have no body
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// roundTrip decodes b as a whole message of generation g, re-encodes the
// decoded values and requires the identical bytes.
func roundTrip(t *testing.T, g Generation, b []byte) (Header, Message) {
	t.Helper()
	h, m, err := DecodeMessage(b, g, Limits{})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	out, err := AppendMessage(nil, g, h, m)
	if err != nil {
		t.Fatalf("encode %T: %v", m, err)
	}
	if !bytes.Equal(out, b) {
		t.Fatalf("re-encoded %s differs (%d vs %d bytes) at byte %d\nwant %s\ngot  %s",
			h.Type, len(out), len(b), firstDiff(out, b), hexAround(b, firstDiff(out, b)), hexAround(out, firstDiff(out, b)))
	}
	return h, m
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func hexAround(b []byte, i int) string {
	lo, hi := max(0, i-16), min(len(b), i+16)
	return hex.EncodeToString(b[lo:hi])
}

func TestQ1FixturesRoundTrip(t *testing.T) {
	files := fixtureFiles(t, "q1-duckdb-1.5", "*.bin")
	if len(files) != 88 {
		t.Errorf("found %d q1 fixture bodies, want 88", len(files))
	}
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			h, _ := roundTrip(t, Q1, files[name])
			if strings.HasSuffix(name, "-response.bin") != isResponse(h.Type) {
				t.Errorf("direction of %s does not match its file name", h.Type)
			}
		})
	}
}

func isResponse(t MessageType) bool {
	switch t {
	case MsgConnectionResponse, MsgPrepareResponse, MsgFetchResponse, MsgSuccessResponse,
		MsgProgressResponse, MsgErrorResponse:
		return true
	}
	return false
}

func TestDevC853cd38FixturesRoundTrip(t *testing.T) {
	files := fixtureFiles(t, "dev-2026-07-c853cd38", "*/*.body.bin")
	if len(files) != 152 {
		t.Errorf("found %d non-empty c853cd38 bodies, want 152", len(files))
	}
	seen := map[MessageType]int{}
	for _, name := range sortedKeys(files) {
		t.Run(name, func(t *testing.T) {
			h, m := roundTrip(t, Q1, files[name])
			seen[h.Type]++
			if p, ok := m.(*PrepareRequest); ok && !p.HasQueryUUID {
				t.Errorf("c853cd38 PREPARE_REQUEST without query_uuid")
			}
		})
	}
	for _, typ := range []MessageType{MsgCancelRequest, MsgProgressRequest, MsgProgressResponse} {
		if seen[typ] == 0 {
			t.Errorf("no %s among the c853cd38 fixtures", typ)
		}
	}
}

// decodeFixture decodes one q1 fixture body.
func decodeFixture(t *testing.T, name string) (Header, Message) {
	t.Helper()
	path := filepath.Join(fixtureRoot, "q1-duckdb-1.5", name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("fixture %s not available: %v", path, err)
	}
	h, m, err := DecodeMessage(b, Q1, Limits{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return h, m
}

func stringAt(t *testing.T, v *Vector, i int) string {
	t.Helper()
	if !v.IsValid(i) {
		t.Fatalf("row %d is NULL", i)
	}
	return string(v.Bytes[v.Offsets[i]:v.Offsets[i+1]])
}

func TestSelect42Content(t *testing.T) {
	_, m := decodeFixture(t, "11-select42-query-response.bin")
	p, ok := m.(*PrepareResponse)
	if !ok {
		t.Fatalf("got %T", m)
	}
	if got := []string{p.Types[0].String(), p.Types[1].String()}; got[0] != "INTEGER" || got[1] != "VARCHAR" {
		t.Errorf("types %v", got)
	}
	if strings.Join(p.Names, ",") != "answer,s" || p.NeedsMoreFetch || len(p.Chunks) != 1 {
		t.Fatalf("names %v, needs_more_fetch %v, %d chunks", p.Names, p.NeedsMoreFetch, len(p.Chunks))
	}
	c := p.Chunks[0]
	if c.Rows != 1 || le32(c.Columns[0].Data) != 42 || stringAt(t, c.Columns[1], 0) != "duck" {
		t.Errorf("chunk %+v", c)
	}

	_, m = decodeFixture(t, "11-select42-query-request.bin")
	if q := m.(*PrepareRequest); q.SQL != "SELECT 42::INTEGER AS answer, 'duck'::VARCHAR AS s" || q.HasQueryUUID {
		t.Errorf("request %+v", q)
	}
}

func le32(b []byte) int32 {
	return int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

func le64(b []byte) int64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return int64(v)
}

func TestAppendFixtureContent(t *testing.T) {
	h, m := decodeFixture(t, "32-append-append-request.bin")
	a, ok := m.(*AppendRequest)
	if !ok {
		t.Fatalf("got %T", m)
	}
	if h.ClientQueryID != Idx(6) || a.Schema != "main" || a.Table != "t_append" || a.Chunk == nil {
		t.Fatalf("header %+v body %+v", h, a)
	}
	c := a.Chunk
	if c.Rows != 3 || len(c.Columns) != 3 {
		t.Fatalf("chunk %d rows %d columns", c.Rows, len(c.Columns))
	}
	i, s, d := c.Columns[0], c.Columns[1], c.Columns[2]
	for row, want := range []int32{1, 2, 3} {
		if got := le32(i.Data[4*row:]); got != want {
			t.Errorf("i[%d] = %d", row, got)
		}
	}
	if stringAt(t, s, 0) != "one" || s.IsValid(1) || stringAt(t, s, 2) != "a string longer than 12 bytes" {
		t.Errorf("s column wrong")
	}
	if f := math.Float64frombits(uint64(le64(d.Data))); f != 1.5 || d.IsValid(1) {
		t.Errorf("d[0] = %v, d[1] valid %v", f, d.IsValid(1))
	}
	if f := math.Float64frombits(uint64(le64(d.Data[16:]))); f != -0.25 {
		t.Errorf("d[2] = %v", f)
	}
}

// TestTypesFixtureContent checks the 39-column result against the client's
// printed output in INDEX.md for a selection of columns.
func TestTypesFixtureContent(t *testing.T) {
	_, m := decodeFixture(t, "38-types-query-response.bin")
	p := m.(*PrepareResponse)
	if len(p.Types) != 39 || len(p.Chunks) != 1 || p.Chunks[0].Rows != 3 {
		t.Fatalf("%d types, %d chunks", len(p.Types), len(p.Chunks))
	}
	col := map[string]*Vector{}
	for i, n := range p.Names {
		col[n] = p.Chunks[0].Columns[i]
	}
	wantTypes := map[string]string{
		"c_decimal_4_1":   "DECIMAL(4,1)",
		"c_decimal_38_10": "DECIMAL(38,10)",
		"c_timestamptz":   "TIMESTAMP WITH TIME ZONE",
		"c_enum":          "ENUM('sad', 'ok', 'happy')",
		"c_int_list":      "INTEGER[]",
		"c_varchar_list":  "VARCHAR[]",
		"c_int_array3":    "INTEGER[3]",
		"c_struct":        "STRUCT(a INTEGER, b VARCHAR)",
		"c_map":           "MAP(VARCHAR, INTEGER)",
		"c_union":         "UNION(i INTEGER, s VARCHAR)",
		"c_bit":           "BIT",
		"c_uuid":          "UUID",
	}
	for name, want := range wantTypes {
		if got := col[name].Type.String(); got != want {
			t.Errorf("%s type %q, want %q", name, got, want)
		}
	}
	// Row 2 (index 1) is NULL in every column but id.
	for i, n := range p.Names[1:] {
		if col[n].IsValid(1) {
			t.Errorf("column %d %s row 2 is not NULL", i+1, n)
		}
	}
	if got := le32(col["c_integer"].Data); got != math.MinInt32 {
		t.Errorf("c_integer[0] = %d", got)
	}
	if got := le32(col["c_integer"].Data[8:]); got != 42 {
		t.Errorf("c_integer[2] = %d", got)
	}
	if got := le64(col["c_bigint"].Data[16:]); got != math.MaxInt64 {
		t.Errorf("c_bigint[2] = %d", got)
	}
	if got := stringAt(t, col["c_varchar_long"], 2); got != "ünïcødé quack 🦆 string" {
		t.Errorf("c_varchar_long[2] = %q", got)
	}
	if got := stringAt(t, col["c_blob"], 0); got != "\xDE\xAD\xBE\xEF" {
		t.Errorf("c_blob[0] = %x", got)
	}
	if got := le32(col["c_date"].Data); got != 19782 { // 2024-02-29
		t.Errorf("c_date[0] = %d", got)
	}
	if got := le64(col["c_decimal_18_3"].Data); got != 123456789012345678 {
		t.Errorf("c_decimal_18_3[0] = %d", got)
	}
	if got := col["c_enum"].Data[0]; got != 1 { // 'ok'
		t.Errorf("c_enum[0] = %d", got)
	}
	// c_int_list row 1: [1, 2, NULL, 3]; row 3: [] (offset after the data).
	l := col["c_int_list"]
	if l.Entries[0] != (ListEntry{0, 4}) || l.Entries[2] != (ListEntry{4, 0}) || l.Children[0].IsValid(2) {
		t.Errorf("c_int_list entries %v", l.Entries)
	}
	if got := le32(l.Children[0].Data[12:]); got != 3 {
		t.Errorf("c_int_list[0][3] = %d", got)
	}
	// c_union row 3 is 'seven' in member s (tag 1).
	u := col["c_union"]
	if u.Children[0].Data[2] != 1 || stringAt(t, u.Children[2], 2) != "seven" {
		t.Errorf("c_union row 3 wrong")
	}
	// c_uuid 550e8400-e29b-41d4-a716-446655440000: upper with the top bit flipped.
	uu := col["c_uuid"].Data
	if upper := uint64(le64(uu[8:])) ^ 1<<63; upper != 0x550e8400e29b41d4 || uint64(le64(uu)) != 0xa716446655440000 {
		t.Errorf("c_uuid[0] = %x", uu[:16])
	}
}

func TestErrorFixtureContent(t *testing.T) {
	_, m := decodeFixture(t, "41-missing-table-query-error-response.bin")
	e := m.(*ErrorResponse)
	if !strings.HasPrefix(e.Message, "Table with name no_such_table does not exist!") {
		t.Errorf("message %q", e.Message)
	}
	h, m := decodeFixture(t, "01-attach-connect-request.bin")
	c := m.(*ConnectionRequest)
	want := ConnectionRequest{AuthString: "q1-golden-token-0123456789", ClientDuckDBVersion: "v1.5.4",
		ClientPlatform: "linux_amd64", MinVersion: 1, MaxVersion: 1}
	if *c != want || h.ClientQueryID != Idx(4) {
		t.Errorf("connect %+v %+v", h, c)
	}
}

func TestRange5mFixtures(t *testing.T) {
	_, m := decodeFixture(t, "19-range5m-query-response.bin")
	p := m.(*PrepareResponse)
	if !p.NeedsMoreFetch || len(p.Chunks) != 12 {
		t.Fatalf("needs_more_fetch %v, %d chunks", p.NeedsMoreFetch, len(p.Chunks))
	}
	for i, c := range p.Chunks {
		if c.Rows != 2048 || le64(c.Columns[0].Data) != int64(i*2048) {
			t.Errorf("chunk %d starts at %d", i, le64(c.Columns[0].Data))
		}
	}
	_, m = decodeFixture(t, "24-range5m-fetch-end-response.bin")
	if f := m.(*FetchResponse); len(f.Chunks) != 0 || f.BatchIndex.Valid {
		t.Errorf("end marker %+v", f)
	}
}
