package wire

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// NewVector builds a flat Vector of type t with one row per value. It
// accepts the Go values Vector.Value returns (nil is NULL) and these
// conveniences:
//
//   - integer types, HUGEINT, UHUGEINT, BIGNUM: any Go integer, an
//     integral float, *big.Int, Hugeint or a decimal string;
//   - FLOAT, DOUBLE: any Go integer or float;
//   - DECIMAL: Decimal (of any scale), any Go integer, float, *big.Int or a
//     numeric string, rounded half away from zero to the type's scale;
//   - VARCHAR: string or []byte (valid UTF-8); BLOB: []byte or string;
//     BIT: Bit or a string of '0' and '1';
//   - DATE: a time.Time, whose calendar date in its own location is used;
//     TIMESTAMP types: a time.Time, whose instant is stored (as UTC);
//     both also take an Infinity;
//   - INTERVAL: Interval or time.Duration;
//   - UUID: UUID, [16]byte or its text form;
//   - ENUM: one of the dictionary strings;
//   - LIST, ARRAY: []any or any Go slice or array;
//   - STRUCT: Struct (fields in type order), []any in field order, or
//     map[string]any (missing fields are NULL);
//   - MAP: []MapEntry; UNION: Union.
//
// The validity mask is only built when some row is NULL; NULL rows get
// DuckDB's placeholder bytes so chunks match DuckDB's own byte for byte.
// A value of the wrong Go type or out of the type's range is an error that
// names the column type and row.
func NewVector(t LogicalType, values []any) (*Vector, error) {
	b, err := newVectorBuilder(t, len(values))
	if err != nil {
		return nil, err
	}
	for i, x := range values {
		if err := b.append(x); err != nil {
			return nil, fmt.Errorf("column of type %s, row %d: %w", t.String(), i, err)
		}
	}
	return b.finish(), nil
}

// ChunkFromRows builds a DataChunk with one column per type from rows of
// values, each row holding one value per column in the forms NewVector
// accepts.
func ChunkFromRows(types []LogicalType, rows [][]any) (*DataChunk, error) {
	builders := make([]*vectorBuilder, len(types))
	for c, t := range types {
		b, err := newVectorBuilder(t, len(rows))
		if err != nil {
			return nil, fmt.Errorf("column %d: %w", c, err)
		}
		builders[c] = b
	}
	for r, row := range rows {
		if len(row) != len(types) {
			return nil, fmt.Errorf("row %d has %d values for %d columns", r, len(row), len(types))
		}
		for c, x := range row {
			if err := builders[c].append(x); err != nil {
				return nil, fmt.Errorf("row %d, column %d of type %s: %w", r, c, (types[c]).String(), err)
			}
		}
	}
	chunk := &DataChunk{Rows: len(rows), Columns: make([]*Vector, len(types))}
	for c, b := range builders {
		chunk.Columns[c] = b.finish()
	}
	return chunk, nil
}

// vectorBuilder accumulates the rows of one Vector (and, for nested types,
// of its children).
type vectorBuilder struct {
	vec       *Vector
	width     int // bytes per row of a fixed-width type, else 0
	children  []*vectorBuilder
	enumIndex map[string]uint32
}

