package engine

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// typeCase is a column type with values: row 0 is checked byte for byte,
// row 1 is always NULL.
type typeCase struct {
	sqlType string
	values  []string
	want    wire.LogicalType
	row0    string // hex of row 0: its Data slot, or its bytes for string-like types
}

func hexLE(v uint64, width int) string {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	if width > 8 {
		b = append(b, make([]byte, width-8)...)
	}
	return hex.EncodeToString(b[:width])
}

func lt(id wire.TypeID) wire.LogicalType { return wire.LogicalType{ID: id} }

func decimal(w, s uint8) wire.LogicalType {
	return wire.LogicalType{ID: wire.TypeDecimal, Width: w, Scale: s}
}

var typeCases = []typeCase{
	{"BOOLEAN", []string{"true", "NULL", "false"}, lt(wire.TypeBoolean), "01"},
	{"TINYINT", []string{"-7", "NULL", "127"}, lt(wire.TypeTinyInt), "f9"},
	{"SMALLINT", []string{"-2", "NULL", "300"}, lt(wire.TypeSmallInt), "feff"},
	{"INTEGER", []string{"42", "NULL", "-1"}, lt(wire.TypeInteger), "2a000000"},
	{"BIGINT", []string{"-1", "NULL", "9223372036854775807"}, lt(wire.TypeBigInt), "ffffffffffffffff"},
	{"HUGEINT", []string{"1", "NULL", "-170141183460469231731687303715884105728"}, lt(wire.TypeHugeInt), hexLE(1, 16)},
	{"UTINYINT", []string{"200", "NULL", "0"}, lt(wire.TypeUTinyInt), "c8"},
	{"USMALLINT", []string{"65535", "NULL", "1"}, lt(wire.TypeUSmallInt), "ffff"},
	{"UINTEGER", []string{"1", "NULL", "4294967295"}, lt(wire.TypeUInteger), "01000000"},
	{"UBIGINT", []string{"18446744073709551615", "NULL", "0"}, lt(wire.TypeUBigInt), "ffffffffffffffff"},
	{"UHUGEINT", []string{"2", "NULL", "340282366920938463463374607431768211455"}, lt(wire.TypeUHugeInt), hexLE(2, 16)},
	{"FLOAT", []string{"1.5", "NULL", "'nan'"}, lt(wire.TypeFloat), "0000c03f"},
	{"DOUBLE", []string{"1.5", "NULL", "-0.0"}, lt(wire.TypeDouble), "000000000000f83f"},
	{"DECIMAL(4,1)", []string{"123.4", "NULL", "-999.9"}, decimal(4, 1), "d204"},
	{"DECIMAL(9,2)", []string{"1.23", "NULL", "-9999999.99"}, decimal(9, 2), "7b000000"},
	{"DECIMAL(18,3)", []string{"1.234", "NULL", "123456789012345.678"}, decimal(18, 3), hexLE(1234, 8)},
	{"DECIMAL(38,10)", []string{"1", "NULL", "-1234567890123456789012345678.0123456789"}, decimal(38, 10), hexLE(10_000_000_000, 16)},
	{"VARCHAR", []string{"'hi'", "NULL", "'a string longer than twelve bytes'"}, lt(wire.TypeVarchar), hex.EncodeToString([]byte("hi"))},
	{"VARCHAR", []string{"'exactly 13 b!'", "NULL", "''"}, lt(wire.TypeVarchar), hex.EncodeToString([]byte("exactly 13 b!"))},
	{"BLOB", []string{`'\xAA\xBB'::BLOB`, "NULL", "''::BLOB"}, lt(wire.TypeBlob), "aabb"},
	// Five padding bits, set to 1, then 101.
	{"BIT", []string{"'101'::BIT", "NULL", "'1111000011110000111'::BIT"}, lt(wire.TypeBit), "05fd"},
	// Header 0x800000|byte count, big-endian, then the magnitude.
	{"BIGNUM", []string{"1", "NULL", "-123456789012345678901234567890"}, lt(wire.TypeBigNum), "80000101"},
	{"DATE", []string{"'1970-01-02'", "NULL", "'infinity'"}, lt(wire.TypeDate), "01000000"},
	{"TIME", []string{"'00:00:01'", "NULL", "'23:59:59.999999'"}, lt(wire.TypeTime), hexLE(1_000_000, 8)},
	{"TIME_NS", []string{"'00:00:00.000000001'", "NULL", "'12:00:00'"}, lt(wire.TypeTimeNS), hexLE(1, 8)},
	{"TIMESTAMP_S", []string{"'1970-01-01 00:00:01'", "NULL", "'2024-02-29 12:00:00'"}, lt(wire.TypeTimestampS), hexLE(1, 8)},
	{"TIMESTAMP_MS", []string{"'1970-01-01 00:00:01'", "NULL", "'2024-02-29 12:00:00.123'"}, lt(wire.TypeTimestampMS), hexLE(1000, 8)},
	{"TIMESTAMP", []string{"'1970-01-01 00:00:01'", "NULL", "'infinity'"}, lt(wire.TypeTimestamp), hexLE(1_000_000, 8)},
	{"TIMESTAMP_NS", []string{"'1970-01-01 00:00:01'", "NULL", "'2262-04-11 00:00:00'"}, lt(wire.TypeTimestampNS), hexLE(1_000_000_000, 8)},
	{"TIMESTAMPTZ", []string{"'1970-01-01 00:00:01+00'", "NULL", "'2024-01-01 10:00:00+05:30'"}, lt(wire.TypeTimestampTZ), hexLE(1_000_000, 8)},
	// Packed: micros << 24 | (57599 - offset seconds).
	{"TIMETZ", []string{"'00:00:01+00'", "NULL", "'12:34:56-07:30'"}, lt(wire.TypeTimeTZ), hexLE(1_000_000<<24|57599, 8)},
	{"INTERVAL", []string{"INTERVAL '1 month 2 days 3 microseconds'", "NULL", "INTERVAL '-5 years'"}, lt(wire.TypeInterval), "01000000" + "02000000" + hexLE(3, 8)},
	// UUID: lower = last 8 bytes, upper = first 8 bytes with the top bit flipped.
	{"UUID", []string{"'00000000-0000-0000-0000-000000000001'", "NULL", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"}, lt(wire.TypeUUID), hexLE(1, 8) + "0000000000000080"},
	{"ENUM('sad', 'ok', 'happy')", []string{"'ok'", "NULL", "'happy'"}, wire.LogicalType{ID: wire.TypeEnum, EnumValues: []string{"sad", "ok", "happy"}}, "01"},
	{"GEOMETRY", []string{"'POINT(1 2)'", "NULL", "'LINESTRING(0 0, 1 1)'"}, lt(wire.TypeGeometry), "0101000000" + "000000000000f03f" + "0000000000000040"},
	{"JSON", []string{`'{"a": [1, 2]}'`, "NULL", "'null'"}, wire.LogicalType{ID: wire.TypeVarchar, Alias: "JSON"}, hex.EncodeToString([]byte(`{"a": [1, 2]}`))},
}

// createTypeTable creates name(id INTEGER, v <type>) holding tc.values.
func createTypeTable(t *testing.T, c *Conn, name string, tc typeCase) {
	t.Helper()
	exec(t, c, fmt.Sprintf("CREATE OR REPLACE TABLE %s (id INTEGER, v %s)", name, tc.sqlType))
	rows := make([]string, len(tc.values))
	for i, v := range tc.values {
		rows[i] = fmt.Sprintf("(%d, %s)", i, v)
	}
	exec(t, c, fmt.Sprintf("INSERT INTO %s VALUES %s", name, strings.Join(rows, ", ")))
}

func TestQueryTypes(t *testing.T) {
	c := connect(t, openTest(t))
	for _, tc := range typeCases {
		t.Run(tc.sqlType, func(t *testing.T) {
			createTypeTable(t, c, "src", tc)
			types, chunks := collect(t, c, "SELECT v FROM src ORDER BY id")
			if len(types) != 1 || !sameType(&types[0], &tc.want) {
				t.Fatalf("type = %+v, want %+v", types, tc.want)
			}
			if len(chunks) != 1 || chunks[0].Rows != len(tc.values) {
				t.Fatalf("got %d chunks, want one of %d rows", len(chunks), len(tc.values))
			}
			v := chunks[0].Columns[0]
			if v.Count != len(tc.values) || !sameType(&v.Type, &tc.want) {
				t.Fatalf("vector count %d type %+v", v.Count, v.Type)
			}
			if !v.IsValid(0) || v.IsValid(1) || !v.IsValid(2) {
				t.Errorf("validity %x, want rows 0 and 2 valid, row 1 NULL", v.Validity)
			}
			if got := rowHex(t, v, 0); got != tc.row0 {
				t.Errorf("row 0 = %s, want %s", got, tc.row0)
			}
		})
	}
}

// rowHex returns row i of a flat fixed-width or string-like vector in hex.
func rowHex(t *testing.T, v *wire.Vector, i int) string {
	t.Helper()
	l, w, err := physical(&v.Type)
	if err != nil {
		t.Fatal(err)
	}
	if l == layoutString {
		if len(v.Offsets) != v.Count+1 {
			t.Fatalf("%d offsets for %d rows", len(v.Offsets), v.Count)
		}
		return hex.EncodeToString([]byte(str(v, i)))
	}
	if len(v.Data) != v.Count*w {
		t.Fatalf("%d data bytes for %d rows of %d", len(v.Data), v.Count, w)
	}
	return hex.EncodeToString(v.Data[i*w : (i+1)*w])
}

func TestRoundTripTypes(t *testing.T) {
	c := connect(t, openTest(t))
	cases := append([]typeCase(nil), typeCases...)
	for _, nt := range nestedTypes {
		cases = append(cases, typeCase{sqlType: nt.sqlType, values: nt.values})
	}
	for _, tc := range cases {
		t.Run(tc.sqlType, func(t *testing.T) {
			createTypeTable(t, c, "src", tc)
			exec(t, c, fmt.Sprintf("CREATE OR REPLACE TABLE dst (id INTEGER, v %s)", tc.sqlType))
			_, chunks := collect(t, c, "SELECT id, v FROM src")
			for _, chunk := range chunks {
				if err := c.Append("main", "dst", chunk); err != nil {
					t.Fatalf("append: %v", err)
				}
			}
			assertSameTable(t, c, "src", "dst", len(tc.values))
		})
	}
}

// assertSameTable checks that a and b hold the same (id, v) rows.
func assertSameTable(t *testing.T, c *Conn, a, b string, rows int) {
	t.Helper()
	_, chunks := collect(t, c, fmt.Sprintf(
		"SELECT (SELECT count(*) FROM %[2]s), count(*) FROM %[1]s FULL JOIN %[2]s USING (id) WHERE %[1]s.v IS DISTINCT FROM %[2]s.v",
		a, b))
	got := chunks[0]
	n := int64(binary.LittleEndian.Uint64(got.Columns[0].Data))
	diff := int64(binary.LittleEndian.Uint64(got.Columns[1].Data))
	if n != int64(rows) || diff != 0 {
		_, dump := collect(t, c, fmt.Sprintf("SELECT %[1]s.v::VARCHAR, %[2]s.v::VARCHAR FROM %[1]s FULL JOIN %[2]s USING (id) ORDER BY id", a, b))
		var lines []string
		for _, ch := range dump {
			for i := range ch.Rows {
				lines = append(lines, fmt.Sprintf("%q | %q", str(ch.Columns[0], i), str(ch.Columns[1], i)))
			}
		}
		t.Fatalf("%s has %d rows (want %d), %d differ from %s:\n%s", b, n, rows, diff, a, strings.Join(lines, "\n"))
	}
}
