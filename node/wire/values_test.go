package wire

import (
	"bytes"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Type constructors for the value tests.

func valT(id TypeID) LogicalType { return LogicalType{ID: id} }

func valDecimal(width, scale uint8) LogicalType {
	return LogicalType{ID: TypeDecimal, Width: width, Scale: scale}
}

func valList(child LogicalType) LogicalType { return LogicalType{ID: TypeList, Child: &child} }

func valArray(child LogicalType, n uint32) LogicalType {
	return LogicalType{ID: TypeArray, Child: &child, ArraySize: n}
}

func valStruct(fields ...Field) LogicalType { return LogicalType{ID: TypeStruct, Fields: fields} }

func valMap(key, value LogicalType) LogicalType {
	entry := valStruct(Field{"key", key}, Field{"value", value})
	return LogicalType{ID: TypeMap, Child: &entry}
}

// valUnion adds the hidden tag field in front of the members.
func valUnion(members ...Field) LogicalType {
	return LogicalType{ID: TypeUnion, Fields: append([]Field{{"", valT(TypeUTinyInt)}}, members...)}
}

func valEnum(values ...string) LogicalType { return LogicalType{ID: TypeEnum, EnumValues: values} }

func valBig(t *testing.T, s string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatalf("bad test integer %q", s)
	}
	return n
}

func valDec(t *testing.T, unscaled string, width, scale uint8) Decimal {
	t.Helper()
	return Decimal{Value: valBig(t, unscaled), Width: width, Scale: scale}
}

// sameValue compares two values in the forms Vector.Value returns, comparing
// big integers and times by value rather than by representation.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case Decimal:
		y, ok := b.(Decimal)
		return ok && x.Width == y.Width && x.Scale == y.Scale && x.Value.Cmp(y.Value) == 0
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y) && y.Location() == time.UTC
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameValue(x[k], y[k]) {
				return false
			}
		}
		return true
	case Struct:
		y, ok := b.(Struct)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if x[k].Name != y[k].Name || !sameValue(x[k].Value, y[k].Value) {
				return false
			}
		}
		return true
	case []MapEntry:
		y, ok := b.([]MapEntry)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameValue(x[k].Key, y[k].Key) || !sameValue(x[k].Value, y[k].Value) {
				return false
			}
		}
		return true
	case Union:
		y, ok := b.(Union)
		return ok && x.Tag == y.Tag && sameValue(x.Value, y.Value)
	}
	return reflect.DeepEqual(a, b)
}

// checkRoundTrip builds a vector from in and checks that Value returns want
// row by row.
func checkRoundTrip(t *testing.T, typ LogicalType, in, want []any) {
	t.Helper()
	v, err := NewVector(typ, in)
	if err != nil {
		t.Fatalf("NewVector: %v", err)
	}
	if v.Count != len(in) {
		t.Fatalf("Count = %d, want %d", v.Count, len(in))
	}
	hasNull := false
	for i := range want {
		got, err := v.Value(i)
		if err != nil {
			t.Fatalf("Value(%d): %v", i, err)
		}
		if !sameValue(want[i], got) {
			t.Errorf("Value(%d) = %#v, want %#v", i, got, want[i])
		}
		hasNull = hasNull || in[i] == nil
	}
	if hasNull != (v.Validity != nil) {
		t.Errorf("validity present = %v, want %v", v.Validity != nil, hasNull)
	}
}

