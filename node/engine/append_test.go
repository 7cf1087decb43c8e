package engine

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// int32Vector builds an INTEGER vector; NULL rows are where null(i) is true.
func int32Vector(n int, value func(i int) int32, null func(i int) bool) *wire.Vector {
	v := &wire.Vector{Type: lt(wire.TypeInteger), Count: n, Data: make([]byte, 4*n)}
	for i := range n {
		binary.LittleEndian.PutUint32(v.Data[4*i:], uint32(value(i)))
	}
	setNulls(v, null)
	return v
}

func setNulls(v *wire.Vector, null func(i int) bool) {
	if null == nil {
		return
	}
	v.Validity = make([]byte, 8*((v.Count+63)/64))
	for i := range v.Count {
		if !null(i) {
			v.Validity[i/8] |= 1 << (i % 8)
		}
	}
}

func stringVector(n int, value func(i int) string, null func(i int) bool) *wire.Vector {
	v := &wire.Vector{Type: lt(wire.TypeVarchar), Count: n, Offsets: []uint32{0}}
	for i := range n {
		if null == nil || !null(i) {
			v.Bytes = append(v.Bytes, value(i)...)
		}
		v.Offsets = append(v.Offsets, uint32(len(v.Bytes)))
	}
	setNulls(v, null)
	return v
}

// TestAppendBuiltChunk appends a hand-built 5000-row chunk, more than one
// DuckDB vector, with NULLs, long strings and lists whose child rows are
// not in row order.
func TestAppendBuiltChunk(t *testing.T) {
	c := connect(t, openTest(t))
	const n = 5000
	exec(t, c, "CREATE TABLE got (id INTEGER, s VARCHAR, l INTEGER[])")
	exec(t, c, fmt.Sprintf(`CREATE TABLE want AS SELECT range::INTEGER AS id,
		CASE WHEN range %% 7 = 0 THEN NULL ELSE repeat('x', (range %% 20)::INTEGER) || range END AS s,
		CASE WHEN range %% 5 = 0 THEN NULL ELSE [range, NULL, -range]::INTEGER[] END AS l
		FROM range(%d)`, n))

	// List row i uses child rows 3*(n-1-i) .. +3: reversed, so the child
	// must be re-laid out per batch.
	child := int32Vector(3*n, func(j int) int32 {
		row, k := n-1-j/3, j%3
		return []int32{int32(row), 0, int32(-row)}[k]
	}, func(j int) bool { return j%3 == 1 })
	list := &wire.Vector{Type: listOf(lt(wire.TypeInteger)), Count: n, ListSize: 3 * n, Children: []*wire.Vector{child}}
	for i := range n {
		list.Entries = append(list.Entries, wire.ListEntry{Offset: uint64(3 * (n - 1 - i)), Length: 3})
	}
	setNulls(list, func(i int) bool { return i%5 == 0 })
	chunk := &wire.DataChunk{Rows: n, Columns: []*wire.Vector{
		int32Vector(n, func(i int) int32 { return int32(i) }, nil),
		stringVector(n, func(i int) string { return strings.Repeat("x", i%20) + fmt.Sprint(i) }, func(i int) bool { return i%7 == 0 }),
		list,
	}}
	if err := c.Append("", "got", chunk); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"s", "l"} {
		if d := queryInt64(t, c, fmt.Sprintf("SELECT count(*) FROM want FULL JOIN got USING (id) WHERE want.%[1]s IS DISTINCT FROM got.%[1]s", col)); d != 0 {
			t.Errorf("column %s: %d rows differ", col, d)
		}
	}
}

func TestAppendCasts(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE t (a BIGINT, b VARCHAR)")
	chunk := &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{
		int32Vector(2, func(i int) int32 { return int32(i + 40) }, nil),
		int32Vector(2, func(i int) int32 { return int32(i) }, func(i int) bool { return i == 1 }),
	}}
	if err := c.Append("main", "t", chunk); err != nil {
		t.Fatal(err)
	}
	_, chunks := collect(t, c, "SELECT sum(a)::BIGINT, string_agg(b, ',') FROM t")
	if int64At(chunks[0].Columns[0], 0) != 81 || str(chunks[0].Columns[1], 0) != "0" {
		t.Errorf("got %d, %q", int64At(chunks[0].Columns[0], 0), str(chunks[0].Columns[1], 0))
	}
}

