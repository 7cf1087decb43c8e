package engine

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// variantRow is one VARIANT value spelled out in DuckDB's internal layout:
// the row's keys, its children as (keys_index or nil, values_index), its
// values as (type_id, byte_offset) and its data.
type variantSpec struct {
	keys     []string
	children [][2]any
	values   [][2]any
	data     []byte
}

func (s variantSpec) row() []any {
	keys := make([]any, len(s.keys))
	for i, k := range s.keys {
		keys[i] = k
	}
	children := make([]any, len(s.children))
	for i, c := range s.children {
		children[i] = []any{c[0], c[1]}
	}
	values := make([]any, len(s.values))
	for i, v := range s.values {
		values[i] = []any{v[0], v[1]}
	}
	return []any{keys, children, values, s.data}
}

// variantVector builds a VARIANT vector of the rows given (nil for NULL)
// through the wire package's builder, as a client would.
func variantVector(t *testing.T, rows ...*variantSpec) *wire.Vector {
	t.Helper()
	values := make([]any, len(rows))
	for i, r := range rows {
		if r != nil {
			values[i] = r.row()
		}
	}
	v, err := wire.NewVector(wire.LogicalType{ID: wire.TypeStruct, Fields: variantFields}, values)
	if err != nil {
		t.Fatal(err)
	}
	v.Type.ID = wire.TypeVariant
	return v
}

func u32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

// deepArrays is a chain of depth arrays around one UINT64 1, the layout
// DuckDB gives the JSON [[…[1]…]].
func deepArrays(depth int) *variantSpec {
	s := &variantSpec{}
	for i := range depth {
		// Value i is an array whose one child is value i+1, child i.
		s.values = append(s.values, [2]any{uint8(variantArray), uint32(len(s.data))})
		s.data = append(s.data, 1, byte(i&0x7f|0x80), byte(i>>7))
		s.children = append(s.children, [2]any{nil, uint32(i + 1)})
	}
	s.values = append(s.values, [2]any{uint8(variantUint64), uint32(len(s.data))})
	s.data = binary.LittleEndian.AppendUint64(s.data, 1)
	return s
}

// TestAppendVariantBuilt appends hand-built VARIANT values that follow
// DuckDB's layout and checks that DuckDB reads them as the same values it
// makes from SQL.
func TestAppendVariantBuilt(t *testing.T) {
	c := connect(t, openTest(t))
	tests := []struct {
		name string
		spec *variantSpec
		sql  string // the same value made by DuckDB
	}{
		{"INTEGER", &variantSpec{values: [][2]any{{uint8(variantInt32), uint32(0)}}, data: u32(42)}, "42::INTEGER::VARIANT"},
		{"object", &variantSpec{
			keys: []string{"a"}, children: [][2]any{{uint32(0), uint32(1)}},
			values: [][2]any{{uint8(variantObject), uint32(0)}, {uint8(variantVarchar), uint32(2)}},
			data:   []byte{1, 0, 1, 'x'},
		}, "{'a': 'x'}::VARIANT"},
		{"array with a NULL", &variantSpec{
			children: [][2]any{{nil, uint32(1)}, {nil, uint32(2)}},
			values:   [][2]any{{uint8(variantArray), uint32(0)}, {uint8(variantInt8), uint32(2)}, {uint8(variantNull), uint32(3)}},
			data:     []byte{2, 0, 1},
		}, "[1::TINYINT, NULL]::VARIANT"},
		{"DECIMAL", &variantSpec{values: [][2]any{{uint8(variantDecimal), uint32(0)}}, data: []byte{4, 1, 0xd2, 0x04}}, "123.4::DECIMAL(4,1)::VARIANT"},
		{"empty VARCHAR", &variantSpec{values: [][2]any{{uint8(variantVarchar), uint32(0)}}, data: []byte{0}}, "''::VARIANT"},
		{"deepest allowed", deepArrays(maxVariantDepth - 1),
			"'" + strings.Repeat("[", maxVariantDepth-1) + "1" + strings.Repeat("]", maxVariantDepth-1) + "'::JSON::VARIANT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exec(t, c, "CREATE OR REPLACE TABLE v(v VARIANT)")
			chunk := &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{variantVector(t, tt.spec, nil)}}
			if err := c.Append("", "v", chunk); err != nil {
				t.Fatal(err)
			}
			if n := queryInt64(t, c, "SELECT count(*) FROM v WHERE v IS NULL"); n != 1 {
				t.Errorf("%d NULL rows, want 1", n)
			}
			same := queryInt64(t, c, "SELECT count(*) FROM v, (SELECT "+tt.sql+" AS w) "+
				"WHERE v::VARCHAR = w::VARCHAR AND variant_typeof(v) = variant_typeof(w) AND v IS NOT DISTINCT FROM w")
			if same != 1 {
				_, got := collect(t, c, "SELECT v::VARCHAR FROM v WHERE v IS NOT NULL")
				t.Errorf("DuckDB reads %q, not the value of %s", str(got[0].Columns[0], 0), tt.sql)
			}
		})
	}
}

