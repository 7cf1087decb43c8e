package engine

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// geometryWKT are geometries of every type and dimension, empty ones too.
var geometryWKT = []string{
	"POINT (1 2)", "POINT Z (1 2 3)", "POINT M (1 2 4)", "POINT ZM (1 2 3 4)", "POINT EMPTY",
	"LINESTRING (0 0, 1 1)", "LINESTRING EMPTY", "POLYGON ((0 0, 1 0, 1 1, 0 0), (0.1 0.1, 0.2 0.1, 0.1 0.1))",
	"POLYGON EMPTY", "MULTIPOINT ((1 2), (3 4))", "MULTILINESTRING Z ((0 0 1, 1 1 1), (2 2 2, 3 3 3))",
	"MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)))", "MULTIPOINT EMPTY",
	"GEOMETRYCOLLECTION (POINT (1 2), GEOMETRYCOLLECTION (LINESTRING (0 0, 1 1), MULTIPOINT ((5 6))))",
	"GEOMETRYCOLLECTION EMPTY", "GEOMETRYCOLLECTION M (POINT M (1 2 3))",
}

// TestAppendGeometry appends GEOMETRY values DuckDB made, in a GEOMETRY
// column and inside a VARIANT, and reads them back as DuckDB printed them.
func TestAppendGeometry(t *testing.T) {
	c := connect(t, openTest(t))
	var values []string
	for i, w := range geometryWKT {
		values = append(values, "("+strconv.Itoa(i)+", '"+w+"')")
	}
	exec(t, c, "CREATE TABLE src AS SELECT id, w::GEOMETRY AS g, w::GEOMETRY::VARIANT AS v FROM (VALUES "+strings.Join(values, ", ")+") t(id, w)")
	exec(t, c, "CREATE TABLE dst(id INTEGER, g GEOMETRY, v VARIANT)")
	_, chunks := collect(t, c, "FROM src")
	for _, ch := range chunks {
		if err := c.Append("", "dst", ch); err != nil {
			t.Fatal(err)
		}
	}
	if d := queryInt64(t, c, `SELECT count(*) FROM src FULL JOIN dst USING (id)
		WHERE src.g::VARCHAR IS DISTINCT FROM dst.g::VARCHAR OR src.v::VARCHAR IS DISTINCT FROM dst.v::VARCHAR`); d != 0 {
		t.Fatalf("%d geometries differ", d)
	}
	if n := queryInt64(t, c, "SELECT count(*) FROM dst"); n != int64(len(geometryWKT)) {
		t.Fatalf("%d rows", n)
	}
}

// wkb builds a little-endian WKB value from its parts: a byte is written
// as is, a uint32 as four bytes, a float64 as eight.
func wkb(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case byte:
			b = append(b, v)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

// TestAppendGeometryMalformed: GEOMETRY values not in DuckDB's internal
// form are refused, in a GEOMETRY column and inside a VARIANT. Appended as
// they were, DuckDB's readers would throw inside a cast that may not fail
// and invalidate the database (a MULTIPOINT with a LINESTRING part does).
func TestAppendGeometryMalformed(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE g(g GEOMETRY)")
	exec(t, c, "CREATE TABLE v(v VARIANT)")
	point := []any{byte(1), uint32(1), 1.0, 2.0}
	nested := func(depth int) []any {
		var p []any
		for range depth {
			p = append(p, byte(1), uint32(7), uint32(1))
		}
		return append(p, point...)
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"big-endian", []byte{0, 0, 0, 0, 1, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0}, "byte order 0"},
		{"unknown type", wkb(byte(1), uint32(8), 1.0, 2.0), "unknown geometry type code 8"},
		{"unknown flag", wkb(byte(1), uint32(4001), 1.0, 2.0), "unknown geometry type code 4001"},
		{"EWKB SRID flag", wkb(byte(1), uint32(0x20000001), uint32(4326), 1.0, 2.0), "unknown geometry type code"},
		{"truncated point", wkb(byte(1), uint32(1), 1.0), "truncated"},
		{"line longer than its data", wkb(byte(1), uint32(2), uint32(1<<30), 1.0, 2.0), "truncated"},
		{"trailing bytes", wkb(append(append([]any{}, point...), byte(1))...), "1 bytes after the geometry"},
		{"MULTIPOINT of a LINESTRING", wkb(byte(1), uint32(4), uint32(1), byte(1), uint32(2), uint32(0)), "type 2 inside a collection of type 4"},
		{"Z part in a 2D collection", wkb(byte(1), uint32(7), uint32(1), byte(1), uint32(1001), 1.0, 2.0, 3.0), "Z/M dimensions differ"},
		{"too deep", wkb(nested(maxGeometryDepth)...), "nested deeper than 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := &wire.Vector{Type: lt(wire.TypeGeometry), Count: 1, Offsets: []uint32{0, uint32(len(tt.b))}, Bytes: tt.b, GeometryFormat: 1}
			err := c.Append("", "g", &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{col}})
			if err == nil || !strings.Contains(err.Error(), "malformed GEOMETRY value: "+tt.want) {
				t.Errorf("GEOMETRY column: %v, want an error with %q", err, tt.want)
			}
			data := append(binary.AppendUvarint(nil, uint64(len(tt.b))), tt.b...)
			s := &variantSpec{values: [][2]any{{uint8(variantGeometry), uint32(0)}}, data: data}
			err = c.Append("", "v", &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{variantVector(t, s)}})
			if err == nil || !strings.Contains(err.Error(), "malformed GEOMETRY value: "+tt.want) {
				t.Errorf("in a VARIANT: %v, want an error with %q", err, tt.want)
			}
		})
	}
	// The deepest collection DuckDB reads is accepted, and the database
	// still answers.
	ok := wkb(nested(maxGeometryDepth - 1)...)
	col := &wire.Vector{Type: lt(wire.TypeGeometry), Count: 1, Offsets: []uint32{0, uint32(len(ok))}, Bytes: ok, GeometryFormat: 1}
	if err := c.Append("", "g", &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{col}}); err != nil {
		t.Fatal(err)
	}
	_, got := collect(t, c, "SELECT g::VARCHAR FROM g")
	if s := str(got[0].Columns[0], 0); !strings.HasSuffix(s, "POINT (1 2)"+strings.Repeat(")", maxGeometryDepth-1)) {
		t.Fatalf("read back %q", s)
	}
}
