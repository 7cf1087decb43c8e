package wire

import (
	"encoding/csv"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

// typesCaseOutput is what DuckDB v1.5.4's CLI printed (CSV mode) for the
// 'types' case of the q1-duckdb-1.5 fixtures (INDEX.md), whose response
// body is 38-types-query-response.bin.
const typesCaseOutput = `id,c_boolean,c_tinyint,c_smallint,c_integer,c_bigint,c_hugeint,c_utinyint,c_usmallint,c_uinteger,c_ubigint,c_uhugeint,c_float,c_double,c_decimal_4_1,c_decimal_9_2,c_decimal_18_3,c_decimal_38_10,c_varchar_short,c_varchar_long,c_blob,c_date,c_time,c_timestamp,c_timestamp_s,c_timestamp_ms,c_timestamp_ns,c_timestamptz,c_timetz,c_interval,c_uuid,c_enum,c_int_list,c_varchar_list,c_int_array3,c_struct,c_map,c_union,c_bit
1,true,-128,-32768,-2147483648,-9223372036854775808,-170141183460469231731687303715884105728,0,0,0,0,0,1.5,3.141592653589793,123.4,1234567.89,123456789012345.678,1234567890123456789012345678.0123456789,duck,this string is longer than twelve bytes,\xDE\xAD\xBE\xEF,2024-02-29,12:34:56.789012,2024-02-29 12:34:56.789012,2024-02-29 12:34:56,2024-02-29 12:34:56.789,2024-02-29 12:34:56.789012345,2024-02-29 12:34:56.789012+00,12:34:56+02,1 year 2 months 3 days 04:05:06.789,550e8400-e29b-41d4-a716-446655440000,ok,"[1, 2, NULL, 3]","[a, NULL, a string longer than 12 bytes]","[1, 2, 3]","{'a': 1, 'b': x}","{k1=1, k2=NULL}",7,101010
2,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL
3,false,127,32767,42,9223372036854775807,170141183460469231731687303715884105727,255,65535,4294967295,18446744073709551615,340282366920938463463374607431768211455,-3.25,-1e+300,-999.9,-0.01,-1.000,-0.0000000001,,"ünïcødé quack 🦆 string",,1970-01-01,00:00:00,1970-01-01 00:00:00,1970-01-01 00:00:00,1970-01-01 00:00:00,1970-01-01 00:00:00,1970-01-01 00:00:00+00,00:00:00-05:30,-1 day,00000000-0000-0000-0000-000000000000,happy,[],[],"[NULL, 5, 6]","{'a': NULL, 'b': NULL}",{},seven,1
`

// typesCaseColumns are the result types of the 'types' case.
func typesCaseColumns() []Field {
	return []Field{
		{"id", valT(TypeInteger)},
		{"c_boolean", valT(TypeBoolean)},
		{"c_tinyint", valT(TypeTinyInt)},
		{"c_smallint", valT(TypeSmallInt)},
		{"c_integer", valT(TypeInteger)},
		{"c_bigint", valT(TypeBigInt)},
		{"c_hugeint", valT(TypeHugeInt)},
		{"c_utinyint", valT(TypeUTinyInt)},
		{"c_usmallint", valT(TypeUSmallInt)},
		{"c_uinteger", valT(TypeUInteger)},
		{"c_ubigint", valT(TypeUBigInt)},
		{"c_uhugeint", valT(TypeUHugeInt)},
		{"c_float", valT(TypeFloat)},
		{"c_double", valT(TypeDouble)},
		{"c_decimal_4_1", valDecimal(4, 1)},
		{"c_decimal_9_2", valDecimal(9, 2)},
		{"c_decimal_18_3", valDecimal(18, 3)},
		{"c_decimal_38_10", valDecimal(38, 10)},
		{"c_varchar_short", valT(TypeVarchar)},
		{"c_varchar_long", valT(TypeVarchar)},
		{"c_blob", valT(TypeBlob)},
		{"c_date", valT(TypeDate)},
		{"c_time", valT(TypeTime)},
		{"c_timestamp", valT(TypeTimestamp)},
		{"c_timestamp_s", valT(TypeTimestampS)},
		{"c_timestamp_ms", valT(TypeTimestampMS)},
		{"c_timestamp_ns", valT(TypeTimestampNS)},
		{"c_timestamptz", valT(TypeTimestampTZ)},
		{"c_timetz", valT(TypeTimeTZ)},
		{"c_interval", valT(TypeInterval)},
		{"c_uuid", valT(TypeUUID)},
		{"c_enum", valEnum("sad", "ok", "happy")},
		{"c_int_list", valList(valT(TypeInteger))},
		{"c_varchar_list", valList(valT(TypeVarchar))},
		{"c_int_array3", valArray(valT(TypeInteger), 3)},
		{"c_struct", valStruct(Field{"a", valT(TypeInteger)}, Field{"b", valT(TypeVarchar)})},
		{"c_map", valMap(valT(TypeVarchar), valT(TypeInteger))},
		{"c_union", valUnion(Field{"i", valT(TypeInteger)}, Field{"s", valT(TypeVarchar)})},
		{"c_bit", valT(TypeBit)},
	}
}

// parseCLIOutput splits DuckDB's CSV printout into its header and cells.
func parseCLIOutput(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("parsing the CLI output: %v", err)
	}
	return records[0], records[1:]
}

