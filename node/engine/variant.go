package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/wire"
)

// variantType returns DuckDB's VARIANT type for t, which must have
// VARIANT's internal fields. duckdb_create_logical_type(DUCKDB_TYPE_VARIANT)
// makes a bare LogicalTypeId::VARIANT without the struct type info that
// LogicalType::VARIANT() carries, and duckdb_create_data_chunk crashes on
// it; a statement DuckDB binds has the full type. The caller destroys it.
func variantType(conn bindings.Connection, t wire.LogicalType) (bindings.LogicalType, error) {
	want := wire.LogicalType{ID: wire.TypeVariant, Fields: variantFields}
	if !sameType(&t, &want) {
		return bindings.LogicalType{}, errors.New("VARIANT with fields other than DuckDB's keys, children, values, data")
	}
	var stmt bindings.PreparedStatement
	defer bindings.DestroyPrepare(&stmt)
	if bindings.Prepare(conn, "SELECT NULL::VARIANT", &stmt) == bindings.StateError {
		return bindings.LogicalType{}, fmt.Errorf("VARIANT type: %s", bindings.PrepareError(stmt))
	}
	lt := bindings.PreparedStatementColumnLogicalType(stmt, 0)
	if bindings.GetTypeId(lt) != bindings.TypeVariant || bindings.StructTypeChildCount(lt) != bindings.IdxT(len(variantFields)) {
		bindings.DestroyLogicalType(&lt)
		return bindings.LogicalType{}, errors.New("DuckDB's VARIANT type has an unexpected layout")
	}
	return lt, nil
}

// VARIANT value type ids (DuckDB's VariantLogicalType).
const (
	variantNull = iota
	variantTrue
	variantFalse
	variantInt8
	variantInt16
	variantInt32
	variantInt64
	variantInt128
	variantUint8
	variantUint16
	variantUint32
	variantUint64
	variantUint128
	variantFloat
	variantDouble
	variantDecimal
	variantVarchar
	variantBlob
	variantUUID
	variantDate
	variantTimeMicros
	variantTimeNanos
	variantTimestampSec
	variantTimestampMillis
	variantTimestampMicros
	variantTimestampNanos
	variantTimeMicrosTZ
	variantTimestampMicrosTZ
	variantInterval
	variantObject
	variantArray
	variantBignum
	variantBitstring
	variantGeometry
	variantTimestampNanosTZ
	variantTypeCount
)

// variantFixedSize is the payload size of the fixed-width value types; -1
// marks those with a variable payload.
var variantFixedSize = [variantTypeCount]int{
	variantNull: 0, variantTrue: 0, variantFalse: 0,
	variantInt8: 1, variantUint8: 1,
	variantInt16: 2, variantUint16: 2,
	variantInt32: 4, variantUint32: 4, variantFloat: 4, variantDate: 4,
	variantInt64: 8, variantUint64: 8, variantDouble: 8, variantTimeMicros: 8, variantTimeNanos: 8,
	variantTimeMicrosTZ: 8, variantTimestampSec: 8, variantTimestampMillis: 8, variantTimestampMicros: 8,
	variantTimestampNanos: 8, variantTimestampMicrosTZ: 8, variantTimestampNanosTZ: 8,
	variantInt128: 16, variantUint128: 16, variantUUID: 16, variantInterval: 16,
	variantDecimal: -1, variantVarchar: -1, variantBlob: -1, variantBignum: -1, variantBitstring: -1,
	variantGeometry: -1, variantObject: -1, variantArray: -1,
}

// variantTimes are the column types of the value types whose payload
// checkTime checks; 0 (INVALID) for the others.
var variantTimes = [variantTypeCount]wire.TypeID{
	variantTimeMicros: wire.TypeTime, variantTimeNanos: wire.TypeTimeNS, variantTimeMicrosTZ: wire.TypeTimeTZ,
	variantTimestampSec: wire.TypeTimestampS, variantTimestampMillis: wire.TypeTimestampMS,
}

// maxVariantDepth bounds the nesting of one VARIANT value: DuckDB walks
// values recursively, and a client could otherwise send a chain deep
// enough to overflow its stack.
const maxVariantDepth = 1000

