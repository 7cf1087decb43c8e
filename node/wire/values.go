package wire

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"time"
)

// The Go values that Vector.Value returns and NewVector accepts, one per
// DuckDB type:
//
//	NULL (any type), SQLNULL          nil
//	BOOLEAN                           bool
//	TINYINT … BIGINT                  int8, int16, int32, int64
//	UTINYINT … UBIGINT                uint8, uint16, uint32, uint64
//	HUGEINT, UHUGEINT, BIGNUM         *big.Int
//	FLOAT, DOUBLE                     float32, float64
//	DECIMAL(w,s)                      Decimal
//	VARCHAR, CHAR, ENUM               string
//	BLOB, GEOMETRY (WKB)              []byte
//	BIT                               Bit
//	DATE, TIMESTAMP*, TIMESTAMPTZ     time.Time in UTC, or Infinity
//	TIME, TIME_NS                     time.Duration since midnight
//	TIMETZ                            TimeTZ
//	INTERVAL                          Interval
//	UUID                              UUID
//	LIST, ARRAY                       []any
//	STRUCT (and unnamed STRUCT/TUPLE) Struct
//	MAP                               []MapEntry
//	UNION                             Union

// Decimal is a DECIMAL(Width, Scale) value: Value × 10^-Scale. Value is the
// unscaled integer exactly as DuckDB stores it, so no precision is lost.
type Decimal struct {
	Value        *big.Int
	Width, Scale uint8
}

// String renders d as DuckDB does: all Scale fraction digits, and a "0"
// before the point of a value below one unless Width equals Scale.
func (d Decimal) String() string {
	return string(appendDecimal(nil, d))
}

// Float64 returns the nearest float64 to d.
func (d Decimal) Float64() float64 {
	f, _ := new(big.Rat).SetFrac(d.Value, pow10Big(d.Scale)).Float64()
	return f
}

// Interval is an INTERVAL: months, days and microseconds are independent
// components, as in DuckDB.
type Interval struct {
	Months int32
	Days   int32
	Micros int64
}

// String renders i as DuckDB does, e.g. "1 year 2 months 3 days 04:05:06.789".
func (i Interval) String() string { return string(appendInterval(nil, i)) }

// TimeTZ is a TIME WITH TIME ZONE: a time of day and the UTC offset it was
// written with (east of UTC is positive).
type TimeTZ struct {
	Micros        int64 // microseconds since midnight
	OffsetSeconds int32
}

// String renders t as DuckDB does, e.g. "12:34:56+02" or "00:00:00-05:30".
func (t TimeTZ) String() string { return string(appendTimeTZ(nil, t)) }

// UUID is a UUID in its canonical byte order (as written in its text form).
type UUID [16]byte

// String returns the canonical lowercase form
// "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func (u UUID) String() string { return string(appendUUID(nil, u)) }

// Bit is a BIT string, one '0' or '1' character per bit, most significant
// (first written) bit first.
type Bit string

// String returns the bits as '0' and '1' characters.
func (b Bit) String() string { return string(b) }

// Infinity is the value of a DATE or TIMESTAMP row holding DuckDB's
// 'infinity' or '-infinity', which no time.Time can represent.
type Infinity int8

// The two infinities.
const (
	NegativeInfinity Infinity = -1
	PositiveInfinity Infinity = 1
)

// String returns "infinity" or "-infinity", as DuckDB prints them.
func (inf Infinity) String() string {
	if inf < 0 {
		return "-infinity"
	}
	return "infinity"
}

// Struct is a STRUCT row: its fields in type order, so that printing keeps
// DuckDB's field order. Fields of an unnamed STRUCT (a TUPLE) have empty
// names.
type Struct []StructField

// StructField is one field of a Struct.
type StructField struct {
	Name  string
	Value any
}

// MapEntry is one key/value pair of a MAP row.
type MapEntry struct {
	Key, Value any
}

// Union is a UNION row: the name of the active member and its value.
type Union struct {
	Tag   string
	Value any
}