func TestAppendErrors(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE t (i INTEGER, s VARCHAR)")
	good := func() *wire.DataChunk {
		return &wire.DataChunk{Rows: 3, Columns: []*wire.Vector{
			int32Vector(3, func(i int) int32 { return int32(i) }, nil),
			stringVector(3, func(i int) string { return "a string longer than twelve" }, nil),
		}}
	}
	cases := []struct {
		name   string
		table  string
		mutate func(*wire.DataChunk)
		want   string
	}{
		{"missing table", "nope", nil, `append to main.nope: Catalog Error: Table '"".main.nope' could not be found`},
		{"column count", "t", func(ch *wire.DataChunk) { ch.Columns = ch.Columns[:1] }, "table has 2 columns, chunk has 1"},
		{"uncastable", "t", func(ch *wire.DataChunk) {
			ch.Columns[0] = stringVector(3, func(int) string { return "abc" }, nil)
		}, "append to main.t: column 1 is INTEGER, chunk has VARCHAR: "},
		{"short data", "t", func(ch *wire.DataChunk) { ch.Columns[0].Data = ch.Columns[0].Data[:5] }, "column 1: 5 data bytes"},
		{"short column", "t", func(ch *wire.DataChunk) { ch.Columns[1].Count = 2 }, "column 2 has 2 rows, chunk has 3"},
		{"offsets", "t", func(ch *wire.DataChunk) { ch.Columns[1].Offsets[2] = 1000 }, "string offsets"},
		{"few offsets", "t", func(ch *wire.DataChunk) { ch.Columns[1].Offsets = ch.Columns[1].Offsets[:2] }, "string offsets for 3 rows"},
		{"utf8", "t", func(ch *wire.DataChunk) { ch.Columns[1].Bytes[0] = 0xff }, "invalid UTF-8"},
		{"validity", "t", func(ch *wire.DataChunk) { ch.Columns[0].Validity = []byte{} }, "validity of 0 bytes"},
		{"nil column", "t", func(ch *wire.DataChunk) { ch.Columns[0] = nil }, "column 1 is missing"},
		{"bad type", "t", func(ch *wire.DataChunk) { ch.Columns[0].Type = wire.LogicalType{ID: wire.TypeList} }, "LIST"},
	}
	for _, tc := range cases {
		ch := good()
		if tc.mutate != nil {
			tc.mutate(ch)
		}
		err := c.Append("main", tc.table, ch)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if n := queryInt64(t, c, "SELECT count(*) FROM t"); n != 0 {
		t.Errorf("failed appends left %d rows", n)
	}
	if c.InTransaction() {
		t.Error("failed append left a transaction open")
	}
}

func TestAppendMalformedNested(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE t (l INTEGER[], a INTEGER[2], s STRUCT(x INTEGER))")
	build := func() *wire.DataChunk {
		list := &wire.Vector{Type: listOf(lt(wire.TypeInteger)), Count: 1, ListSize: 2,
			Entries:  []wire.ListEntry{{Offset: 0, Length: 2}},
			Children: []*wire.Vector{int32Vector(2, func(i int) int32 { return 1 }, nil)}}
		array := &wire.Vector{Type: wire.LogicalType{ID: wire.TypeArray, ArraySize: 2, Child: ptr(lt(wire.TypeInteger))}, Count: 1,
			Children: []*wire.Vector{int32Vector(2, func(i int) int32 { return 2 }, nil)}}
		st := &wire.Vector{Type: structOf(wire.Field{Name: "x", Type: lt(wire.TypeInteger)}), Count: 1,
			Children: []*wire.Vector{int32Vector(1, func(i int) int32 { return 3 }, nil)}}
		return &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{list, array, st}}
	}
	cases := []struct {
		mutate func(*wire.DataChunk)
		want   string
	}{
		{func(ch *wire.DataChunk) { ch.Columns[0].Entries[0].Offset = 1 }, "list entry 1+2 beyond 2 child rows"},
		{func(ch *wire.DataChunk) { ch.Columns[0].Entries[0].Length = 1 << 63 }, "beyond 2 child rows"},
		{func(ch *wire.DataChunk) { ch.Columns[0].Entries = nil }, "0 list entries"},
		{func(ch *wire.DataChunk) { ch.Columns[0].Children = nil }, "LIST without its child vector"},
		{func(ch *wire.DataChunk) { ch.Columns[1].Children[0].Count = 1 }, "beyond the vector's 1 rows"},
		{func(ch *wire.DataChunk) { ch.Columns[1].Children = nil }, "ARRAY without its child vector"},
		{func(ch *wire.DataChunk) { ch.Columns[2].Children = nil }, "0 children for 1 fields"},
		{func(ch *wire.DataChunk) { ch.Columns[2].Children[0] = nil }, "field 1 is missing"},
	}
	for _, tc := range cases {
		ch := build()
		tc.mutate(ch)
		if err := c.Append("", "t", ch); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
	exec(t, c, "CREATE TABLE e (e ENUM('a', 'b'), b BOOLEAN)")
	enum := &wire.Vector{Type: wire.LogicalType{ID: wire.TypeEnum, EnumValues: []string{"a", "b"}}, Count: 2, Data: []byte{1, 2}}
	boolean := &wire.Vector{Type: lt(wire.TypeBoolean), Count: 2, Data: []byte{1, 0}}
	if err := c.Append("", "e", &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{enum, boolean}}); err == nil || !strings.Contains(err.Error(), "row 1: invalid ENUM(2 values) value 2") {
		t.Errorf("enum index beyond the dictionary: %v", err)
	}
	enum.Data[1], boolean.Data[1] = 0, 0x80
	if err := c.Append("", "e", &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{enum, boolean}}); err == nil || !strings.Contains(err.Error(), "invalid BOOLEAN value 128") {
		t.Errorf("boolean 0x80: %v", err)
	}
	setNulls(boolean, func(i int) bool { return i == 1 })
	if err := c.Append("", "e", &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{enum, boolean}}); err != nil {
		t.Errorf("boolean NULL slot 0x80: %v", err)
	}

	if err := c.Append("", "t", build()); err != nil {
		t.Fatal(err)
	}
	_, chunks := collect(t, c, "SELECT l::VARCHAR || a::VARCHAR || s::VARCHAR FROM t")
	if got := str(chunks[0].Columns[0], 0); got != "[1, 1][2, 2]{'x': 3}" {
		t.Errorf("got %q", got)
	}
}