// checkVariant checks rows [from, from+n) of a VARIANT vector before they
// are copied into DuckDB. DuckDB trusts a VARIANT's internal indexes and
// offsets and reads outside its buffers on a malformed one, so every row is
// held to the invariants DuckDB's own debug check (VariantUtils::Verify)
// asserts, plus what it leaves out: each value's payload lies inside the
// row's data, VARCHAR payloads are UTF-8, BIT, BIGNUM and GEOMETRY payloads
// are well formed (a malformed GEOMETRY makes DuckDB invalidate the whole
// database when it reads one), and the values form a tree of
// bounded depth under value 0 (no value is the child of two parents, so a
// walk from the root ends).
func checkVariant(v *wire.Vector, from, n int) error {
	if len(v.Children) != len(variantFields) {
		return fmt.Errorf("VARIANT with %d children", len(v.Children))
	}
	for i, c := range v.Children {
		if c == nil || !sameType(&c.Type, &variantFields[i].Type) {
			return fmt.Errorf("VARIANT field %q is missing or of another type", variantFields[i].Name)
		}
	}
	keys, children, values, data := v.Children[0], v.Children[1], v.Children[2], v.Children[3]
	for _, l := range []*wire.Vector{keys, children, values} {
		if len(l.Children) != 1 || l.Children[0] == nil {
			return errors.New("VARIANT list without its child vector")
		}
	}
	keyStrings := keys.Children[0]
	childFields, valueFields := children.Children[0].Children, values.Children[0].Children
	if len(childFields) != 2 || len(valueFields) != 2 {
		return errors.New("VARIANT struct without its fields")
	}
	keysIndex, valuesIndex := childFields[0], childFields[1]
	typeIDs, byteOffsets := valueFields[0], valueFields[1]

	var parents []uint8 // per value of a row: 0 none yet, 1 a parent seen
	var depth []uint16
	for row := from; row < from+n; row++ {
		valid, err := validAt(v, row)
		if err != nil {
			return err
		}
		if !valid {
			continue
		}
		k, err := listAt(keys, row)
		if err != nil {
			return fmt.Errorf("row %d: keys: %w", row, err)
		}
		c, err := listAt(children, row)
		if err != nil {
			return fmt.Errorf("row %d: children: %w", row, err)
		}
		vals, err := listAt(values, row)
		if err != nil {
			return fmt.Errorf("row %d: values: %w", row, err)
		}
		blob, err := blobAt(data, row)
		if err != nil {
			return fmt.Errorf("row %d: data: %w", row, err)
		}
		for i := range k.Length {
			ok, err := validAt(keyStrings, int(k.Offset+i))
			if err != nil {
				return fmt.Errorf("row %d: keys: %w", row, err)
			}
			if !ok {
				return fmt.Errorf("row %d: VARIANT key %d is NULL", row, i)
			}
		}
		if vals.Length == 0 {
			return fmt.Errorf("row %d: VARIANT without values", row)
		}
		if len(typeIDs.Data) < int(vals.Offset+vals.Length) || len(byteOffsets.Data) < 4*int(vals.Offset+vals.Length) {
			return fmt.Errorf("row %d: VARIANT values beyond their data", row)
		}
		if len(keysIndex.Data) < 4*int(c.Offset+c.Length) || len(valuesIndex.Data) < 4*int(c.Offset+c.Length) {
			return fmt.Errorf("row %d: VARIANT children beyond their data", row)
		}
		parents = append(parents[:0], make([]uint8, vals.Length)...)
		depth = append(depth[:0], make([]uint16, vals.Length)...)
		r := variantRow{
			row: row, blob: blob, keys: k.Length, children: c, values: vals,
			typeIDs: typeIDs.Data, byteOffsets: byteOffsets.Data,
			keysIndex: keysIndex, valuesIndex: valuesIndex.Data,
		}
		if typeIDs.Data[vals.Offset] == variantNull {
			return fmt.Errorf("row %d: VARIANT whose root is a VARIANT NULL (DuckDB makes the row NULL instead)", row)
		}
		for i := range vals.Length {
			if err := r.checkValue(i, parents); err != nil {
				return fmt.Errorf("row %d: VARIANT value %d: %w", row, i, err)
			}
		}
		if parents[0] != 0 {
			return fmt.Errorf("row %d: VARIANT root is the child of another value", row)
		}
		if err := r.checkDepth(depth); err != nil {
			return fmt.Errorf("row %d: %w", row, err)
		}
	}
	return nil
}