// checkChunkText compares every cell's Text with DuckDB's printout.
func checkChunkText(t *testing.T, c *DataChunk, names []string, want [][]string) {
	t.Helper()
	if c.Rows != len(want) || len(c.Columns) != len(names) {
		t.Fatalf("chunk is %d rows × %d columns, printout %d × %d", c.Rows, len(c.Columns), len(want), len(names))
	}
	for r := range want {
		for col, name := range names {
			got, err := c.Columns[col].Text(r)
			if err != nil {
				t.Errorf("row %d %s: %v", r, name, err)
			} else if got != want[r][col] {
				t.Errorf("row %d %s = %q, DuckDB printed %q", r, name, got, want[r][col])
			}
		}
	}
}

// TestTextMatchesDuckDBPrintout builds the 'types' case result from Go
// values and checks each cell's text against DuckDB's own printout.
func TestTextMatchesDuckDBPrintout(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	epoch := utc(1970, 1, 1, 0, 0, 0, 0)
	fields := typesCaseColumns()
	types := make([]LogicalType, len(fields))
	names := make([]string, len(fields))
	for k, f := range fields {
		types[k], names[k] = f.Type, f.Name
	}
	rows := [][]any{
		{1, true, -128, -32768, math.MinInt32, math.MinInt64, "-170141183460469231731687303715884105728",
			0, 0, 0, 0, 0, 1.5, 3.141592653589793,
			"123.4", "1234567.89", "123456789012345.678", "1234567890123456789012345678.0123456789",
			"duck", "this string is longer than twelve bytes", []byte{0xDE, 0xAD, 0xBE, 0xEF},
			utc(2024, 2, 29, 0, 0, 0, 0), 12*time.Hour + 34*time.Minute + 56*time.Second + 789012*time.Microsecond,
			utc(2024, 2, 29, 12, 34, 56, 789012000), utc(2024, 2, 29, 12, 34, 56, 0), utc(2024, 2, 29, 12, 34, 56, 789000000),
			utc(2024, 2, 29, 12, 34, 56, 789012345), utc(2024, 2, 29, 12, 34, 56, 789012000),
			TimeTZ{Micros: (12*3600 + 34*60 + 56) * 1e6, OffsetSeconds: 2 * 3600},
			Interval{Months: 14, Days: 3, Micros: (4*3600+5*60+6)*1e6 + 789000},
			"550e8400-e29b-41d4-a716-446655440000", "ok",
			[]any{1, 2, nil, 3}, []any{"a", nil, "a string longer than 12 bytes"}, []any{1, 2, 3},
			Struct{{"a", 1}, {"b", "x"}}, []MapEntry{{"k1", 1}, {"k2", nil}}, Union{"i", 7}, Bit("101010")},
		append([]any{2}, make([]any, len(fields)-1)...),
		{3, false, 127, 32767, 42, math.MaxInt64, "170141183460469231731687303715884105727",
			255, 65535, math.MaxUint32, uint64(math.MaxUint64), "340282366920938463463374607431768211455", -3.25, -1e300,
			"-999.9", "-0.01", "-1.000", "-0.0000000001",
			"", "ünïcødé quack 🦆 string", []byte{},
			epoch, time.Duration(0), epoch, epoch, epoch, epoch, epoch,
			TimeTZ{Micros: 0, OffsetSeconds: -(5*3600 + 30*60)}, Interval{Days: -1},
			"00000000-0000-0000-0000-000000000000", "happy",
			[]any{}, []any{}, []any{nil, 5, 6},
			Struct{{"a", nil}, {"b", nil}}, []MapEntry{}, Union{"s", "seven"}, Bit("1")},
	}
	c, err := ChunkFromRows(types, rows)
	if err != nil {
		t.Fatal(err)
	}
	header, want := parseCLIOutput(t, typesCaseOutput)
	if strings.Join(header, ",") != strings.Join(names, ",") {
		t.Fatalf("printout header %v, columns %v", header, names)
	}
	checkChunkText(t, c, names, want)
}

