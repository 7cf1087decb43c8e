// Package wire is the Quack wire codec: DuckDB's BinarySerializer encoding,
// LogicalType objects, DataChunk/Vector serialization and the Quack messages
// of each protocol generation. It is pure Go and knows nothing of DuckDB's
// engine; see ../../../shared/docs/quack-protocol.md (in the steering repo) for
// the format this package implements.
package wire

import (
	"crypto/rand"
	"encoding/binary"
)

// Generation names a Quack wire generation. The header and the value
// encodings are common to all of them; message bodies and the string vector
// layout differ.
type Generation uint8

const (
	// Q1 is what DuckDB 1.5.x clients with the quack extension speak
	// (QUACK_VERSION 1).
	Q1 Generation = 1
	// Q2 is mid-2026 development builds (QUACK_VERSION 2).
	Q2 Generation = 2
	// Q3 is DuckDB 2.0 (QUACK_VERSION 3).
	Q3 Generation = 3
)

// TypeID is DuckDB's LogicalTypeId, as written in field 100 of a LogicalType.
type TypeID uint8

// LogicalTypeId values that can appear on the wire.
const (
	TypeInvalid       TypeID = 0
	TypeSQLNull       TypeID = 1
	TypeBoolean       TypeID = 10
	TypeTinyInt       TypeID = 11
	TypeSmallInt      TypeID = 12
	TypeInteger       TypeID = 13
	TypeBigInt        TypeID = 14
	TypeDate          TypeID = 15
	TypeTime          TypeID = 16
	TypeTimestampS    TypeID = 17
	TypeTimestampMS   TypeID = 18
	TypeTimestamp     TypeID = 19
	TypeTimestampNS   TypeID = 20
	TypeDecimal       TypeID = 21
	TypeFloat         TypeID = 22
	TypeDouble        TypeID = 23
	TypeChar          TypeID = 24
	TypeVarchar       TypeID = 25
	TypeBlob          TypeID = 26
	TypeInterval      TypeID = 27
	TypeUTinyInt      TypeID = 28
	TypeUSmallInt     TypeID = 29
	TypeUInteger      TypeID = 30
	TypeUBigInt       TypeID = 31
	TypeTimestampTZ   TypeID = 32
	TypeTimestampTZNS TypeID = 33
	TypeTimeTZ        TypeID = 34
	TypeTimeNS        TypeID = 35
	TypeBit           TypeID = 36
	TypeBigNum        TypeID = 39
	TypeUHugeInt      TypeID = 49
	TypeHugeInt       TypeID = 50
	TypeUUID          TypeID = 54
	TypeGeometry      TypeID = 60
	TypeStruct        TypeID = 100
	TypeList          TypeID = 101
	TypeMap           TypeID = 102
	TypeEnum          TypeID = 104
	TypeUnion         TypeID = 107
	TypeArray         TypeID = 108
	TypeVariant       TypeID = 109
	TypeTuple         TypeID = 110
)

// LogicalType is a decoded LogicalType object. Only the fields that belong
// to the type's kind are set.
type LogicalType struct {
	ID TypeID
	// Alias is the alias of an aliased type (for example JSON on VARCHAR).
	Alias string
	// Width and Scale describe a DECIMAL.
	Width, Scale uint8
	// Collation is set on a collated VARCHAR.
	Collation string
	// Child is the element type of a LIST or ARRAY, and the STRUCT(key,
	// value) entry type of a MAP.
	Child *LogicalType
	// ArraySize is n of an ARRAY T[n].
	ArraySize uint32
	// Fields are the children of a STRUCT, UNION or VARIANT exactly as they
	// are on the wire; for a UNION the first one is the hidden UTINYINT tag
	// with an empty name.
	Fields []Field
	// EnumValues is the dictionary of an ENUM, in index order.
	EnumValues []string
}

// Field is one named child of a STRUCT-like type.
type Field struct {
	Name string
	Type LogicalType
}

// ListEntry locates one LIST or MAP row in its child vector.
type ListEntry struct {
	Offset uint64
	Length uint64
}

// Vector holds Count rows of one column in flat form. Decoding materialises
// constant, dictionary and sequence vectors into this form; encoding always
// writes it flat.
//
// Which fields are used depends on Type:
//   - fixed-width types: Data holds Width(Type) bytes per row, little-endian;
//   - string-like types (VARCHAR, BLOB, BIT, BIGNUM, GEOMETRY, CHAR): row i is
//     Bytes[Offsets[i]:Offsets[i+1]], len(Offsets) == Count+1;
//   - STRUCT, UNION, VARIANT: Children, one per field, each with Count rows;
//   - LIST, MAP: Entries (Count of them), ListSize, and Children[0] with
//     ListSize rows;
//   - ARRAY: Children[0] with Count*ArraySize rows.
type Vector struct {
	Type  LogicalType
	Count int
	// Validity is nil when every row is valid; otherwise it holds
	// 8*ceil(Count/64) bytes, bit i set when row i is not NULL (the
	// little-endian image of DuckDB's uint64 validity words).
	Validity []byte

	Data    []byte
	Offsets []uint32
	Bytes   []byte

	Entries  []ListEntry
	ListSize uint64
	Children []*Vector

	// GeometryFormat is field 99 of a GEOMETRY vector (1 = WKB).
	GeometryFormat uint8
}

// IsValid reports whether row i is not NULL.
func (v *Vector) IsValid(i int) bool {
	return v.Validity == nil || v.Validity[i>>3]&(1<<(uint(i)&7)) != 0
}

// DataChunk is a batch of rows: one Vector per column, each with Rows rows.
type DataChunk struct {
	Rows    int
	Columns []*Vector
}

// Hugeint is DuckDB's signed 128-bit integer; it also carries UUIDs (with the
// top bit of Upper flipped) and result/query ids.
type Hugeint struct {
	Upper int64
	Lower uint64
}

// RandomUUID returns 128 bits from crypto/rand as a Hugeint, the id a client
// gives its query (PrepareRequest.QueryUUID) or an append stream, and a Q1
// server gives a result when the client sent none. The first 8 bytes read are
// Upper, the last 8 Lower, both big-endian. The bits are kept as drawn: no
// RFC 9562 version or variant bits are set, since these ids are only
// compared, never parsed as UUIDs.
func RandomUUID() Hugeint {
	var b [16]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return Hugeint{Upper: int64(binary.BigEndian.Uint64(b[:8])), Lower: binary.BigEndian.Uint64(b[8:])}
}

// OptIdx is an optional_idx: Valid is false for "not set" (2^64-1 on the wire).
type OptIdx struct {
	Value uint64
	Valid bool
}

// Idx returns a set OptIdx.
func Idx(v uint64) OptIdx { return OptIdx{Value: v, Valid: true} }