// variantRow is one valid VARIANT row under check: its lists as ranges of
// the child vectors and its data.
type variantRow struct {
	row                  int
	blob                 []byte
	keys                 uint64
	children, values     wire.ListEntry
	typeIDs, byteOffsets []byte
	keysIndex            *wire.Vector
	valuesIndex          []byte
}

func (r *variantRow) typeID(i uint64) uint8 { return r.typeIDs[r.values.Offset+i] }

func (r *variantRow) byteOffset(i uint64) uint64 {
	return uint64(binary.LittleEndian.Uint32(r.byteOffsets[4*(r.values.Offset+i):]))
}

func (r *variantRow) childValue(j uint64) uint64 {
	return uint64(binary.LittleEndian.Uint32(r.valuesIndex[4*(r.children.Offset+j):]))
}

// checkValue checks value i's type id and payload and, for an OBJECT or
// ARRAY, its children, recording in parents that they have one.
func (r *variantRow) checkValue(i uint64, parents []uint8) error {
	id := r.typeID(i)
	if id >= variantTypeCount {
		return fmt.Errorf("unknown type id %d", id)
	}
	off := r.byteOffset(i)
	if off > uint64(len(r.blob)) {
		return fmt.Errorf("byte offset %d beyond %d data bytes", off, len(r.blob))
	}
	p := r.blob[off:]
	if size := variantFixedSize[id]; size >= 0 {
		if len(p) < size {
			return fmt.Errorf("%d-byte payload at offset %d beyond %d data bytes", size, off, len(r.blob))
		}
		if t := variantTimes[id]; t != wire.TypeInvalid {
			return checkTime(t, binary.LittleEndian.Uint64(p))
		}
		return nil
	}
	switch id {
	case variantDecimal:
		width, p, err := uvarint32(p)
		if err != nil {
			return fmt.Errorf("DECIMAL width: %w", err)
		}
		scale, p, err := uvarint32(p)
		if err != nil {
			return fmt.Errorf("DECIMAL scale: %w", err)
		}
		if width < 1 || width > 38 || scale > width {
			return fmt.Errorf("invalid DECIMAL(%d,%d)", width, scale)
		}
		size := 16
		switch {
		case width <= 4:
			size = 2
		case width <= 9:
			size = 4
		case width <= 18:
			size = 8
		}
		if len(p) < size {
			return errors.New("DECIMAL payload beyond the data")
		}
	case variantObject, variantArray:
		count, p, err := uvarint32(p)
		if err != nil {
			return fmt.Errorf("child count: %w", err)
		}
		if count == 0 {
			return nil
		}
		first, _, err := uvarint32(p)
		if err != nil {
			return fmt.Errorf("first child: %w", err)
		}
		if uint64(first)+uint64(count) > r.children.Length {
			return fmt.Errorf("children %d+%d beyond the row's %d", first, count, r.children.Length)
		}
		for j := uint64(first); j < uint64(first)+uint64(count); j++ {
			keyed, err := validAt(r.keysIndex, int(r.children.Offset+j))
			if err != nil {
				return err
			}
			switch {
			case id == variantObject && !keyed:
				return fmt.Errorf("OBJECT child %d without a key", j)
			case id == variantArray && keyed:
				return fmt.Errorf("ARRAY child %d with a key", j)
			case keyed && uint64(binary.LittleEndian.Uint32(r.keysIndex.Data[4*(r.children.Offset+j):])) >= r.keys:
				return fmt.Errorf("child %d: key beyond the row's %d keys", j, r.keys)
			}
			c := r.childValue(j)
			if c >= r.values.Length {
				return fmt.Errorf("child %d: value %d beyond the row's %d values", j, c, r.values.Length)
			}
			if parents[c] != 0 {
				return fmt.Errorf("value %d is the child of two values", c)
			}
			parents[c] = 1
		}
	default: // VARCHAR, BLOB, BIGNUM, BIT, GEOMETRY
		length, p, err := uvarint32(p)
		if err != nil {
			return fmt.Errorf("length: %w", err)
		}
		if uint64(length) > uint64(len(p)) {
			return fmt.Errorf("%d-byte string beyond the data", length)
		}
		s := p[:length]
		switch id {
		case variantVarchar:
			if !utf8.Valid(s) {
				return errors.New("invalid UTF-8 in VARCHAR value")
			}
		case variantBitstring:
			return checkString(wire.TypeBit, s, false)
		case variantBignum:
			return checkString(wire.TypeBigNum, s, false)
		case variantGeometry:
			return checkGeometry(s)
		}
	}
	return nil
}