// TestAppendAtomic checks that a chunk failing in its second DuckDB batch
// leaves nothing behind, and that inside a transaction the append is part
// of it.
func TestAppendAtomic(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE t (i INTEGER NOT NULL)")
	const n = 5000
	chunk := &wire.DataChunk{Rows: n, Columns: []*wire.Vector{
		int32Vector(n, func(i int) int32 { return int32(i) }, func(i int) bool { return i == 4000 }),
	}}
	if err := c.Append("", "t", chunk); err == nil || !strings.Contains(err.Error(), "NOT NULL") {
		t.Fatalf("error %v", err)
	}
	if got := queryInt64(t, c, "SELECT count(*) FROM t"); got != 0 {
		t.Errorf("%d rows left by a failed append", got)
	}

	chunk.Columns[0].Validity = nil
	exec(t, c, "BEGIN")
	if err := c.Append("", "t", chunk); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "ROLLBACK")
	if got := queryInt64(t, c, "SELECT count(*) FROM t"); got != 0 {
		t.Errorf("%d rows survived the rollback", got)
	}
	if err := c.Append("", "t", chunk); err != nil {
		t.Fatal(err)
	}
	if got := queryInt64(t, c, "SELECT count(*) FROM t"); got != n {
		t.Errorf("%d rows, want %d", got, n)
	}
}