func newVectorBuilder(t LogicalType, capacity int) (*vectorBuilder, error) {
	b := &vectorBuilder{vec: &Vector{Type: t}}
	switch t.ID {
	case TypeVarchar, TypeChar, TypeBlob, TypeBit, TypeBigNum, TypeGeometry:
		b.vec.Offsets = make([]uint32, 1, capacity+1)
		if t.ID == TypeGeometry {
			b.vec.GeometryFormat = 1 // WKB
		}
		return b, nil
	case TypeList, TypeMap, TypeArray:
		if t.Child == nil {
			return nil, fmt.Errorf("%s type without an element type", t.String())
		}
		if t.ID == TypeMap && (t.Child.ID != TypeStruct || len(t.Child.Fields) != 2) {
			return nil, fmt.Errorf("MAP type whose entry type is not STRUCT(key, value)")
		}
		childCap := capacity
		if t.ID == TypeArray {
			childCap = capacity * int(t.ArraySize)
		} else {
			b.vec.Entries = make([]ListEntry, 0, capacity)
		}
		child, err := newVectorBuilder(*t.Child, childCap)
		if err != nil {
			return nil, fmt.Errorf("%s element: %w", t.String(), err)
		}
		b.children = []*vectorBuilder{child}
		return b, nil
	case TypeStruct, TypeTuple, TypeUnion:
		if t.ID == TypeUnion && (len(t.Fields) < 2 || t.Fields[0].Type.ID != TypeUTinyInt) {
			return nil, fmt.Errorf("UNION type without a UTINYINT tag field and members")
		}
		for _, f := range t.Fields {
			child, err := newVectorBuilder(f.Type, capacity)
			if err != nil {
				return nil, fmt.Errorf("%s field %q: %w", t.String(), f.Name, err)
			}
			b.children = append(b.children, child)
		}
		return b, nil
	case TypeEnum:
		b.enumIndex = make(map[string]uint32, len(t.EnumValues))
		for k, s := range t.EnumValues {
			b.enumIndex[s] = uint32(k)
		}
	case TypeDecimal:
		if t.Width == 0 || t.Width > 38 || t.Scale > t.Width {
			return nil, fmt.Errorf("invalid type %s", t.String())
		}
	}
	w := valueWidth(t)
	if w == 0 {
		return nil, fmt.Errorf("cannot build %s vectors", t.String())
	}
	b.width = w
	b.vec.Data = make([]byte, 0, capacity*w)
	return b, nil
}

// finish completes the vector: the validity mask is padded to whole 64-bit
// words with the bits past Count set, as DuckDB writes it.
func (b *vectorBuilder) finish() *Vector {
	v := b.vec
	if v.Validity != nil {
		words := (v.Count + 63) / 64
		for len(v.Validity) < 8*words {
			v.Validity = append(v.Validity, 0xFF)
		}
	}
	for _, c := range b.children {
		v.Children = append(v.Children, c.finish())
	}
	if v.Type.ID == TypeList || v.Type.ID == TypeMap {
		v.ListSize = uint64(v.Children[0].Count)
	}
	return v
}

// setNull marks the row being appended as NULL, creating the mask (all
// earlier rows valid) on the first NULL.
func (b *vectorBuilder) setNull() {
	row := b.vec.Count
	for len(b.vec.Validity) <= row/8 {
		b.vec.Validity = append(b.vec.Validity, 0xFF)
	}
	b.vec.Validity[row/8] &^= 1 << (row % 8)
}

// append adds one row.
func (b *vectorBuilder) append(x any) error {
	var err error
	if x == nil {
		b.setNull()
		err = b.appendNull()
	} else {
		err = b.appendValue(x)
	}
	if err != nil {
		return err
	}
	b.vec.Count++
	return nil
}