// Sentinels of the on-disk infinities of DATE and the TIMESTAMP types.
const (
	dateInfinity      = math.MaxInt32
	timestampInfinity = math.MaxInt64
)

// Value returns row i as the Go value listed at the top of this file; a
// NULL row is nil. It fails on a row out of range, a vector whose buffers
// are too short for its Count, and types that have no Go value here
// (VARIANT).
func (v *Vector) Value(i int) (any, error) {
	if i < 0 || i >= v.Count {
		return nil, fmt.Errorf("row %d out of range of %s vector with %d rows", i, v.Type.String(), v.Count)
	}
	if v.Validity != nil {
		if i>>3 >= len(v.Validity) {
			return nil, fmt.Errorf("%s vector: validity of %d bytes too short for row %d", v.Type.String(), len(v.Validity), i)
		}
		if !v.IsValid(i) {
			return nil, nil
		}
	}
	switch v.Type.ID {
	case TypeSQLNull:
		return nil, nil
	case TypeVarchar, TypeChar:
		b, err := v.stringRow(i)
		return string(b), err
	case TypeBlob, TypeGeometry:
		b, err := v.stringRow(i)
		if err != nil {
			return nil, err
		}
		return append([]byte{}, b...), nil
	case TypeBit:
		b, err := v.stringRow(i)
		if err != nil {
			return nil, err
		}
		return decodeBit(b)
	case TypeBigNum:
		b, err := v.stringRow(i)
		if err != nil {
			return nil, err
		}
		return decodeBigNum(b)
	case TypeList, TypeMap:
		return v.listRow(i)
	case TypeArray:
		return v.arrayRow(i)
	case TypeStruct, TypeTuple:
		return v.structRow(i)
	case TypeUnion:
		return v.unionRow(i)
	}
	w := valueWidth(v.Type)
	if w == 0 {
		return nil, fmt.Errorf("no Go value for %s", v.Type.String())
	}
	if len(v.Data) < (i+1)*w {
		return nil, fmt.Errorf("%s vector: data of %d bytes too short for row %d", v.Type.String(), len(v.Data), i)
	}
	return fixedValue(v.Type, v.Data[i*w:(i+1)*w])
}

// fixedValue decodes one row of a fixed-width type from its w bytes.
func fixedValue(t LogicalType, b []byte) (any, error) {
	le := binary.LittleEndian
	switch t.ID {
	case TypeBoolean:
		return b[0] != 0, nil
	case TypeTinyInt:
		return int8(b[0]), nil
	case TypeSmallInt:
		return int16(le.Uint16(b)), nil
	case TypeInteger:
		return int32(le.Uint32(b)), nil
	case TypeBigInt:
		return int64(le.Uint64(b)), nil
	case TypeUTinyInt:
		return b[0], nil
	case TypeUSmallInt:
		return le.Uint16(b), nil
	case TypeUInteger:
		return le.Uint32(b), nil
	case TypeUBigInt:
		return le.Uint64(b), nil
	case TypeHugeInt:
		return int128ToBig(int64(le.Uint64(b[8:])), le.Uint64(b)), nil
	case TypeUHugeInt:
		return uint128ToBig(le.Uint64(b[8:]), le.Uint64(b)), nil
	case TypeFloat:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeDouble:
		return math.Float64frombits(le.Uint64(b)), nil
	case TypeDecimal:
		return Decimal{Value: decimalUnscaled(b), Width: t.Width, Scale: t.Scale}, nil
	case TypeDate:
		days := int32(le.Uint32(b))
		if days == dateInfinity || days == -dateInfinity {
			return infinityOf(int64(days)), nil
		}
		return time.Unix(int64(days)*86400, 0).UTC(), nil
	case TypeTimestamp, TypeTimestampTZ:
		return timestampValue(int64(le.Uint64(b)), time.Microsecond), nil
	case TypeTimestampS:
		return timestampValue(int64(le.Uint64(b)), time.Second), nil
	case TypeTimestampMS:
		return timestampValue(int64(le.Uint64(b)), time.Millisecond), nil
	case TypeTimestampNS, TypeTimestampTZNS:
		return timestampValue(int64(le.Uint64(b)), time.Nanosecond), nil
	case TypeTime:
		return time.Duration(int64(le.Uint64(b))) * time.Microsecond, nil
	case TypeTimeNS:
		return time.Duration(int64(le.Uint64(b))), nil
	case TypeTimeTZ:
		packed := le.Uint64(b)
		return TimeTZ{Micros: int64(packed >> 24), OffsetSeconds: timeTZMaxOffset - int32(packed&0xFFFFFF)}, nil
	case TypeInterval:
		return Interval{Months: int32(le.Uint32(b)), Days: int32(le.Uint32(b[4:])), Micros: int64(le.Uint64(b[8:]))}, nil
	case TypeUUID:
		var u UUID
		binary.BigEndian.PutUint64(u[:8], le.Uint64(b[8:])^(1<<63))
		binary.BigEndian.PutUint64(u[8:], le.Uint64(b))
		return u, nil
	case TypeEnum:
		var idx uint32
		switch len(b) {
		case 1:
			idx = uint32(b[0])
		case 2:
			idx = uint32(le.Uint16(b))
		default:
			idx = le.Uint32(b)
		}
		if int(idx) >= len(t.EnumValues) {
			return nil, fmt.Errorf("ENUM index %d out of range of its %d values", idx, len(t.EnumValues))
		}
		return t.EnumValues[idx], nil
	}
	return nil, fmt.Errorf("no Go value for %s", t.String())
}