// TestAppendVariantMalformed: a VARIANT that breaks DuckDB's layout is
// refused with an error before DuckDB sees it (DuckDB would read outside
// its buffers, or recurse without end), the table is unchanged and the
// connection keeps working.
func TestAppendVariantMalformed(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE v(v VARIANT)")
	int32At := func(off uint32, data []byte) *variantSpec {
		return &variantSpec{values: [][2]any{{uint8(variantInt32), off}}, data: data}
	}
	object := func(keyIndex any, valueIndex uint32) *variantSpec {
		return &variantSpec{
			keys: []string{"a"}, children: [][2]any{{keyIndex, valueIndex}},
			values: [][2]any{{uint8(variantObject), uint32(0)}, {uint8(variantVarchar), uint32(2)}},
			data:   []byte{1, 0, 1, 'x'},
		}
	}
	array := func(valueIndexes ...uint32) *variantSpec {
		s := &variantSpec{values: [][2]any{{uint8(variantArray), uint32(0)}}, data: []byte{byte(len(valueIndexes)), 0}}
		for _, vi := range valueIndexes {
			s.children = append(s.children, [2]any{nil, vi})
		}
		s.values = append(s.values, [2]any{uint8(variantTrue), uint32(0)})
		return s
	}
	str := func(data ...byte) *variantSpec {
		return &variantSpec{values: [][2]any{{uint8(variantVarchar), uint32(0)}}, data: data}
	}
	tests := []struct {
		name string
		spec *variantSpec
		want string
	}{
		{"unknown type id", &variantSpec{values: [][2]any{{uint8(variantTypeCount), uint32(0)}}, data: []byte{0}}, "unknown type id 35"},
		{"offset beyond the data", int32At(9, u32(1)), "byte offset 9 beyond 4 data bytes"},
		{"payload beyond the data", int32At(2, u32(1)), "4-byte payload at offset 2"},
		{"no values", &variantSpec{data: []byte{}}, "without values"},
		{"NULL root", &variantSpec{values: [][2]any{{uint8(variantNull), uint32(0)}}, data: []byte{}}, "root is a VARIANT NULL"},
		{"string beyond the data", str(5, 'a'), "5-byte string beyond the data"},
		{"invalid UTF-8", str(2, 0xff, 0xfe), "invalid UTF-8"},
		{"varint without end", str(0x80, 0x80), "varint beyond the data"},
		{"varint over 5 bytes", str(0x80, 0x80, 0x80, 0x80, 0x80, 0), "varint over 5 bytes"},
		{"DECIMAL width 0", &variantSpec{values: [][2]any{{uint8(variantDecimal), uint32(0)}}, data: []byte{0, 0, 1, 0}}, "invalid DECIMAL(0,0)"},
		{"DECIMAL width 39", &variantSpec{values: [][2]any{{uint8(variantDecimal), uint32(0)}}, data: append([]byte{39, 0}, make([]byte, 16)...)}, "invalid DECIMAL(39,0)"},
		{"DECIMAL payload short", &variantSpec{values: [][2]any{{uint8(variantDecimal), uint32(0)}}, data: []byte{18, 2, 1, 2, 3}}, "DECIMAL payload beyond"},
		{"BIT header", &variantSpec{values: [][2]any{{uint8(variantBitstring), uint32(0)}}, data: []byte{2, 9, 0}}, "malformed BIT"},
		{"child value beyond values", object(uint32(0), 7), "value 7 beyond the row's 2 values"},
		{"child key beyond keys", object(uint32(3), 1), "key beyond the row's 1 keys"},
		{"object child without a key", object(nil, 1), "OBJECT child 0 without a key"},
		{"array child with a key", &variantSpec{
			keys: []string{"a"}, children: [][2]any{{uint32(0), uint32(1)}},
			values: [][2]any{{uint8(variantArray), uint32(0)}, {uint8(variantTrue), uint32(0)}},
			data:   []byte{1, 0},
		}, "ARRAY child 0 with a key"},
		{"children beyond the row's", &variantSpec{
			values: [][2]any{{uint8(variantArray), uint32(0)}}, data: []byte{3, 0},
		}, "children 0+3 beyond the row's 0"},
		{"root as its own child", array(0), "root is the child of another value"},
		{"value with two parents", array(1, 1), "value 1 is the child of two values"},
		{"too deep", deepArrays(maxVariantDepth), "nested deeper than 1000 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := int32At(0, u32(7))
			chunk := &wire.DataChunk{Rows: 3, Columns: []*wire.Vector{variantVector(t, good, nil, tt.spec)}}
			err := c.Append("", "v", chunk)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "row 2") {
				t.Fatalf("append: %v, want an error at row 2 with %q", err, tt.want)
			}
			if n := queryInt64(t, c, "SELECT count(*) FROM v"); n != 0 {
				t.Fatalf("%d rows appended", n)
			}
		})
	}

	// The parts a valid row must have: non-NULL lists and data, keys that
	// are not NULL, the four fields of DuckDB's VARIANT.
	parts := []struct {
		name   string
		mutate func(v *wire.Vector)
		want   string
	}{
		{"NULL data", func(v *wire.Vector) { nullRow(v.Children[3], 0) }, "NULL data in a valid VARIANT"},
		{"NULL values list", func(v *wire.Vector) { nullRow(v.Children[2], 0) }, "NULL list in a valid VARIANT"},
		{"NULL key", func(v *wire.Vector) { nullRow(v.Children[0].Children[0], 0) }, "VARIANT key 0 is NULL"},
		{"list entry beyond its child", func(v *wire.Vector) { v.Children[2].Entries[0].Length = 9 }, "list entry 0+9 beyond"},
		{"fields of another type", func(v *wire.Vector) {
			v.Type = wire.LogicalType{ID: wire.TypeVariant, Fields: append(append([]wire.Field(nil), variantFields[:3]...), wire.Field{Name: "data", Type: lt(wire.TypeVarchar)})}
		}, "VARIANT with fields other than DuckDB's"},
	}
	for _, p := range parts {
		t.Run(p.name, func(t *testing.T) {
			v := variantVector(t, object(uint32(0), 1))
			p.mutate(v)
			err := c.Append("", "v", &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{v}})
			if err == nil || !strings.Contains(err.Error(), p.want) {
				t.Fatalf("append: %v, want an error with %q", err, p.want)
			}
		})
	}
	if n := queryInt64(t, c, "SELECT count(*) FROM v"); n != 0 {
		t.Fatalf("%d rows appended", n)
	}
	chunk := &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{variantVector(t, object(uint32(0), 1))}}
	if err := c.Append("", "v", chunk); err != nil {
		t.Fatalf("a valid append after the refused ones: %v", err)
	}
}