func TestValueRoundTrip(t *testing.T) {
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	plus2 := time.FixedZone("+02", 2*3600)
	bigMax := "170141183460469231731687303715884105727"
	bigMin := "-170141183460469231731687303715884105728"
	uMax := "340282366920938463463374607431768211455"
	enum300 := make([]string, 300)
	for k := range enum300 {
		enum300[k] = "v" + strings.Repeat("x", k%7) + string(rune('a'+k%26)) + string(rune('0'+k/26))
	}
	point := valStruct(Field{"x", valT(TypeInteger)}, Field{"tags", valList(valT(TypeVarchar))})
	union := valUnion(Field{"i", valT(TypeInteger)}, Field{"s", valT(TypeVarchar)})

	tests := []struct {
		name string
		typ  LogicalType
		in   []any
		want []any // nil: same as in
	}{
		{"boolean", valT(TypeBoolean), []any{true, false, nil}, nil},
		{"tinyint", valT(TypeTinyInt), []any{int8(-128), int8(127), nil, int8(0)}, nil},
		{"smallint", valT(TypeSmallInt), []any{int16(-32768), int16(32767)}, nil},
		{"integer", valT(TypeInteger), []any{int32(math.MinInt32), int32(math.MaxInt32), nil}, nil},
		{"bigint", valT(TypeBigInt), []any{int64(math.MinInt64), int64(math.MaxInt64)}, nil},
		{"utinyint", valT(TypeUTinyInt), []any{uint8(0), uint8(255), nil}, nil},
		{"usmallint", valT(TypeUSmallInt), []any{uint16(0), uint16(65535)}, nil},
		{"uinteger", valT(TypeUInteger), []any{uint32(0), uint32(math.MaxUint32)}, nil},
		{"ubigint", valT(TypeUBigInt), []any{uint64(0), uint64(math.MaxUint64), nil}, nil},
		{"hugeint", valT(TypeHugeInt),
			[]any{valBig(t, bigMin), valBig(t, bigMax), big.NewInt(0), big.NewInt(-1), nil, valBig(t, "18446744073709551616"), valBig(t, "-18446744073709551617")}, nil},
		{"uhugeint", valT(TypeUHugeInt), []any{big.NewInt(0), valBig(t, uMax), valBig(t, "18446744073709551616"), nil}, nil},
		{"bignum", valT(TypeBigNum),
			[]any{big.NewInt(0), big.NewInt(1), big.NewInt(-1), big.NewInt(255), big.NewInt(-256), valBig(t, "-123456789012345678901234567890123456789012345678901234567890"), nil}, nil},
		{"float", valT(TypeFloat), []any{float32(1.5), float32(-3.25), float32(math.Inf(1)), float32(math.SmallestNonzeroFloat32), nil}, nil},
		{"double", valT(TypeDouble), []any{3.141592653589793, -1e300, math.Inf(-1), math.SmallestNonzeroFloat64, nil}, nil},
		{"decimal(4,1)", valDecimal(4, 1), []any{valDec(t, "1234", 4, 1), valDec(t, "-9999", 4, 1), nil}, nil},
		{"decimal(9,2)", valDecimal(9, 2), []any{valDec(t, "123456789", 9, 2), valDec(t, "-1", 9, 2), nil}, nil},
		{"decimal(18,3)", valDecimal(18, 3), []any{valDec(t, "123456789012345678", 18, 3), valDec(t, "-1000", 18, 3)}, nil},
		{"decimal(38,10)", valDecimal(38, 10),
			[]any{valDec(t, "12345678901234567890123456780123456789", 38, 10), valDec(t, "-99999999999999999999999999999999999999", 38, 10), valDec(t, "-1", 38, 10), nil}, nil},
		{"varchar", valT(TypeVarchar), []any{"", "duck", "this string is longer than twelve bytes", "ünïcødé 🦆", nil}, nil},
		{"blob", valT(TypeBlob), []any{[]byte{}, []byte{0xDE, 0xAD, 0xBE, 0xEF}, nil, []byte("a")}, nil},
		{"bit", valT(TypeBit), []any{Bit("1"), Bit("101010"), Bit("00000000"), Bit("111111111"), Bit("0101010101010101"), nil}, nil},
		{"date", valT(TypeDate),
			[]any{utc(2024, 2, 29, 0, 0, 0, 0), utc(1970, 1, 1, 0, 0, 0, 0), utc(-100, 3, 1, 0, 0, 0, 0), utc(99999, 12, 31, 0, 0, 0, 0), PositiveInfinity, NegativeInfinity, nil}, nil},
		{"timestamp", valT(TypeTimestamp),
			[]any{utc(2024, 2, 29, 12, 34, 56, 789012000), utc(1969, 12, 31, 23, 59, 59, 999999000), utc(-1, 1, 1, 0, 0, 0, 0), PositiveInfinity, NegativeInfinity, nil}, nil},
		{"timestamp_s", valT(TypeTimestampS), []any{utc(2024, 2, 29, 12, 34, 56, 0), utc(1900, 1, 1, 0, 0, 0, 0), nil}, nil},
		{"timestamp_ms", valT(TypeTimestampMS), []any{utc(2024, 2, 29, 12, 34, 56, 789000000), utc(1969, 12, 31, 23, 59, 59, 1000000)}, nil},
		{"timestamp_ns", valT(TypeTimestampNS), []any{utc(2024, 2, 29, 12, 34, 56, 789012345), utc(1969, 12, 31, 23, 59, 59, 999999999), PositiveInfinity}, nil},
		{"timestamptz", valT(TypeTimestampTZ), []any{utc(2024, 2, 29, 12, 34, 56, 789012000), nil, NegativeInfinity}, nil},
		{"time", valT(TypeTime), []any{time.Duration(0), 24 * time.Hour, 12*time.Hour + 34*time.Minute + 56*time.Second + 789012*time.Microsecond, nil}, nil},
		{"time_ns", valT(TypeTimeNS), []any{time.Duration(1), 23*time.Hour + 999999999, nil}, nil},
		{"timetz", valT(TypeTimeTZ),
			[]any{TimeTZ{Micros: 45296e6, OffsetSeconds: 7200}, TimeTZ{Micros: 0, OffsetSeconds: -19800}, TimeTZ{Micros: 86400e6, OffsetSeconds: -57599}, TimeTZ{Micros: 1, OffsetSeconds: 57599}, nil}, nil},
		{"interval", valT(TypeInterval),
			[]any{Interval{Months: 14, Days: 3, Micros: 14706789000}, Interval{Days: -1}, Interval{Months: math.MinInt32 + 1, Days: math.MaxInt32, Micros: math.MinInt64 + 1}, nil}, nil},
		{"uuid", valT(TypeUUID),
			[]any{UUID{0x55, 0x0e, 0x84, 0x00, 0xe2, 0x9b, 0x41, 0xd4, 0xa7, 0x16, 0x44, 0x66, 0x55, 0x44, 0x00, 0x00}, UUID{}, UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, nil}, nil},
		{"enum", valEnum("sad", "ok", "happy"), []any{"ok", "happy", nil, "sad"}, nil},
		{"enum of 300", valEnum(enum300...), []any{enum300[299], enum300[0], nil}, nil},
		{"sqlnull", valT(TypeSQLNull), []any{nil, nil}, nil},
		{"list", valList(valT(TypeInteger)),
			[]any{[]any{int32(1), int32(2), nil, int32(3)}, []any{}, nil, []any{nil}}, nil},
		{"list of lists", valList(valList(valT(TypeVarchar))),
			[]any{[]any{[]any{"a", nil}, nil, []any{}}, nil, []any{}}, nil},
		{"array", valArray(valT(TypeInteger), 3),
			[]any{[]any{int32(1), int32(2), int32(3)}, nil, []any{nil, int32(5), int32(6)}}, nil},
		{"array of structs", valArray(point, 2),
			[]any{[]any{Struct{{"x", int32(1)}, {"tags", []any{"a"}}}, nil}, nil}, nil},
		{"struct", valStruct(Field{"a", valT(TypeInteger)}, Field{"b", valT(TypeVarchar)}),
			[]any{Struct{{"a", int32(1)}, {"b", "x"}}, nil, Struct{{"a", nil}, {"b", nil}}}, nil},
		{"unnamed struct", valStruct(Field{"", valT(TypeInteger)}, Field{"", valT(TypeVarchar)}),
			[]any{Struct{{"", int32(1)}, {"", "x"}}}, nil},
		{"map", valMap(valT(TypeVarchar), valT(TypeInteger)),
			[]any{[]MapEntry{{"k1", int32(1)}, {"k2", nil}}, []MapEntry{}, nil}, nil},
		{"map of lists", valMap(valT(TypeInteger), valList(valT(TypeDouble))),
			[]any{[]MapEntry{{int32(1), []any{1.5, nil}}, {int32(2), nil}}}, nil},
		{"union", union, []any{Union{"i", int32(7)}, Union{"s", "seven"}, nil, Union{"s", nil}}, nil},
		{"nulls at every level", valList(point),
			[]any{
				[]any{Struct{{"x", int32(1)}, {"tags", []any{"a", nil, ""}}}, nil, Struct{{"x", nil}, {"tags", nil}}, Struct{{"x", int32(2)}, {"tags", []any{}}}},
				nil,
				[]any{},
				[]any{nil},
			}, nil},

		// Conveniences and their canonical results.
		{"integer from int", valT(TypeInteger), []any{42, -7, int8(3), uint16(9), 1e9, big.NewInt(5), "12"},
			[]any{int32(42), int32(-7), int32(3), int32(9), int32(1e9), int32(5), int32(12)}},
		{"ubigint from int", valT(TypeUBigInt), []any{7, uint(8)}, []any{uint64(7), uint64(8)}},
		{"hugeint from string", valT(TypeHugeInt), []any{bigMin, 5, Hugeint{Upper: -1, Lower: math.MaxUint64}},
			[]any{valBig(t, bigMin), big.NewInt(5), big.NewInt(-1)}},
		{"float from float64", valT(TypeFloat), []any{1.5, 2}, []any{float32(1.5), float32(2)}},
		{"double from int", valT(TypeDouble), []any{3, float32(0.5)}, []any{3.0, 0.5}},
		{"decimal from strings", valDecimal(9, 2), []any{"1234567.89", "-0.01", "0.005", "-0.005", "12"},
			[]any{valDec(t, "123456789", 9, 2), valDec(t, "-1", 9, 2), valDec(t, "1", 9, 2), valDec(t, "-1", 9, 2), valDec(t, "1200", 9, 2)}},
		{"decimal from numbers", valDecimal(18, 3), []any{1.5, 7, big.NewInt(-2), valDec(t, "15", 4, 1)},
			[]any{valDec(t, "1500", 18, 3), valDec(t, "7000", 18, 3), valDec(t, "-2000", 18, 3), valDec(t, "1500", 18, 3)}},
		{"decimal(38) from string", valDecimal(38, 10), []any{"1234567890123456789012345678.0123456789"},
			[]any{valDec(t, "12345678901234567890123456780123456789", 38, 10)}},
		{"varchar from bytes", valT(TypeVarchar), []any{[]byte("hi")}, []any{"hi"}},
		{"blob from string", valT(TypeBlob), []any{"\xde\xad"}, []any{[]byte{0xDE, 0xAD}}},
		{"bit from string", valT(TypeBit), []any{"0101"}, []any{Bit("0101")}},
		{"date in its own zone", valT(TypeDate), []any{time.Date(2024, 2, 29, 0, 30, 0, 0, plus2)}, []any{utc(2024, 2, 29, 0, 0, 0, 0)}},
		{"timestamp instant", valT(TypeTimestamp), []any{time.Date(2024, 2, 29, 2, 0, 0, 0, plus2)}, []any{utc(2024, 2, 29, 0, 0, 0, 0)}},
		{"timestamp_s truncates", valT(TypeTimestampS), []any{utc(2024, 2, 29, 0, 0, 1, 999)}, []any{utc(2024, 2, 29, 0, 0, 1, 0)}},
		{"interval from duration", valT(TypeInterval), []any{90 * time.Minute}, []any{Interval{Micros: 5400e6}}},
		{"uuid from text", valT(TypeUUID), []any{"550e8400-e29b-41d4-a716-446655440000", "{00000000000000000000000000000001}", [16]byte{1}},
			[]any{UUID{0x55, 0x0e, 0x84, 0x00, 0xe2, 0x9b, 0x41, 0xd4, 0xa7, 0x16, 0x44, 0x66, 0x55, 0x44, 0x00, 0x00}, UUID{15: 1}, UUID{1}}},
		{"list from typed slice", valList(valT(TypeBigInt)), []any{[]int{1, 2}, [2]int64{3, 4}}, []any{[]any{int64(1), int64(2)}, []any{int64(3), int64(4)}}},
		{"struct from map and slice", valStruct(Field{"a", valT(TypeInteger)}, Field{"b", valT(TypeVarchar)}),
			[]any{map[string]any{"b": "x"}, []any{1, "y"}},
			[]any{Struct{{"a", nil}, {"b", "x"}}, Struct{{"a", int32(1)}, {"b", "y"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.in
			}
			checkRoundTrip(t, tc.typ, tc.in, want)
		})
	}
}

// TestNewVectorLayout checks the flat layout against DuckDB's bytes (§7.3,
// §7.9): mask words with the bits past Count set, NULL placeholders, list
// entries, and the special encodings of UUID, TIMETZ, BIT and BIGNUM.
func TestNewVectorLayout(t *testing.T) {
	allValid := bytes.Repeat([]byte{0xFF}, 8)
	mask := func(first byte) []byte { return append([]byte{first}, allValid[1:]...) }
	tests := []struct {
		name     string
		typ      LogicalType
		in       []any
		validity []byte
		data     []byte
		strBytes []byte
	}{
		{"boolean", valT(TypeBoolean), []any{true, false, nil}, mask(0xFB), []byte{1, 0, 0x80}, nil},
		{"integer", valT(TypeInteger), []any{1, nil}, mask(0xFD), []byte{1, 0, 0, 0, 0, 0, 0, 0x80}, nil},
		{"double null", valT(TypeDouble), []any{nil}, mask(0xFE), []byte{0, 0, 0, 0, 0, 0, 0xF8, 0x7F}, nil},
		{"hugeint", valT(TypeHugeInt), []any{-2, nil}, mask(0xFD),
			append(bytes.Repeat([]byte{0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, 1),
				append(bytes.Repeat([]byte{0xFF}, 8), append(make([]byte, 15), 0x80)...)...), nil},
		{"uuid", valT(TypeUUID), []any{"00000000-0000-0001-0000-000000000002"}, nil,
			[]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x80}, nil},
		{"timetz", valT(TypeTimeTZ), []any{TimeTZ{Micros: 1, OffsetSeconds: 0}}, nil,
			[]byte{0xFF, 0xE0, 0, 1, 0, 0, 0, 0}, nil},
		{"decimal(4,1)", valDecimal(4, 1), []any{"-0.1"}, nil, []byte{0xFF, 0xFF}, nil},
		{"enum", valEnum("a", "b"), []any{"b", nil}, mask(0xFD), []byte{1, 0}, nil},
		{"bit", valT(TypeBit), []any{Bit("101010"), Bit("1")}, nil, nil, []byte{2, 0xEA, 7, 0xFF}},
		{"bignum", valT(TypeBigNum), []any{0, -1, 256}, nil, nil,
			[]byte{0x80, 0, 1, 0, 0x7F, 0xFF, 0xFE, 0xFE, 0x80, 0, 2, 1, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewVector(tc.typ, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v.Validity, tc.validity) {
				t.Errorf("validity = % x, want % x", v.Validity, tc.validity)
			}
			if !bytes.Equal(v.Data, tc.data) {
				t.Errorf("data = % x, want % x", v.Data, tc.data)
			}
			if !bytes.Equal(v.Bytes, tc.strBytes) {
				t.Errorf("bytes = % x, want % x", v.Bytes, tc.strBytes)
			}
		})
	}

	t.Run("list entries", func(t *testing.T) {
		v, err := NewVector(valList(valT(TypeInteger)), []any{[]any{1, 2}, nil, []any{}, []any{3}})
		if err != nil {
			t.Fatal(err)
		}
		want := []ListEntry{{0, 2}, {0, 0}, {2, 0}, {2, 1}}
		if !reflect.DeepEqual(v.Entries, want) || v.ListSize != 3 || v.Children[0].Count != 3 {
			t.Errorf("entries %v, list size %d, child count %d; want %v, 3, 3", v.Entries, v.ListSize, v.Children[0].Count, want)
		}
	})
	t.Run("mask spans words", func(t *testing.T) {
		in := make([]any, 70)
		in[69] = 1
		v, err := NewVector(valT(TypeInteger), in)
		if err != nil {
			t.Fatal(err)
		}
		// Rows 0..68 NULL, row 69 valid, bits past row 69 set.
		want := append(make([]byte, 8), 0xE0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
		if !bytes.Equal(v.Validity, want) {
			t.Errorf("validity = % x, want % x", v.Validity, want)
		}
	})
}

func TestNewVectorErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  LogicalType
		in   []any
		want string
	}{
		{"integer overflow", valT(TypeInteger), []any{1, 1e20}, "column of type INTEGER, row 1: value 1e+20 out of range"},
		{"tinyint overflow", valT(TypeTinyInt), []any{128}, "value 128 out of range"},
		{"negative unsigned", valT(TypeUTinyInt), []any{-1}, "value -1 out of range"},
		{"fractional integer", valT(TypeBigInt), []any{1.5}, "value 1.5 is not an integer"},
		{"hugeint overflow", valT(TypeHugeInt), []any{"170141183460469231731687303715884105728"}, "out of range"},
		{"uhugeint negative", valT(TypeUHugeInt), []any{-1}, "out of range"},
		{"decimal overflow", valDecimal(4, 1), []any{"1000"}, "value 1000 out of range"},
		{"decimal not a number", valDecimal(4, 1), []any{"abc"}, `"abc" is not a number`},
		{"float overflow", valT(TypeFloat), []any{1e300}, "out of range"},
		{"wrong Go type", valT(TypeVarchar), []any{42}, "cannot use int as VARCHAR"},
		{"invalid utf-8", valT(TypeVarchar), []any{"\xff"}, "not valid UTF-8"},
		{"bad bit", valT(TypeBit), []any{"012"}, "other than 0 and 1"},
		{"empty bit", valT(TypeBit), []any{""}, "at least one bit"},
		{"enum miss", valEnum("a"), []any{"b"}, `"b" is not a value of the ENUM`},
		{"time range", valT(TypeTime), []any{-time.Second}, "out of range"},
		{"bad uuid", valT(TypeUUID), []any{"xyz"}, `"xyz" is not a UUID`},
		{"array length", valArray(valT(TypeInteger), 3), []any{[]any{1}}, "1 elements for INTEGER[3]"},
		{"list element", valList(valT(TypeInteger)), []any{[]any{1, "x"}}, `element 1: "x" is not an integer`},
		{"struct field name", valStruct(Field{"a", valT(TypeInteger)}), []any{Struct{{"b", 1}}}, `field 0 is "b", want "a"`},
		{"struct extra key", valStruct(Field{"a", valT(TypeInteger)}), []any{map[string]any{"a": 1, "z": 2}}, "not fields"},
		{"union member", valUnion(Field{"i", valT(TypeInteger)}), []any{Union{"s", "x"}}, `no member "s"`},
		{"map null key", valMap(valT(TypeVarchar), valT(TypeInteger)), []any{[]MapEntry{{nil, 1}}}, "NULL key"},
		{"sqlnull value", valT(TypeSQLNull), []any{1}, "holds only NULL"},
		{"bad decimal type", valDecimal(40, 1), []any{1}, "invalid type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewVector(tc.typ, tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValueMalformed(t *testing.T) {
	tests := []struct {
		name string
		v    *Vector
		row  int
		want string
	}{
		{"row out of range", &Vector{Type: valT(TypeInteger), Count: 1, Data: make([]byte, 4)}, 1, "out of range"},
		{"short data", &Vector{Type: valT(TypeInteger), Count: 2, Data: make([]byte, 4)}, 1, "too short"},
		{"short validity", &Vector{Type: valT(TypeInteger), Count: 9, Validity: []byte{0xFF}, Data: make([]byte, 36)}, 8, "validity"},
		{"bad offsets", &Vector{Type: valT(TypeVarchar), Count: 1, Offsets: []uint32{0, 5}, Bytes: []byte("abc")}, 0, "spans bytes"},
		{"enum index", &Vector{Type: valEnum("a"), Count: 1, Data: []byte{3}}, 0, "ENUM index 3"},
		{"bad bit", &Vector{Type: valT(TypeBit), Count: 1, Offsets: []uint32{0, 1}, Bytes: []byte{0}}, 0, "BIT value"},
		{"bad bignum", &Vector{Type: valT(TypeBigNum), Count: 1, Offsets: []uint32{0, 4}, Bytes: []byte{0x80, 0, 2, 1}}, 0, "BIGNUM header"},
		{"list beyond child", &Vector{Type: valList(valT(TypeInteger)), Count: 1, Entries: []ListEntry{{1, 2}},
			Children: []*Vector{{Type: valT(TypeInteger), Count: 2, Data: make([]byte, 8)}}}, 0, "beyond"},
		{"union tag", &Vector{Type: valUnion(Field{"i", valT(TypeInteger)}), Count: 1, Children: []*Vector{
			{Type: valT(TypeUTinyInt), Count: 1, Data: []byte{5}}, {Type: valT(TypeInteger), Count: 1, Data: make([]byte, 4)}}}, 0, "tag 5"},
		{"variant", &Vector{Type: valT(TypeVariant), Count: 1}, 0, "no Go value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.v.Value(tc.row)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestValueAllocations checks that fixed-width scalars cost at most the
// allocation of boxing them in an interface.
func TestValueAllocations(t *testing.T) {
	for _, typ := range []LogicalType{valT(TypeInteger), valT(TypeBigInt), valT(TypeDouble), valT(TypeTimestamp), valT(TypeInterval), valT(TypeUUID), valEnum("a", "b")} {
		v, err := NewVector(typ, make([]any, 1))
		if err != nil {
			t.Fatal(err)
		}
		v.Validity = nil // read the placeholder as a value
		if allocs := testing.AllocsPerRun(100, func() { _, _ = v.Value(0) }); allocs > 1 {
			t.Errorf("%s: Value allocates %v times", typ.String(), allocs)
		}
	}
}

func TestChunkFromRows(t *testing.T) {
	types := []LogicalType{valT(TypeInteger), valT(TypeVarchar), valT(TypeDouble)}
	rows := [][]any{{1, "one", 1.5}, {2, nil, nil}, {3, "a string longer than 12 bytes", -0.25}}
	c, err := ChunkFromRows(types, rows)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rows != 3 || len(c.Columns) != 3 {
		t.Fatalf("chunk has %d rows, %d columns", c.Rows, len(c.Columns))
	}
	want := [][]string{{"1", "one", "1.5"}, {"2", "NULL", "NULL"}, {"3", "a string longer than 12 bytes", "-0.25"}}
	for r := range want {
		for col := range want[r] {
			if got, err := c.Columns[col].Text(r); err != nil || got != want[r][col] {
				t.Errorf("row %d column %d = %q, %v; want %q", r, col, got, err, want[r][col])
			}
		}
	}
	if _, err := ChunkFromRows(types, [][]any{{1, "x"}}); err == nil || !strings.Contains(err.Error(), "row 0 has 2 values for 3 columns") {
		t.Errorf("short row: error = %v", err)
	}
	if _, err := ChunkFromRows(types, [][]any{{1, 2, 3.0}}); err == nil || !strings.Contains(err.Error(), "row 0, column 1 of type VARCHAR") {
		t.Errorf("bad value: error = %v", err)
	}
}

func TestRandomUUIDIsFresh(t *testing.T) {
	seen := map[Hugeint]bool{}
	for range 1000 {
		u := RandomUUID()
		if u == (Hugeint{}) || seen[u] {
			t.Fatalf("RandomUUID repeated or zero: %+v", u)
		}
		seen[u] = true
	}
}