// checkDepth walks the tree under value 0, which checkValue has made sure
// is one, and refuses it deeper than maxVariantDepth. depth has a slot per
// value.
func (r *variantRow) checkDepth(depth []uint16) error {
	stack := []uint64{0}
	depth[0] = 1
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if depth[i] > maxVariantDepth {
			return fmt.Errorf("VARIANT nested deeper than %d levels", maxVariantDepth)
		}
		if id := r.typeID(i); id != variantObject && id != variantArray {
			continue
		}
		// checkValue decoded these already: they cannot fail here.
		count, p, _ := uvarint32(r.blob[r.byteOffset(i):])
		if count == 0 {
			continue
		}
		first, _, _ := uvarint32(p)
		for j := uint64(first); j < uint64(first)+uint64(count); j++ {
			c := r.childValue(j)
			depth[c] = depth[i] + 1
			stack = append(stack, c)
		}
	}
	return nil
}

// uvarint32 decodes DuckDB's VarintDecode<uint32_t>: little-endian base-128
// groups, at most 5 bytes. Values over 32 bits, which DuckDB would
// truncate, are refused.
func uvarint32(p []byte) (uint32, []byte, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		if i >= len(p) {
			return 0, nil, errors.New("varint beyond the data")
		}
		v |= uint64(p[i]&0x7f) << (7 * i)
		if p[i]&0x80 == 0 {
			if v > 1<<32-1 {
				return 0, nil, errors.New("varint over 32 bits")
			}
			return uint32(v), p[i+1:], nil
		}
	}
	return 0, nil, errors.New("varint over 5 bytes")
}

// validAt is v.IsValid(i) with the bounds checked.
func validAt(v *wire.Vector, i int) (bool, error) {
	if i < 0 || i >= v.Count {
		return false, fmt.Errorf("row %d beyond the vector's %d rows", i, v.Count)
	}
	if v.Validity != nil && len(v.Validity) <= i>>3 {
		return false, fmt.Errorf("validity of %d bytes for row %d", len(v.Validity), i)
	}
	return v.IsValid(i), nil
}

// listAt is row's entry of the LIST vector l, checked against its child. A
// NULL list is refused: DuckDB reads the lists of every valid VARIANT row.
func listAt(l *wire.Vector, row int) (wire.ListEntry, error) {
	valid, err := validAt(l, row)
	if err != nil {
		return wire.ListEntry{}, err
	}
	if !valid {
		return wire.ListEntry{}, errors.New("NULL list in a valid VARIANT")
	}
	if len(l.Entries) <= row {
		return wire.ListEntry{}, fmt.Errorf("%d list entries for row %d", len(l.Entries), row)
	}
	e := l.Entries[row]
	if n := uint64(l.Children[0].Count); e.Offset > n || e.Length > n-e.Offset {
		return wire.ListEntry{}, fmt.Errorf("list entry %d+%d beyond %d child rows", e.Offset, e.Length, n)
	}
	return e, nil
}

// blobAt is row's bytes of the BLOB vector b, which must not be NULL.
func blobAt(b *wire.Vector, row int) ([]byte, error) {
	valid, err := validAt(b, row)
	if err != nil {
		return nil, err
	}
	if !valid {
		return nil, errors.New("NULL data in a valid VARIANT")
	}
	if len(b.Offsets) <= row+1 {
		return nil, fmt.Errorf("%d string offsets for row %d", len(b.Offsets), row)
	}
	start, end := b.Offsets[row], b.Offsets[row+1]
	if start > end || int(end) > len(b.Bytes) {
		return nil, fmt.Errorf("offsets %d..%d outside %d bytes", start, end, len(b.Bytes))
	}
	return b.Bytes[start:end], nil
}