// nullRow makes row i of v NULL.
func nullRow(v *wire.Vector, i int) {
	if v.Validity == nil {
		v.Validity = make([]byte, 8*((v.Count+63)/64))
		for j := range v.Validity {
			v.Validity[j] = 0xff
		}
	}
	v.Validity[i>>3] &^= 1 << (uint(i) & 7)
}

// TestAppendVariantFromStorage reads VARIANT columns back from a
// checkpointed database file, where DuckDB 2.0 may store them shredded
// (typed columns per path), and appends what it read into another table:
// the chunks come out flat in the unshredded layout and append as the same
// values.
func TestAppendVariantFromStorage(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "v.duckdb"), Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := connect(t, db)
	exec(t, c, `CREATE TABLE src AS SELECT i::INTEGER AS id,
		CASE WHEN i % 9 = 0 THEN NULL WHEN i % 3 = 0 THEN i::VARIANT
			ELSE {'a': i, 'b': 'n' || i, 'c': [i, i + 1]}::VARIANT END AS v
		FROM range(300000) r(i)`)
	exec(t, c, "CHECKPOINT")
	exec(t, c, "CREATE TABLE dst(id INTEGER, v VARIANT)")
	types, chunks := collect(t, c, "FROM src")
	if types[1].ID != wire.TypeVariant {
		t.Fatalf("read %s", typeName(types[1]))
	}
	for _, ch := range chunks {
		if err := c.Append("", "dst", ch); err != nil {
			t.Fatal(err)
		}
	}
	if d := queryInt64(t, c, `SELECT count(*) FROM src FULL JOIN dst USING (id)
		WHERE src.v IS DISTINCT FROM dst.v OR src.v::VARCHAR IS DISTINCT FROM dst.v::VARCHAR`); d != 0 {
		t.Fatalf("%d rows differ", d)
	}
	if n := queryInt64(t, c, "SELECT count(*) FROM dst"); n != 300000 {
		t.Fatalf("%d rows", n)
	}
}