// timeTZMaxOffset is the bias of the TIMETZ offset field: the low 24 bits
// hold timeTZMaxOffset − offset, so that packed values sort by UTC time.
const timeTZMaxOffset = 16*3600 - 1

// timestampValue converts n units since the epoch to a UTC time.Time, or to
// an Infinity for DuckDB's infinity sentinels.
func timestampValue(n int64, unit time.Duration) any {
	if n == timestampInfinity || n == -timestampInfinity {
		return infinityOf(n)
	}
	switch unit {
	case time.Second:
		return time.Unix(n, 0).UTC()
	case time.Millisecond:
		return time.UnixMilli(n).UTC()
	case time.Microsecond:
		return time.UnixMicro(n).UTC()
	default:
		return time.Unix(0, n).UTC()
	}
}

func infinityOf(n int64) Infinity {
	if n < 0 {
		return NegativeInfinity
	}
	return PositiveInfinity
}

// decimalUnscaled reads the unscaled integer of a DECIMAL, stored as a
// little-endian int16, int32, int64 or int128 depending on the width.
func decimalUnscaled(b []byte) *big.Int {
	le := binary.LittleEndian
	switch len(b) {
	case 2:
		return big.NewInt(int64(int16(le.Uint16(b))))
	case 4:
		return big.NewInt(int64(int32(le.Uint32(b))))
	case 8:
		return big.NewInt(int64(le.Uint64(b)))
	default:
		return int128ToBig(int64(le.Uint64(b[8:])), le.Uint64(b))
	}
}

func int128ToBig(upper int64, lower uint64) *big.Int {
	if upper == 0 && lower <= math.MaxInt64 || upper == -1 && lower > math.MaxInt64 {
		return big.NewInt(int64(lower))
	}
	n := new(big.Int).SetInt64(upper)
	n.Lsh(n, 64)
	return n.Or(n, new(big.Int).SetUint64(lower))
}

func uint128ToBig(upper, lower uint64) *big.Int {
	n := new(big.Int).SetUint64(upper)
	n.Lsh(n, 64)
	return n.Or(n, new(big.Int).SetUint64(lower))
}

// stringRow returns the bytes of row i of a string-like vector.
func (v *Vector) stringRow(i int) ([]byte, error) {
	if len(v.Offsets) < v.Count+1 {
		return nil, fmt.Errorf("%s vector: %d offsets for %d rows", v.Type.String(), len(v.Offsets), v.Count)
	}
	start, end := v.Offsets[i], v.Offsets[i+1]
	if start > end || int(end) > len(v.Bytes) {
		return nil, fmt.Errorf("%s vector: row %d spans bytes [%d,%d) of %d", v.Type.String(), i, start, end, len(v.Bytes))
	}
	return v.Bytes[start:end], nil
}