// TestAppendNestedSchema appends to tables of DuckDB 2.0's nested schemas,
// which the table appender cannot name, including one that shares its
// schema's and table's names with another at another path, and one with a
// generated column.
func TestAppendNestedSchema(t *testing.T) {
	c := connect(t, openTest(t))
	for _, q := range []string{
		"CREATE SCHEMA a", "CREATE SCHEMA a.b", "CREATE SCHEMA x", "CREATE SCHEMA x.b",
		"CREATE TABLE a.b.t(i BIGINT, s VARCHAR)", "CREATE TABLE x.b.t(i BIGINT, s VARCHAR)",
		"CREATE TABLE a.b.g(i BIGINT, s VARCHAR, twice BIGINT GENERATED ALWAYS AS (i * 2))",
	} {
		exec(t, c, q)
	}
	chunk := &wire.DataChunk{Rows: 3, Columns: []*wire.Vector{
		int32Vector(3, func(i int) int32 { return int32(i + 1) }, nil),
		stringVector(3, func(i int) string { return fmt.Sprint("s", i) }, func(i int) bool { return i == 2 }),
	}}
	for _, table := range []string{"t", "g"} {
		if err := c.AppendPath([]string{"a", "b"}, table, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if got := queryInt64(t, c, "SELECT sum(i) FROM a.b.t WHERE s IS NOT NULL OR i = 3"); got != 6 {
		t.Errorf("a.b.t sums to %d, want 6", got)
	}
	if got := queryInt64(t, c, "SELECT sum(twice) FROM a.b.g"); got != 12 {
		t.Errorf("a.b.g's generated column sums to %d, want 12", got)
	}
	if got := queryInt64(t, c, "SELECT count(*) FROM x.b.t"); got != 0 {
		t.Errorf("x.b.t has %d rows, want none", got)
	}
	err := c.AppendPath([]string{"a", "nope"}, "t", chunk)
	if err == nil || !strings.Contains(err.Error(), "append to a.nope.t") {
		t.Errorf("append to a missing nested schema: %v", err)
	}
	if err := c.AppendPath([]string{"a", "b"}, "t", &wire.DataChunk{Rows: 1, Columns: chunk.Columns[:1]}); err == nil {
		t.Error("a chunk with too few columns was appended")
	}
}

// TestAppendTimeRanges: DuckDB prints and converts TIME, TIME_NS, TIMETZ,
// TIMESTAMP_S and TIMESTAMP_MS values without a check that may fail, and an
// out-of-range one appended as it is invalidates the database when read
// (TIMETZ with every bit set, a TIMESTAMP_S beyond the microseconds of a
// TIMESTAMP). Those are refused; the extremes DuckDB makes itself append
// and read back as DuckDB prints them, in a column and inside a VARIANT.
func TestAppendTimeRanges(t *testing.T) {
	c := connect(t, openTest(t))
	bad := []struct {
		typ  string
		bits uint64
		want string
	}{
		{"TIME", uint64(microsPerDay + 1), "outside a day"},
		{"TIME", 1 << 63, "outside a day"},
		{"TIME_NS", uint64(microsPerDay*1000 + 1), "outside a day"},
		{"TIMETZ", ^uint64(0), "outside a day"},
		{"TIMETZ", 2*timeTZMaxOffset + 1, "offset beyond"},
		{"TIMESTAMP_S", 0x30106eb04022, "beyond the microseconds"},
		{"TIMESTAMP_MS", 1 << 62, "beyond the microseconds"},
	}
	for _, b := range bad {
		exec(t, c, "CREATE OR REPLACE TABLE t(v "+b.typ+")")
		types, _ := collect(t, c, "FROM t")
		v := &wire.Vector{Type: types[0], Count: 1, Data: binary.LittleEndian.AppendUint64(nil, b.bits)}
		err := c.Append("", "t", &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{v}})
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s %#x: %v, want an error with %q", b.typ, b.bits, err, b.want)
		}
	}
	good := []string{
		"'24:00:00'::TIME", "'00:00:00'::TIME", "'24:00:00'::TIME_NS", "'24:00:00+15:59:59'::TIMETZ",
		"'00:00:00-15:59:59'::TIMETZ", "'infinity'::TIMESTAMP_S", "'-infinity'::TIMESTAMP_S",
		"'294247-01-10'::TIMESTAMP_S", "'290309-12-22 (BC)'::TIMESTAMP_S", "'infinity'::TIMESTAMP_MS",
		"'294247-01-10 04:00:54.775'::TIMESTAMP_MS",
	}
	for _, g := range good {
		exec(t, c, "CREATE OR REPLACE TABLE src AS SELECT "+g+" AS v, ("+g+")::VARIANT AS w")
		exec(t, c, "CREATE OR REPLACE TABLE dst AS FROM src LIMIT 0")
		_, chunks := collect(t, c, "FROM src")
		if err := c.Append("", "dst", chunks[0]); err != nil {
			t.Errorf("%s: %v", g, err)
			continue
		}
		if n := queryInt64(t, c, "SELECT count(*) FROM src, dst WHERE src.v::VARCHAR = dst.v::VARCHAR AND src.w::VARCHAR = dst.w::VARCHAR"); n != 1 {
			t.Errorf("%s: read back differs", g)
		}
	}
}

// TestAppendUnionTag: a UNION whose tag names no member is refused;
// appended as it was, reading it was an internal error in DuckDB that
// invalidated the database.
func TestAppendUnionTag(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE src AS SELECT ('x')::UNION(i INTEGER, s VARCHAR) AS v UNION ALL SELECT NULL")
	exec(t, c, "CREATE TABLE dst AS FROM src WHERE false")
	_, chunks := collect(t, c, "FROM src")
	if err := c.Append("", "dst", cloneChunk(chunks[0])); err != nil {
		t.Fatal(err)
	}
	bad := cloneChunk(chunks[0])
	for i := range bad.Rows {
		if bad.Columns[0].IsValid(i) {
			bad.Columns[0].Children[0].Data[i] = 2
		}
	}
	if err := c.Append("", "dst", bad); err == nil || !strings.Contains(err.Error(), "UNION tag 2 beyond its 2 members") {
		t.Fatalf("append: %v", err)
	}
	if n := queryInt64(t, c, "SELECT count(*) FROM dst d, src s WHERE d.v::VARCHAR = s.v::VARCHAR"); n != 1 {
		t.Fatalf("%d rows as the source", n)
	}
}