// TestFormatValue covers DuckDB's text forms beyond the fixture: float
// notation, date and interval corners, and the quoting of strings inside
// nested values (DuckDB's NestedToVarcharCast rules).
func TestFormatValue(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	varcharList := valList(valT(TypeVarchar))
	tests := []struct {
		name string
		typ  LogicalType
		v    any
		want string
	}{
		{"null", valT(TypeInteger), nil, "NULL"},
		{"double one", valT(TypeDouble), 1.0, "1.0"},
		{"double zero", valT(TypeDouble), 0.0, "0.0"},
		{"double negative zero", valT(TypeDouble), math.Copysign(0, -1), "-0.0"},
		{"double 1e15", valT(TypeDouble), 1e15, "1000000000000000.0"},
		{"double 1e16", valT(TypeDouble), 1e16, "1e+16"},
		{"double 1.5e16", valT(TypeDouble), 1.5e16, "1.5e+16"},
		{"double 1e-4", valT(TypeDouble), 0.0001, "0.0001"},
		{"double 1e-5", valT(TypeDouble), 0.00001, "1e-05"},
		{"double 0.1", valT(TypeDouble), 0.1, "0.1"},
		{"double fraction", valT(TypeDouble), 123456.789, "123456.789"},
		{"double max", valT(TypeDouble), math.MaxFloat64, "1.7976931348623157e+308"},
		{"double denormal", valT(TypeDouble), 5e-324, "5e-324"},
		{"double nan", valT(TypeDouble), math.NaN(), "nan"},
		{"double inf", valT(TypeDouble), math.Inf(1), "inf"},
		{"double -inf", valT(TypeDouble), math.Inf(-1), "-inf"},
		{"float 0.1", valT(TypeFloat), float32(0.1), "0.1"},
		{"float max", valT(TypeFloat), float32(math.MaxFloat32), "3.4028235e+38"},
		{"float 1e-7", valT(TypeFloat), float32(1e-7), "1e-07"},
		{"decimal scale 0", valDecimal(10, 0), Decimal{big.NewInt(-12), 10, 0}, "-12"},
		{"decimal all fraction", valDecimal(5, 5), Decimal{big.NewInt(1), 5, 5}, ".00001"},
		{"decimal all fraction negative", valDecimal(5, 5), Decimal{big.NewInt(-1), 5, 5}, "-.00001"},
		{"decimal below one", valDecimal(38, 37), Decimal{big.NewInt(-12), 38, 37}, "-0.0000000000000000000000000000000000012"},
		{"hugeint", valT(TypeHugeInt), big.NewInt(-5), "-5"},
		{"blob specials", valT(TypeBlob), []byte("a'b\"c\\ \x00\x7f~"), `a\x27b\x22c\x5C \x00\x7F~`},
		{"date bc", valT(TypeDate), utc(0, 1, 1, 0, 0, 0, 0), "0001-01-01 (BC)"},
		{"date year 5", valT(TypeDate), utc(5, 6, 7, 0, 0, 0, 0), "0005-06-07"},
		{"date year 10000", valT(TypeDate), utc(10000, 1, 1, 0, 0, 0, 0), "10000-01-01"},
		{"date infinity", valT(TypeDate), PositiveInfinity, "infinity"},
		{"timestamp bc", valT(TypeTimestamp), utc(-9, 1, 1, 1, 2, 3, 0), "0010-01-01 (BC) 01:02:03"},
		{"timestamp trims", valT(TypeTimestamp), utc(2024, 1, 1, 0, 0, 0, 500000000), "2024-01-01 00:00:00.5"},
		{"timestamp_ns nanos", valT(TypeTimestampNS), utc(1970, 1, 1, 0, 0, 0, 1), "1970-01-01 00:00:00.000000001"},
		{"timestamptz infinity", valT(TypeTimestampTZ), NegativeInfinity, "-infinity"},
		{"timestamptz from zone", valT(TypeTimestampTZ), time.Date(2024, 1, 1, 2, 0, 0, 0, time.FixedZone("", 7200)), "2024-01-01 00:00:00+00"},
		{"time 24h", valT(TypeTime), 24 * time.Hour, "24:00:00"},
		{"time_ns", valT(TypeTimeNS), time.Second + 10, "00:00:01.00000001"},
		{"timetz seconds offset", valT(TypeTimeTZ), TimeTZ{Micros: 43200e6 + 1, OffsetSeconds: 5*3600 + 30*60 + 15}, "12:00:00.000001+05:30:15"},
		{"timetz utc", valT(TypeTimeTZ), TimeTZ{}, "00:00:00+00"},
		{"interval zero", valT(TypeInterval), Interval{}, "00:00:00"},
		{"interval month", valT(TypeInterval), Interval{Months: 1}, "1 month"},
		{"interval negative", valT(TypeInterval), Interval{Months: -14, Days: 2}, "-1 year -2 months 2 days"},
		{"interval micros", valT(TypeInterval), Interval{Micros: -1}, "-00:00:00.000001"},
		{"interval hours", valT(TypeInterval), Interval{Days: 1, Micros: 100 * 3600e6}, "1 day 100:00:00"},
		{"interval min micros", valT(TypeInterval), Interval{Micros: math.MinInt64}, "-2562047788:00:54.775808"},
		{"uuid", valT(TypeUUID), UUID{0xAB, 15: 0xCD}, "ab000000-0000-0000-0000-0000000000cd"},
		{"bit", valT(TypeBit), Bit("0101"), "0101"},
		{"varchar raw", valT(TypeVarchar), " it's, [raw] ", " it's, [raw] "},
		{"list quoting", varcharList,
			[]any{"", " a", "b ", "null", "NULL", "nul", "a,b", "it's", `back\slash`, "x y", "k=v", "a:b", `"q"`, "(p)", "{c}", nil},
			`['', ' a', 'b ', 'null', 'NULL', nul, 'a,b', 'it\'s', back\slash, x y, 'k=v', 'a:b', '"q"', '(p)', '{c}', NULL]`},
		{"list quotes backslash when quoting", varcharList, []any{`a\,`}, `['a\\,']`},
		{"list of timestamps", valList(valT(TypeTimestamp)), []any{utc(2024, 1, 1, 0, 0, 0, 0)}, "['2024-01-01 00:00:00']"},
		{"list of doubles", valList(valT(TypeDouble)), []any{1.0, -1e300, nil}, "[1.0, -1e+300, NULL]"},
		{"list of lists", valList(valList(valT(TypeInteger))), []any{[]any{int32(1), int32(2)}, nil, []any{}}, "[[1, 2], NULL, []]"},
		{"list of structs", valList(valStruct(Field{"s", valT(TypeVarchar)})), []any{Struct{{"s", "a b,"}}}, "[{'s': 'a b,'}]"},
		{"array never quotes", valArray(valT(TypeVarchar), 3), []any{"a,b", "", nil}, "[a,b, , NULL]"},
		{"struct key quoting", valStruct(Field{"my key", valT(TypeInteger)}, Field{"it's", valT(TypeVarchar)}, Field{"l", varcharList}),
			Struct{{"my key", int32(1)}, {"it's", "x:y"}, {"l", []any{"p", "q r"}}}, `{'my key': 1, 'it\'s': 'x:y', 'l': [p, q r]}`},
		{"unnamed struct", valStruct(Field{"", valT(TypeInteger)}, Field{"", valT(TypeVarchar)}), Struct{{"", int32(1)}, {"", "x"}}, "(1, x)"},
		{"map quoting", valMap(valT(TypeVarchar), valT(TypeVarchar)), []MapEntry{{"a=b", " v"}, {"k", nil}}, "{'a=b'=' v', k=NULL}"},
		{"map of lists", valMap(valT(TypeInteger), varcharList), []MapEntry{{int32(1), []any{"x"}}}, "{1=[x]}"},
		{"union raw", valUnion(Field{"s", valT(TypeVarchar)}), Union{"s", "a, b"}, "a, b"},
		{"union null member", valUnion(Field{"s", valT(TypeVarchar)}), Union{"s", nil}, "NULL"},
		{"list of unions", valList(valUnion(Field{"s", valT(TypeVarchar)})), []any{Union{"s", "a,b"}}, "[a,b]"},
		{"enum in list", valList(valEnum("a b", "c,d")), []any{"a b", "c,d"}, "[a b, 'c,d']"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FormatValue(tc.typ, tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("FormatValue = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFormatValueErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  LogicalType
		v    any
		want string
	}{
		{"wrong Go type", valT(TypeInteger), struct{}{}, "cannot render struct {} as INTEGER"},
		{"struct arity", valStruct(Field{"a", valT(TypeInteger)}), Struct{}, "cannot render"},
		{"union member", valUnion(Field{"s", valT(TypeVarchar)}), Union{"x", 1}, `no member "x"`},
		{"geometry", valT(TypeGeometry), []byte{1}, "GEOMETRY"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FormatValue(tc.typ, tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValueTypesString(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Decimal{big.NewInt(-5), 4, 2}.String(), "-0.05"},
		{Interval{Months: 2, Micros: 1500}.String(), "2 months 00:00:00.0015"},
		{TimeTZ{Micros: 1e6, OffsetSeconds: -3600}.String(), "00:00:01-01"},
		{UUID{15: 1}.String(), "00000000-0000-0000-0000-000000000001"},
		{Bit("10").String(), "10"},
		{PositiveInfinity.String(), "infinity"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
	if f := (Decimal{big.NewInt(-5), 4, 2}).Float64(); f != -0.05 {
		t.Errorf("Float64() = %v, want -0.05", f)
	}
}