// decodeBit turns DuckDB's BIT layout (padding count, then the bits
// MSB-first with the padding at the front of the first data byte) into '0'
// and '1' characters.
func decodeBit(b []byte) (Bit, error) {
	if len(b) < 2 || b[0] > 7 {
		return "", fmt.Errorf("BIT value % x is malformed", b)
	}
	n := (len(b)-1)*8 - int(b[0])
	out := make([]byte, n)
	for k := range n {
		bit := k + int(b[0])
		out[k] = '0' + b[1+bit/8]>>(7-bit%8)&1
	}
	return Bit(out), nil
}

// decodeBigNum decodes DuckDB's BIGNUM: a 3-byte big-endian header holding
// the byte count with bit 23 set, then the big-endian magnitude; for a
// negative number header and magnitude are bitwise inverted.
func decodeBigNum(b []byte) (*big.Int, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("BIGNUM value of %d bytes is too short", len(b))
	}
	negative := b[0]&0x80 == 0
	mag := b[3:]
	header := uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
	if negative {
		header = ^header & 0xFFFFFF
		mag = make([]byte, len(b)-3)
		for k, c := range b[3:] {
			mag[k] = ^c
		}
	}
	if int(header&0x7FFFFF) != len(mag) {
		return nil, fmt.Errorf("BIGNUM header announces %d bytes, value has %d", header&0x7FFFFF, len(mag))
	}
	n := new(big.Int).SetBytes(mag)
	if negative {
		n.Neg(n)
	}
	return n, nil
}

// listRow returns row i of a LIST ([]any) or MAP ([]MapEntry).
func (v *Vector) listRow(i int) (any, error) {
	if len(v.Entries) < v.Count || len(v.Children) != 1 {
		return nil, fmt.Errorf("%s vector: %d entries and %d children for %d rows", v.Type.String(), len(v.Entries), len(v.Children), v.Count)
	}
	e, child := v.Entries[i], v.Children[0]
	if e.Offset > uint64(child.Count) || e.Length > uint64(child.Count)-e.Offset {
		return nil, fmt.Errorf("%s vector: row %d entry %d+%d beyond its %d child rows", v.Type.String(), i, e.Offset, e.Length, child.Count)
	}
	start, n := int(e.Offset), int(e.Length)
	if v.Type.ID == TypeMap {
		if len(child.Children) != 2 {
			return nil, fmt.Errorf("MAP vector: entry vector has %d children, want key and value", len(child.Children))
		}
		out := make([]MapEntry, n)
		for k := range out {
			if !child.IsValid(start + k) {
				continue
			}
			key, err := child.Children[0].Value(start + k)
			if err != nil {
				return nil, fmt.Errorf("MAP row %d key %d: %w", i, k, err)
			}
			val, err := child.Children[1].Value(start + k)
			if err != nil {
				return nil, fmt.Errorf("MAP row %d value %d: %w", i, k, err)
			}
			out[k] = MapEntry{Key: key, Value: val}
		}
		return out, nil
	}
	return childRows(v, child, start, n, i)
}

// arrayRow returns row i of an ARRAY: child rows [i·n, (i+1)·n).
func (v *Vector) arrayRow(i int) (any, error) {
	if len(v.Children) != 1 {
		return nil, fmt.Errorf("%s vector has %d children, want 1", v.Type.String(), len(v.Children))
	}
	n := int(v.Type.ArraySize)
	child := v.Children[0]
	if child.Count < v.Count*n {
		return nil, fmt.Errorf("%s vector: %d child rows for %d rows", v.Type.String(), child.Count, v.Count)
	}
	return childRows(v, child, i*n, n, i)
}