// appendNull fills a NULL row's slot: placeholder bytes, an empty string,
// a 0/0 list entry, or NULL children.
func (b *vectorBuilder) appendNull() error {
	v := b.vec
	switch {
	case b.width > 0:
		v.Data = appendPlaceholder(v.Data, v.Type, b.width)
	case v.Offsets != nil:
		v.Offsets = append(v.Offsets, v.Offsets[len(v.Offsets)-1])
	case v.Type.ID == TypeList || v.Type.ID == TypeMap:
		v.Entries = append(v.Entries, ListEntry{})
	case v.Type.ID == TypeArray:
		for range v.Type.ArraySize {
			if err := b.children[0].append(nil); err != nil {
				return err
			}
		}
	default:
		for _, c := range b.children {
			if err := c.append(nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendPlaceholder writes the bytes DuckDB leaves in a NULL row of a
// fixed-width type: the signed minimum, zero for unsigned types, a quiet
// NaN for floats, 0x80 for BOOLEAN.
func appendPlaceholder(dst []byte, t LogicalType, width int) []byte {
	le := binary.LittleEndian
	switch t.ID {
	case TypeUTinyInt, TypeUSmallInt, TypeUInteger, TypeUBigInt, TypeUHugeInt, TypeEnum:
		return append(dst, make([]byte, width)...)
	case TypeFloat:
		return le.AppendUint32(dst, 0x7FC00000)
	case TypeDouble:
		return le.AppendUint64(dst, 0x7FF8000000000000)
	case TypeInterval:
		dst = le.AppendUint32(dst, 1<<31)
		dst = le.AppendUint32(dst, 1<<31)
		return le.AppendUint64(dst, 1<<63)
	}
	dst = append(dst, make([]byte, width-1)...)
	return append(dst, 0x80)
}

// appendValue adds a non-NULL row.
func (b *vectorBuilder) appendValue(x any) error {
	v := b.vec
	if b.width > 0 {
		data, err := appendFixed(v.Data, v.Type, b.width, b.enumIndex, x)
		if err != nil {
			return err
		}
		v.Data = data
		return nil
	}
	if b.vec.Offsets != nil {
		return b.appendString(x)
	}
	switch v.Type.ID {
	case TypeList:
		elems, err := sliceElems(x)
		if err != nil {
			return err
		}
		return b.appendListEntry(elems)
	case TypeMap:
		entries, ok := x.([]MapEntry)
		if !ok {
			return fmt.Errorf("cannot use %T as MAP (want []MapEntry)", x)
		}
		keyName, valueName := v.Type.Child.Fields[0].Name, v.Type.Child.Fields[1].Name
		elems := make([]any, len(entries))
		for k, e := range entries {
			if e.Key == nil {
				return fmt.Errorf("MAP entry %d has a NULL key", k)
			}
			elems[k] = Struct{{keyName, e.Key}, {valueName, e.Value}}
		}
		return b.appendListEntry(elems)
	case TypeArray:
		elems, err := sliceElems(x)
		if err != nil {
			return err
		}
		if len(elems) != int(v.Type.ArraySize) {
			return fmt.Errorf("%d elements for %s", len(elems), v.Type.String())
		}
		for k, e := range elems {
			if err := b.children[0].append(e); err != nil {
				return fmt.Errorf("element %d: %w", k, err)
			}
		}
		return nil
	case TypeStruct, TypeTuple:
		return b.appendStruct(x)
	case TypeUnion:
		return b.appendUnion(x)
	}
	return fmt.Errorf("cannot build %s values", v.Type.String())
}

// appendListEntry adds a LIST or MAP row whose elements go to the child.
func (b *vectorBuilder) appendListEntry(elems []any) error {
	child := b.children[0]
	offset := uint64(child.vec.Count)
	for k, e := range elems {
		if err := child.append(e); err != nil {
			return fmt.Errorf("element %d: %w", k, err)
		}
	}
	b.vec.Entries = append(b.vec.Entries, ListEntry{Offset: offset, Length: uint64(len(elems))})
	return nil
}

// sliceElems returns the elements of a []any or of any other Go slice or
// array.
func sliceElems(x any) ([]any, error) {
	if elems, ok := x.([]any); ok {
		return elems, nil
	}
	rv := reflect.ValueOf(x)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("cannot use %T as a list (want a slice)", x)
	}
	elems := make([]any, rv.Len())
	for k := range elems {
		elems[k] = rv.Index(k).Interface()
	}
	return elems, nil
}

// appendStruct adds a STRUCT row from a Struct, a []any in field order or a
// map[string]any.
func (b *vectorBuilder) appendStruct(x any) error {
	fields := b.vec.Type.Fields
	values := make([]any, len(fields))
	switch s := x.(type) {
	case Struct:
		if len(s) != len(fields) {
			return fmt.Errorf("%d fields for %s with %d", len(s), b.vec.Type.String(), len(fields))
		}
		for k, f := range s {
			if f.Name != fields[k].Name {
				return fmt.Errorf("field %d is %q, want %q", k, f.Name, fields[k].Name)
			}
			values[k] = f.Value
		}
	case []any:
		if len(s) != len(fields) {
			return fmt.Errorf("%d values for %s with %d fields", len(s), b.vec.Type.String(), len(fields))
		}
		copy(values, s)
	case map[string]any:
		used := 0
		for k, f := range fields {
			if val, ok := s[f.Name]; ok {
				values[k] = val
				used++
			}
		}
		if used != len(s) {
			return fmt.Errorf("map has keys that are not fields of %s", b.vec.Type.String())
		}
	default:
		return fmt.Errorf("cannot use %T as STRUCT (want Struct, []any or map[string]any)", x)
	}
	for k, c := range b.children {
		if err := c.append(values[k]); err != nil {
			return fmt.Errorf("field %q: %w", fields[k].Name, err)
		}
	}
	return nil
}

// appendUnion adds a UNION row: the tag, the active member's value and NULL
// in every other member.
func (b *vectorBuilder) appendUnion(x any) error {
	u, ok := x.(Union)
	if !ok {
		return fmt.Errorf("cannot use %T as UNION (want Union)", x)
	}
	fields := b.vec.Type.Fields
	member := -1
	for k := 1; k < len(fields); k++ {
		if fields[k].Name == u.Tag {
			member = k
			break
		}
	}
	if member < 0 {
		return fmt.Errorf("%s has no member %q", b.vec.Type.String(), u.Tag)
	}
	for k, c := range b.children {
		var val any
		switch k {
		case 0:
			val = uint8(member - 1)
		case member:
			val = u.Value
		}
		if err := c.append(val); err != nil {
			return fmt.Errorf("member %q: %w", u.Tag, err)
		}
	}
	return nil
}

// appendString adds a row of a string-like type.
func (b *vectorBuilder) appendString(x any) error {
	v := b.vec
	var err error
	switch v.Type.ID {
	case TypeVarchar, TypeChar:
		switch s := x.(type) {
		case string:
			if !utf8.ValidString(s) {
				return fmt.Errorf("string is not valid UTF-8")
			}
			v.Bytes = append(v.Bytes, s...)
		case []byte:
			if !utf8.Valid(s) {
				return fmt.Errorf("string is not valid UTF-8")
			}
			v.Bytes = append(v.Bytes, s...)
		default:
			return typeError(v.Type, x)
		}
	case TypeBlob, TypeGeometry:
		switch s := x.(type) {
		case []byte:
			v.Bytes = append(v.Bytes, s...)
		case string:
			v.Bytes = append(v.Bytes, s...)
		default:
			return typeError(v.Type, x)
		}
	case TypeBit:
		switch s := x.(type) {
		case Bit:
			v.Bytes, err = appendBit(v.Bytes, string(s))
		case string:
			v.Bytes, err = appendBit(v.Bytes, s)
		default:
			return typeError(v.Type, x)
		}
	case TypeBigNum:
		var n *big.Int
		if n, err = bigOf(x); err == nil {
			v.Bytes = appendBigNum(v.Bytes, n)
		}
	}
	if err != nil {
		return err
	}
	if len(v.Bytes) > math.MaxUint32 {
		return fmt.Errorf("string data exceeds 4 GiB")
	}
	v.Offsets = append(v.Offsets, uint32(len(v.Bytes)))
	return nil
}

// appendBit encodes a '0'/'1' string in DuckDB's BIT layout.
func appendBit(dst []byte, s string) ([]byte, error) {
	if s == "" {
		return dst, fmt.Errorf("BIT value must have at least one bit")
	}
	padding := (8 - len(s)%8) % 8
	dst = append(dst, byte(padding))
	start := len(dst)
	dst = append(dst, make([]byte, (padding+len(s))/8)...)
	for k := range padding {
		dst[start] |= 0x80 >> k
	}
	for k := 0; k < len(s); k++ {
		switch s[k] {
		case '1':
			bit := padding + k
			dst[start+bit/8] |= 0x80 >> (bit % 8)
		case '0':
		default:
			return dst, fmt.Errorf("BIT value %q has a character other than 0 and 1", s)
		}
	}
	return dst, nil
}

// appendBigNum encodes n in DuckDB's BIGNUM layout (see decodeBigNum).
func appendBigNum(dst []byte, n *big.Int) []byte {
	mag := n.Bytes()
	if len(mag) == 0 {
		mag = []byte{0}
	}
	header := uint32(len(mag)) | 0x800000
	negative := n.Sign() < 0
	if negative {
		header = ^header
	}
	dst = append(dst, byte(header>>16), byte(header>>8), byte(header))
	for _, c := range mag {
		if negative {
			c = ^c
		}
		dst = append(dst, c)
	}
	return dst
}

func typeError(t LogicalType, x any) error {
	return fmt.Errorf("cannot use %T as %s", x, t.String())
}

func outOfRange(x any) error {
	return fmt.Errorf("value %v out of range", x)
}

// appendFixed encodes one non-NULL value of a fixed-width type.
func appendFixed(dst []byte, t LogicalType, width int, enumIndex map[string]uint32, x any) ([]byte, error) {
	le := binary.LittleEndian
	switch t.ID {
	case TypeBoolean:
		v, ok := x.(bool)
		if !ok {
			return dst, typeError(t, x)
		}
		if v {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case TypeTinyInt, TypeSmallInt, TypeInteger, TypeBigInt:
		bits := uint(8 * width)
		n, err := intIn(x, -1<<(bits-1), 1<<(bits-1)-1)
		if err != nil {
			return dst, err
		}
		return appendLE(dst, uint64(n), width), nil
	case TypeUTinyInt, TypeUSmallInt, TypeUInteger, TypeUBigInt:
		n, err := uintIn(x, math.MaxUint64>>(64-8*width))
		if err != nil {
			return dst, err
		}
		return appendLE(dst, n, width), nil
	case TypeHugeInt, TypeUHugeInt:
		n, err := bigOf(x)
		if err != nil {
			return dst, err
		}
		if t.ID == TypeHugeInt && n.BitLen() > 127 && !(n.Sign() < 0 && n.Cmp(minInt128) == 0) ||
			t.ID == TypeUHugeInt && (n.Sign() < 0 || n.BitLen() > 128) {
			return dst, outOfRange(x)
		}
		return appendInt128(dst, n), nil
	case TypeFloat:
		f, err := floatOf(x)
		if err != nil {
			return dst, err
		}
		if math.Abs(f) > math.MaxFloat32 && !math.IsInf(f, 0) {
			return dst, outOfRange(x)
		}
		return le.AppendUint32(dst, math.Float32bits(float32(f))), nil
	case TypeDouble:
		f, err := floatOf(x)
		if err != nil {
			return dst, err
		}
		return le.AppendUint64(dst, math.Float64bits(f)), nil
	case TypeDecimal:
		n, err := decimalOf(x, t.Width, t.Scale)
		if err != nil {
			return dst, err
		}
		if width == 16 {
			return appendInt128(dst, n), nil
		}
		return appendLE(dst, uint64(n.Int64()), width), nil
	case TypeDate:
		switch v := x.(type) {
		case Infinity:
			return le.AppendUint32(dst, uint32(int32(v)*dateInfinity)), nil
		case time.Time:
			y, m, d := v.Date()
			days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
			if days <= -dateInfinity || days >= dateInfinity {
				return dst, outOfRange(x)
			}
			return le.AppendUint32(dst, uint32(int32(days))), nil
		}
		return dst, typeError(t, x)
	case TypeTimestamp, TypeTimestampTZ, TypeTimestampS, TypeTimestampMS, TypeTimestampNS, TypeTimestampTZNS:
		n, err := timestampOf(t, x)
		if err != nil {
			return dst, err
		}
		return le.AppendUint64(dst, uint64(n)), nil
	case TypeTime, TypeTimeNS:
		d, ok := x.(time.Duration)
		if !ok {
			return dst, typeError(t, x)
		}
		if d < 0 || d > 24*time.Hour {
			return dst, fmt.Errorf("time of day %v out of range 0..24h", d)
		}
		if t.ID == TypeTime {
			return le.AppendUint64(dst, uint64(d/time.Microsecond)), nil
		}
		return le.AppendUint64(dst, uint64(d)), nil
	case TypeTimeTZ:
		v, ok := x.(TimeTZ)
		if !ok {
			return dst, typeError(t, x)
		}
		if v.Micros < 0 || v.Micros > 24*3600e6 || v.OffsetSeconds < -timeTZMaxOffset || v.OffsetSeconds > timeTZMaxOffset {
			return dst, outOfRange(x)
		}
		return le.AppendUint64(dst, uint64(v.Micros)<<24|uint64(timeTZMaxOffset-v.OffsetSeconds)), nil
	case TypeInterval:
		var v Interval
		switch iv := x.(type) {
		case Interval:
			v = iv
		case time.Duration:
			v.Micros = iv.Microseconds()
		default:
			return dst, typeError(t, x)
		}
		dst = le.AppendUint32(dst, uint32(v.Months))
		dst = le.AppendUint32(dst, uint32(v.Days))
		return le.AppendUint64(dst, uint64(v.Micros)), nil
	case TypeUUID:
		u, err := uuidOf(x)
		if err != nil {
			return dst, err
		}
		dst = le.AppendUint64(dst, binary.BigEndian.Uint64(u[8:]))
		return le.AppendUint64(dst, binary.BigEndian.Uint64(u[:8])^(1<<63)), nil
	case TypeEnum:
		s, ok := x.(string)
		if !ok {
			return dst, typeError(t, x)
		}
		idx, ok := enumIndex[s]
		if !ok {
			return dst, fmt.Errorf("%q is not a value of the ENUM", s)
		}
		return appendLE(dst, uint64(idx), width), nil
	case TypeSQLNull:
		return dst, fmt.Errorf("a NULL-typed column holds only NULL, not %T", x)
	}
	return dst, fmt.Errorf("cannot build %s values", t.String())
}

// appendLE appends the low width bytes of n, little-endian.
func appendLE(dst []byte, n uint64, width int) []byte {
	for k := range width {
		dst = append(dst, byte(n>>(8*k)))
	}
	return dst
}

var (
	minInt128 = new(big.Int).Lsh(big.NewInt(-1), 127)
	mask64    = new(big.Int).SetUint64(math.MaxUint64)
)

// appendInt128 appends n (which fits 128 bits, signed or unsigned) as lower
// then upper 64 bits, little-endian, in two's complement.
func appendInt128(dst []byte, n *big.Int) []byte {
	le := binary.LittleEndian
	if n.IsInt64() {
		v := n.Int64()
		return le.AppendUint64(le.AppendUint64(dst, uint64(v)), uint64(v>>63))
	}
	lower := new(big.Int).And(n, mask64).Uint64() // And works on two's complement
	upper := new(big.Int).Rsh(n, 64)              // arithmetic shift for negatives
	upperBits := upper.Uint64()
	if upper.Sign() < 0 {
		upperBits = uint64(upper.Int64())
	}
	return le.AppendUint64(le.AppendUint64(dst, lower), upperBits)
}

// intIn converts x to an int64 in [lo, hi].
func intIn(x any, lo, hi int64) (int64, error) {
	var n int64
	switch v := x.(type) {
	case int:
		n = int64(v)
	case int64:
		n = v
	case int32:
		n = int64(v)
	case int16:
		n = int64(v)
	case int8:
		n = int64(v)
	default:
		b, err := bigOf(x)
		if err != nil {
			return 0, err
		}
		if !b.IsInt64() {
			return 0, outOfRange(x)
		}
		n = b.Int64()
	}
	if n < lo || n > hi {
		return 0, outOfRange(x)
	}
	return n, nil
}

// uintIn converts x to a uint64 in [0, hi].
func uintIn(x any, hi uint64) (uint64, error) {
	var n uint64
	switch v := x.(type) {
	case uint64:
		n = v
	case uint32:
		n = uint64(v)
	case uint16:
		n = uint64(v)
	case uint8:
		n = uint64(v)
	case uint:
		n = uint64(v)
	default:
		b, err := bigOf(x)
		if err != nil {
			return 0, err
		}
		if !b.IsUint64() {
			return 0, outOfRange(x)
		}
		n = b.Uint64()
	}
	if n > hi {
		return 0, outOfRange(x)
	}
	return n, nil
}

// bigOf converts an integer-valued x to a *big.Int: Go integers, integral
// floats, *big.Int, Hugeint and base-10 strings.
func bigOf(x any) (*big.Int, error) {
	switch v := x.(type) {
	case int:
		return big.NewInt(int64(v)), nil
	case int8:
		return big.NewInt(int64(v)), nil
	case int16:
		return big.NewInt(int64(v)), nil
	case int32:
		return big.NewInt(int64(v)), nil
	case int64:
		return big.NewInt(v), nil
	case uint:
		return new(big.Int).SetUint64(uint64(v)), nil
	case uint8:
		return big.NewInt(int64(v)), nil
	case uint16:
		return big.NewInt(int64(v)), nil
	case uint32:
		return big.NewInt(int64(v)), nil
	case uint64:
		return new(big.Int).SetUint64(v), nil
	case float32:
		return bigOfFloat(x, float64(v))
	case float64:
		return bigOfFloat(x, v)
	case *big.Int:
		if v == nil {
			return nil, fmt.Errorf("nil *big.Int")
		}
		return v, nil
	case Hugeint:
		return int128ToBig(v.Upper, v.Lower), nil
	case string:
		n, ok := new(big.Int).SetString(v, 10)
		if !ok {
			return nil, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	}
	return nil, fmt.Errorf("cannot use %T as an integer", x)
}

func bigOfFloat(x any, f float64) (*big.Int, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, outOfRange(x)
	}
	if f != math.Trunc(f) {
		return nil, fmt.Errorf("value %v is not an integer", x)
	}
	n, _ := big.NewFloat(f).Int(nil)
	return n, nil
}

// floatOf converts any Go integer or float to a float64.
func floatOf(x any) (float64, error) {
	switch v := x.(type) {
	case float64:
		return v, nil
	case float32:
		return float64(v), nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return reflect.ValueOf(v).Convert(reflect.TypeFor[float64]()).Float(), nil
	}
	return 0, fmt.Errorf("cannot use %T as a floating-point number", x)
}

// decimalOf converts x to the unscaled integer of a DECIMAL(width, scale),
// rounding half away from zero, and checks that it has at most width
// digits.
func decimalOf(x any, width, scale uint8) (*big.Int, error) {
	var r *big.Rat
	switch v := x.(type) {
	case Decimal:
		if v.Value == nil {
			return nil, fmt.Errorf("Decimal with a nil Value")
		}
		if v.Scale == scale {
			if err := checkDecimalWidth(v.Value, width); err != nil {
				return nil, outOfRange(x)
			}
			return v.Value, nil
		}
		r = new(big.Rat).SetFrac(v.Value, pow10Big(v.Scale))
	case float32, float64:
		f, _ := floatOf(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, outOfRange(x)
		}
		r = new(big.Rat).SetFloat64(f)
	case string:
		var ok bool
		if r, ok = new(big.Rat).SetString(strings.TrimSpace(v)); !ok {
			return nil, fmt.Errorf("%q is not a number", v)
		}
	default:
		n, err := bigOf(x)
		if err != nil {
			return nil, err
		}
		r = new(big.Rat).SetInt(n)
	}
	r.Mul(r, new(big.Rat).SetInt(pow10Big(scale)))
	n, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() != 0 && new(big.Int).Lsh(rem.Abs(rem), 1).Cmp(r.Denom()) >= 0 {
		if r.Sign() < 0 {
			n.Sub(n, big.NewInt(1))
		} else {
			n.Add(n, big.NewInt(1))
		}
	}
	if err := checkDecimalWidth(n, width); err != nil {
		return nil, outOfRange(x)
	}
	return n, nil
}

// checkDecimalWidth fails when n has more than width digits.
func checkDecimalWidth(n *big.Int, width uint8) error {
	if new(big.Int).Abs(n).Cmp(pow10Big(width)) >= 0 {
		return fmt.Errorf("more than %d digits", width)
	}
	return nil
}

// timestampOf converts a time.Time or Infinity to units since the epoch
// for the TIMESTAMP type t.
func timestampOf(t LogicalType, x any) (int64, error) {
	switch v := x.(type) {
	case Infinity:
		return int64(v) * timestampInfinity, nil
	case time.Time:
		perSecond := int64(1e6)
		switch t.ID {
		case TypeTimestampS:
			perSecond = 1
		case TypeTimestampMS:
			perSecond = 1e3
		case TypeTimestampNS, TypeTimestampTZNS:
			perSecond = 1e9
		}
		secs := v.Unix()
		if secs >= math.MaxInt64/perSecond || secs <= math.MinInt64/perSecond {
			return 0, outOfRange(x)
		}
		return secs*perSecond + int64(v.Nanosecond())/(1e9/perSecond), nil
	}
	return 0, typeError(t, x)
}

// uuidOf converts a UUID, [16]byte or UUID text (with or without hyphens
// and braces) to a UUID.
func uuidOf(x any) (UUID, error) {
	switch v := x.(type) {
	case UUID:
		return v, nil
	case [16]byte:
		return UUID(v), nil
	case string:
		s := strings.TrimSuffix(strings.TrimPrefix(v, "{"), "}")
		s = strings.ReplaceAll(s, "-", "")
		var u UUID
		if len(s) != 32 {
			return u, fmt.Errorf("%q is not a UUID", v)
		}
		if _, err := hex.Decode(u[:], []byte(s)); err != nil {
			return u, fmt.Errorf("%q is not a UUID", v)
		}
		return u, nil
	}
	return UUID{}, fmt.Errorf("cannot use %T as UUID", x)
}