// childRows collects child rows [start, start+n) as the elements of row i
// of the LIST or ARRAY vector v.
func childRows(v, child *Vector, start, n, i int) ([]any, error) {
	out := make([]any, n)
	for k := range out {
		val, err := child.Value(start + k)
		if err != nil {
			return nil, fmt.Errorf("%s row %d element %d: %w", v.Type.String(), i, k, err)
		}
		out[k] = val
	}
	return out, nil
}

// structRow returns row i of a STRUCT as a Struct.
func (v *Vector) structRow(i int) (any, error) {
	if len(v.Children) != len(v.Type.Fields) {
		return nil, fmt.Errorf("%s vector has %d children for %d fields", v.Type.String(), len(v.Children), len(v.Type.Fields))
	}
	out := make(Struct, len(v.Children))
	for k, child := range v.Children {
		val, err := child.Value(i)
		if err != nil {
			return nil, fmt.Errorf("%s row %d field %q: %w", v.Type.String(), i, v.Type.Fields[k].Name, err)
		}
		out[k] = StructField{Name: v.Type.Fields[k].Name, Value: val}
	}
	return out, nil
}

// unionRow returns row i of a UNION: the tag child names the member, a NULL
// tag makes the whole row NULL.
func (v *Vector) unionRow(i int) (any, error) {
	if len(v.Children) != len(v.Type.Fields) || len(v.Children) < 2 {
		return nil, fmt.Errorf("%s vector has %d children for %d fields", v.Type.String(), len(v.Children), len(v.Type.Fields))
	}
	tag, err := v.Children[0].Value(i)
	if err != nil {
		return nil, fmt.Errorf("UNION row %d tag: %w", i, err)
	}
	if tag == nil {
		return nil, nil
	}
	t, ok := tag.(uint8)
	if !ok || int(t)+1 >= len(v.Children) {
		return nil, fmt.Errorf("UNION row %d: tag %v does not name one of its %d members", i, tag, len(v.Children)-1)
	}
	val, err := v.Children[t+1].Value(i)
	if err != nil {
		return nil, fmt.Errorf("UNION row %d member %q: %w", i, v.Type.Fields[t+1].Name, err)
	}
	return Union{Tag: v.Type.Fields[t+1].Name, Value: val}, nil
}

// valueWidth is the per-row byte size of a fixed-width type in Vector.Data
// (table 6.2), or 0 for the other types.
func valueWidth(t LogicalType) int {
	switch t.ID {
	case TypeBoolean, TypeTinyInt, TypeUTinyInt:
		return 1
	case TypeSmallInt, TypeUSmallInt:
		return 2
	case TypeInteger, TypeUInteger, TypeDate, TypeFloat, TypeSQLNull:
		return 4
	case TypeBigInt, TypeUBigInt, TypeDouble, TypeTime, TypeTimeNS, TypeTimeTZ,
		TypeTimestamp, TypeTimestampS, TypeTimestampMS, TypeTimestampNS, TypeTimestampTZ, TypeTimestampTZNS:
		return 8
	case TypeHugeInt, TypeUHugeInt, TypeUUID, TypeInterval:
		return 16
	case TypeDecimal:
		switch {
		case t.Width <= 4:
			return 2
		case t.Width <= 9:
			return 4
		case t.Width <= 18:
			return 8
		default:
			return 16
		}
	case TypeEnum:
		switch n := len(t.EnumValues); {
		case n <= math.MaxUint8:
			return 1
		case n <= math.MaxUint16:
			return 2
		default:
			return 4
		}
	}
	return 0
}

// appendUUID appends the canonical text of u.
func appendUUID(dst []byte, u UUID) []byte {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:36], u[10:16])
	return append(dst, buf[:]...)
}

// pow10Big returns 10^n; callers must not modify the result.
func pow10Big(n uint8) *big.Int {
	if int(n) < len(pow10Table) {
		return pow10Table[n]
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// pow10Table caches the powers of ten up to DECIMAL's maximum width.
var pow10Table = func() (t [39]*big.Int) {
	t[0] = big.NewInt(1)
	for k := 1; k < len(t); k++ {
		t[k] = new(big.Int).Mul(t[k-1], big.NewInt(10))
	}
	return t
}()
