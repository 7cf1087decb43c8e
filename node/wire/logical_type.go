package wire

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// LogicalTypeId values that types.go leaves out because they are rare: TYPE
// (a type as a value) and the legacy aggregate state, which decodes as BLOB.
const (
	TypeType           TypeID = 6
	TypeAggregateState TypeID = 105
)

// maxArraySize is DuckDB's ArrayType::MAX_ARRAY_SIZE.
const maxArraySize = 100000

// ExtraTypeInfoType values (§6.3).
const (
	infoInvalid        = 0
	infoGeneric        = 1
	infoDecimal        = 2
	infoString         = 3
	infoList           = 4
	infoStruct         = 5
	infoEnum           = 6
	infoAggregateState = 8
	infoArray          = 9
	infoGeo            = 13
)

var typeNames = map[TypeID]string{
	TypeInvalid:       "INVALID",
	TypeSQLNull:       "\"NULL\"",
	TypeType:          "TYPE",
	TypeBoolean:       "BOOLEAN",
	TypeTinyInt:       "TINYINT",
	TypeSmallInt:      "SMALLINT",
	TypeInteger:       "INTEGER",
	TypeBigInt:        "BIGINT",
	TypeDate:          "DATE",
	TypeTime:          "TIME",
	TypeTimestampS:    "TIMESTAMP_S",
	TypeTimestampMS:   "TIMESTAMP_MS",
	TypeTimestamp:     "TIMESTAMP",
	TypeTimestampNS:   "TIMESTAMP_NS",
	TypeDecimal:       "DECIMAL",
	TypeFloat:         "FLOAT",
	TypeDouble:        "DOUBLE",
	TypeChar:          "CHAR",
	TypeVarchar:       "VARCHAR",
	TypeBlob:          "BLOB",
	TypeInterval:      "INTERVAL",
	TypeUTinyInt:      "UTINYINT",
	TypeUSmallInt:     "USMALLINT",
	TypeUInteger:      "UINTEGER",
	TypeUBigInt:       "UBIGINT",
	TypeTimestampTZ:   "TIMESTAMP WITH TIME ZONE",
	TypeTimestampTZNS: "TIMESTAMPTZ_NS",
	TypeTimeTZ:        "TIME WITH TIME ZONE",
	TypeTimeNS:        "TIME_NS",
	TypeBit:           "BIT",
	TypeBigNum:        "BIGNUM",
	TypeUHugeInt:      "UHUGEINT",
	TypeHugeInt:       "HUGEINT",
	TypeUUID:          "UUID",
	TypeGeometry:      "GEOMETRY",
	TypeStruct:        "STRUCT",
	TypeList:          "LIST",
	TypeMap:           "MAP",
	TypeEnum:          "ENUM",
	TypeUnion:         "UNION",
	TypeArray:         "ARRAY",
	TypeVariant:       "VARIANT",
	TypeTuple:         "TUPLE",
}

// String returns DuckDB's name of the id, or "TYPE_<n>" for ids this package
// does not know.
func (id TypeID) String() string {
	if s, ok := typeNames[id]; ok {
		return s
	}
	return "TYPE_" + strconv.Itoa(int(id))
}

// PhysicalType is DuckDB's in-memory representation of a LogicalType. It is
// never written on the wire; it decides the vector layout.
type PhysicalType uint8

// PhysicalType values, numbered as in DuckDB.
const (
	PhysicalBool     PhysicalType = 1
	PhysicalUint8    PhysicalType = 2
	PhysicalInt8     PhysicalType = 3
	PhysicalUint16   PhysicalType = 4
	PhysicalInt16    PhysicalType = 5
	PhysicalUint32   PhysicalType = 6
	PhysicalInt32    PhysicalType = 7
	PhysicalUint64   PhysicalType = 8
	PhysicalInt64    PhysicalType = 9
	PhysicalFloat    PhysicalType = 11
	PhysicalDouble   PhysicalType = 12
	PhysicalInterval PhysicalType = 21
	PhysicalList     PhysicalType = 23
	PhysicalStruct   PhysicalType = 24
	PhysicalArray    PhysicalType = 29
	PhysicalVarchar  PhysicalType = 200
	PhysicalUint128  PhysicalType = 203
	PhysicalInt128   PhysicalType = 204
	PhysicalInvalid  PhysicalType = 255
)

// Physical returns the physical type that decides how t's vectors are laid
// out, or PhysicalInvalid for ids that never appear in a vector.
func (t LogicalType) Physical() PhysicalType {
	switch t.ID {
	case TypeBoolean:
		return PhysicalBool
	case TypeTinyInt:
		return PhysicalInt8
	case TypeSmallInt:
		return PhysicalInt16
	case TypeSQLNull, TypeInteger, TypeDate:
		return PhysicalInt32
	case TypeBigInt, TypeTime, TypeTimestampS, TypeTimestampMS, TypeTimestamp,
		TypeTimestampNS, TypeTimestampTZ, TypeTimestampTZNS, TypeTimeTZ, TypeTimeNS:
		return PhysicalInt64
	case TypeUTinyInt:
		return PhysicalUint8
	case TypeUSmallInt:
		return PhysicalUint16
	case TypeUInteger:
		return PhysicalUint32
	case TypeUBigInt:
		return PhysicalUint64
	case TypeFloat:
		return PhysicalFloat
	case TypeDouble:
		return PhysicalDouble
	case TypeInterval:
		return PhysicalInterval
	case TypeHugeInt, TypeUUID:
		return PhysicalInt128
	case TypeUHugeInt:
		return PhysicalUint128
	case TypeDecimal:
		switch {
		case t.Width <= 4:
			return PhysicalInt16
		case t.Width <= 9:
			return PhysicalInt32
		case t.Width <= 18:
			return PhysicalInt64
		default:
			return PhysicalInt128
		}
	case TypeEnum:
		switch n := len(t.EnumValues); {
		case n <= 0xFF:
			return PhysicalUint8
		case n <= 0xFFFF:
			return PhysicalUint16
		default:
			return PhysicalUint32
		}
	case TypeType, TypeChar, TypeVarchar, TypeBlob, TypeBit, TypeBigNum, TypeGeometry:
		return PhysicalVarchar
	case TypeStruct, TypeUnion, TypeVariant, TypeTuple:
		return PhysicalStruct
	case TypeList, TypeMap:
		return PhysicalList
	case TypeArray:
		return PhysicalArray
	}
	return PhysicalInvalid
}

// FixedWidth returns the bytes per row of a fixed-width type in a flat
// vector's data block, and 0 for variable-width and nested types. (It is not
// called Width because that field holds a DECIMAL's width.)
func (t LogicalType) FixedWidth() int { return t.Physical().width() }

func (p PhysicalType) width() int {
	switch p {
	case PhysicalBool, PhysicalInt8, PhysicalUint8:
		return 1
	case PhysicalInt16, PhysicalUint16:
		return 2
	case PhysicalInt32, PhysicalUint32, PhysicalFloat:
		return 4
	case PhysicalInt64, PhysicalUint64, PhysicalDouble:
		return 8
	case PhysicalInterval, PhysicalInt128, PhysicalUint128:
		return 16
	}
	return 0
}

// nullSlots holds, per physical type, the value DuckDB writes into the data
// slot of a NULL row of a fixed-width vector (§7.3); writers must reproduce
// it for byte-exact output. Unsigned types use zeros.
var nullSlots = map[PhysicalType][]byte{
	PhysicalBool:     {0x80}, // written through the INT8 path
	PhysicalInt8:     {0x80},
	PhysicalInt16:    {0, 0x80},
	PhysicalInt32:    {0, 0, 0, 0x80},
	PhysicalInt64:    {0, 0, 0, 0, 0, 0, 0, 0x80},
	PhysicalInt128:   {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80},
	PhysicalFloat:    {0, 0, 0xC0, 0x7F},
	PhysicalDouble:   {0, 0, 0, 0, 0, 0, 0xF8, 0x7F},
	PhysicalInterval: {0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x80},
	PhysicalUint8:    make([]byte, 1),
	PhysicalUint16:   make([]byte, 2),
	PhysicalUint32:   make([]byte, 4),
	PhysicalUint64:   make([]byte, 8),
	PhysicalUint128:  make([]byte, 16),
}

func (p PhysicalType) nullSlot() []byte { return nullSlots[p] }

// String renders t as DuckDB SQL type text, e.g. "DECIMAL(18,3)",
// "INTEGER[]", "STRUCT(a INTEGER, b VARCHAR)", "TUPLE(INTEGER, VARCHAR)" or
// "MAP(VARCHAR, INTEGER)".
func (t LogicalType) String() string {
	var b strings.Builder
	t.writeSQL(&b)
	return b.String()
}

func (t *LogicalType) writeSQL(b *strings.Builder) {
	if t.Alias != "" {
		b.WriteString(t.Alias)
		return
	}
	switch t.ID {
	case TypeDecimal:
		b.WriteString("DECIMAL(")
		b.WriteString(strconv.Itoa(int(t.Width)))
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(int(t.Scale)))
		b.WriteByte(')')
	case TypeVarchar:
		b.WriteString("VARCHAR")
		if t.Collation != "" {
			b.WriteString(" COLLATE ")
			b.WriteString(t.Collation)
		}
	case TypeList:
		childSQL(b, t.Child)
		b.WriteString("[]")
	case TypeArray:
		childSQL(b, t.Child)
		b.WriteByte('[')
		b.WriteString(strconv.FormatUint(uint64(t.ArraySize), 10))
		b.WriteByte(']')
	case TypeMap:
		b.WriteString("MAP(")
		if t.Child != nil && len(t.Child.Fields) == 2 {
			t.Child.Fields[0].Type.writeSQL(b)
			b.WriteString(", ")
			t.Child.Fields[1].Type.writeSQL(b)
		}
		b.WriteByte(')')
	case TypeStruct, TypeUnion, TypeTuple:
		switch {
		case t.ID == TypeUnion:
			b.WriteString("UNION(")
		case t.ID == TypeTuple && len(t.Fields) == 0:
			// DuckDB prints ROW()'s type without parentheses.
			b.WriteString("TUPLE")
			return
		case t.ID == TypeTuple:
			b.WriteString("TUPLE(")
		default:
			b.WriteString("STRUCT(")
		}
		fields := t.Fields
		if t.ID == TypeUnion && len(fields) > 0 {
			fields = fields[1:] // the hidden tag
		}
		for i := range fields {
			if i > 0 {
				b.WriteString(", ")
			}
			// DuckDB prints the fields of a TUPLE, and of a STRUCT whose
			// first field has no name (1.5's unnamed STRUCT), without names.
			if t.ID != TypeTuple && fields[0].Name != "" {
				b.WriteString(fieldNameSQL(fields[i].Name))
				b.WriteByte(' ')
			}
			fields[i].Type.writeSQL(b)
		}
		b.WriteByte(')')
	case TypeEnum:
		b.WriteString("ENUM(")
		for i, v := range t.EnumValues {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(sqlquote.Literal(v))
		}
		b.WriteByte(')')
	default:
		b.WriteString(t.ID.String())
	}
}

func childSQL(b *strings.Builder, c *LogicalType) {
	if c == nil {
		b.WriteString("INVALID")
		return
	}
	c.writeSQL(b)
}

// fieldNameSQL renders a struct field name as DuckDB does when rendering
// types: as is if it is a plain lower-case identifier, otherwise quoted with
// sqlquote.Ident.
func fieldNameSQL(s string) string {
	plain := s != ""
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return sqlquote.Ident(s)
}

// AppendLogicalType appends t as a LogicalType object, byte-exact with
// DuckDB: type info is written only when the type needs it and "def" fields
// are omitted at their default. For generations before Q3 (serialization
// level V1_5_0) a TUPLE is written as a STRUCT and TIMESTAMP_TZ_NS is
// refused, as DuckDB 1.5 does not know them.
func AppendLogicalType(dst []byte, t *LogicalType, g Generation) ([]byte, error) {
	out, err := appendType(dst, t, g, 0)
	if err != nil {
		return dst, fmt.Errorf("wire: %w", err)
	}
	return out, nil
}

func appendType(b []byte, t *LogicalType, g Generation, depth int) ([]byte, error) {
	if depth > defaultMaxDepth {
		return b, typeErrorf(ErrLimit, "type nesting deeper than %d", defaultMaxDepth)
	}
	if err := checkTypeShape(t, g); err != nil {
		return b, err
	}
	id := t.ID
	if id == TypeTuple && g < Q3 {
		id = TypeStruct
	}
	b = appendField(b, 100)
	b = appendUvarint(b, uint64(id))

	kind := infoKind(t)
	if kind == infoInvalid {
		return appendEnd(b), nil
	}
	b = appendField(b, 101)
	b = append(b, 1) // pointer present
	b = appendField(b, 100)
	b = appendUvarint(b, uint64(kind))
	if t.Alias != "" {
		b = appendField(b, 101)
		b = appendString(b, t.Alias)
	}
	var err error
	switch kind {
	case infoDecimal:
		if t.Width != 0 {
			b = appendField(b, 200)
			b = appendUvarint(b, uint64(t.Width))
		}
		if t.Scale != 0 {
			b = appendField(b, 201)
			b = appendUvarint(b, uint64(t.Scale))
		}
	case infoString:
		b = appendField(b, 200)
		b = appendString(b, t.Collation)
	case infoList:
		b = appendField(b, 200)
		if b, err = appendType(b, t.Child, g, depth+1); err != nil {
			return b, err
		}
	case infoStruct:
		if len(t.Fields) > 0 {
			b = appendField(b, 200)
			b = appendUvarint(b, uint64(len(t.Fields)))
			for i := range t.Fields {
				b = appendField(b, 0)
				b = appendString(b, t.Fields[i].Name)
				b = appendField(b, 1)
				if b, err = appendType(b, &t.Fields[i].Type, g, depth+1); err != nil {
					return b, err
				}
				b = appendEnd(b)
			}
		}
	case infoEnum:
		b = appendField(b, 200)
		b = appendUvarint(b, uint64(len(t.EnumValues)))
		b = appendField(b, 201)
		b = appendUvarint(b, uint64(len(t.EnumValues)))
		for _, v := range t.EnumValues {
			b = appendString(b, v)
		}
	case infoArray:
		b = appendField(b, 200)
		if b, err = appendType(b, t.Child, g, depth+1); err != nil {
			return b, err
		}
		b = appendField(b, 201)
		b = appendUvarint(b, uint64(t.ArraySize))
	}
	b = appendEnd(b) // ExtraTypeInfo
	return appendEnd(b), nil
}

// infoKind picks the ExtraTypeInfo kind DuckDB attaches to t, or infoInvalid
// when t carries no type info at all.
func infoKind(t *LogicalType) int {
	switch t.ID {
	case TypeDecimal:
		return infoDecimal
	case TypeList, TypeMap:
		return infoList
	case TypeStruct, TypeUnion, TypeVariant, TypeTuple:
		return infoStruct
	case TypeEnum:
		return infoEnum
	case TypeArray:
		return infoArray
	case TypeVarchar:
		if t.Collation != "" {
			return infoString
		}
	}
	if t.Alias != "" {
		return infoGeneric
	}
	return infoInvalid
}

// checkTypeShape validates the fields of t that decide its wire layout,
// without recursing into children.
func checkTypeShape(t *LogicalType, g Generation) error {
	if t == nil {
		return typeErrorf(ErrInvalid, "nil child type")
	}
	switch t.ID {
	case TypeInvalid:
		return typeErrorf(ErrInvalid, "INVALID type")
	case TypeAggregateState:
		return typeErrorf(ErrUnsupportedType, "legacy aggregate state type cannot be written")
	case TypeTimestampTZNS:
		if g < Q3 {
			return typeErrorf(ErrUnsupportedType, "TIMESTAMPTZ_NS (TIMESTAMP_TZ_NS) does not exist before Q3")
		}
	case TypeDecimal:
		if t.Width < 1 || t.Width > 38 || t.Scale > t.Width {
			return typeErrorf(ErrInvalid, "DECIMAL(%d,%d) out of range", t.Width, t.Scale)
		}
	case TypeList:
		if t.Child == nil {
			return typeErrorf(ErrInvalid, "LIST without child type")
		}
	case TypeArray:
		if t.Child == nil || t.ArraySize < 1 || t.ArraySize > maxArraySize {
			return typeErrorf(ErrInvalid, "ARRAY needs a child type and a size in 1..%d", maxArraySize)
		}
	case TypeMap:
		if t.Child == nil || t.Child.ID != TypeStruct || len(t.Child.Fields) != 2 {
			return typeErrorf(ErrInvalid, "MAP child must be STRUCT(key, value)")
		}
	case TypeStruct, TypeVariant, TypeTuple:
		if len(t.Fields) == 0 {
			return typeErrorf(ErrInvalid, "%s without fields", t.ID)
		}
	case TypeUnion:
		if len(t.Fields) < 2 || t.Fields[0].Type.ID != TypeUTinyInt {
			return typeErrorf(ErrInvalid, "UNION needs the UTINYINT tag and at least one member")
		}
	case TypeEnum:
		if len(t.EnumValues) == 0 {
			return typeErrorf(ErrInvalid, "ENUM without values")
		}
	default:
		if t.Physical() == PhysicalInvalid {
			return typeErrorf(ErrUnsupportedType, "type id %d cannot travel on the wire", t.ID)
		}
	}
	return nil
}

func typeErrorf(kind error, format string, args ...any) error {
	return errorf(kind, "logical type: "+format, args...)
}

// DecodeLogicalType reads one LogicalType object. Binder-only ids, extension
// type info (info fields 102/103) and GEOMETRY with a CRS are rejected with
// ErrUnsupportedType.
func DecodeLogicalType(r *Reader, lim Limits) (LogicalType, error) {
	lim = lim.withDefaults()
	var t LogicalType
	err := decodeType(r, &t, lim.MaxDepth)
	return t, err
}

func decodeType(r *Reader, t *LogicalType, depth int) error {
	if depth <= 0 {
		return r.errorf(r.off, ErrLimit, "type nesting too deep")
	}
	if err := r.ExpectField(100); err != nil {
		return err
	}
	idOff := r.off
	id, err := r.ReadUint8()
	if err != nil {
		return err
	}
	t.ID = TypeID(id)
	switch t.ID {
	case 2, 3, 4, 5, 37, 38, 103, 106:
		return r.errorf(idOff, ErrUnsupportedType, "binder-only type id %d", id)
	case TypeAggregateState:
		t.ID = TypeBlob // DuckDB reads the legacy aggregate state back as BLOB
	default:
		if t.Physical() == PhysicalInvalid {
			return r.errorf(idOff, ErrUnsupportedType, "type id %d cannot travel on the wire", id)
		}
	}
	hasInfo := false
	if r.OptionalField(101) {
		if hasInfo, err = r.ReadPresent(); err != nil {
			return err
		}
	}
	if hasInfo {
		if err := decodeTypeInfo(r, t, TypeID(id), depth); err != nil {
			return err
		}
	} else {
		switch t.ID {
		case TypeDecimal, TypeList, TypeMap, TypeEnum, TypeArray, TypeStruct, TypeUnion, TypeVariant, TypeTuple:
			return r.errorf(idOff, ErrMalformed, "%s without type info", t.ID)
		}
	}
	return r.ExpectEnd()
}

func decodeTypeInfo(r *Reader, t *LogicalType, wireID TypeID, depth int) error {
	if err := r.ExpectField(100); err != nil {
		return err
	}
	kindOff := r.off
	kind, err := r.ReadUint8()
	if err != nil {
		return err
	}
	if r.OptionalField(101) {
		if t.Alias, err = r.ReadString(); err != nil {
			return err
		}
	}
	if f, _ := r.PeekField(); f == 102 || f == 103 {
		return r.errorf(r.off, ErrUnsupportedType, "type info field %d (modifiers or extension info)", f)
	}
	// The info kind DuckDB attaches to this id; a VARCHAR may carry STRING
	// info (collation), any scalar GENERIC info (alias only).
	want := uint8(infoKind(&LogicalType{ID: t.ID, Collation: "-"}))
	switch kind {
	case infoInvalid, infoGeneric:
		if want != infoString && want != infoGeneric && want != infoInvalid {
			return r.errorf(kindOff, ErrMalformed, "%s with generic type info", t.ID)
		}
		return r.ExpectEnd()
	case infoAggregateState:
		if wireID != TypeAggregateState {
			return r.errorf(kindOff, ErrMalformed, "%s with aggregate state info", t.ID)
		}
		return r.ExpectEnd()
	case infoGeo:
		return r.errorf(kindOff, ErrUnsupportedType, "GEOMETRY with a CRS")
	case infoDecimal, infoString, infoList, infoStruct, infoEnum, infoArray:
		if kind != want {
			return r.errorf(kindOff, ErrMalformed, "%s with type info kind %d", t.ID, kind)
		}
	default:
		return r.errorf(kindOff, ErrUnsupportedType, "type info kind %d", kind)
	}

	switch kind {
	case infoDecimal:
		if r.OptionalField(200) {
			if t.Width, err = r.ReadUint8(); err != nil {
				return err
			}
		}
		if r.OptionalField(201) {
			if t.Scale, err = r.ReadUint8(); err != nil {
				return err
			}
		}
		if err := r.ExpectEnd(); err != nil {
			return err
		}
		if t.Width < 1 || t.Width > 38 || t.Scale > t.Width {
			return r.errorf(kindOff, ErrMalformed, "DECIMAL(%d,%d) out of range", t.Width, t.Scale)
		}
		return nil
	case infoString:
		if r.OptionalField(200) {
			if t.Collation, err = r.ReadString(); err != nil {
				return err
			}
		}
	case infoList:
		if err := r.ExpectField(200); err != nil {
			return err
		}
		t.Child = new(LogicalType)
		if err := decodeType(r, t.Child, depth-1); err != nil {
			return err
		}
		if t.ID == TypeMap && (t.Child.ID != TypeStruct || len(t.Child.Fields) != 2) {
			return r.errorf(kindOff, ErrMalformed, "MAP child is %s, not STRUCT(key, value)", t.Child)
		}
	case infoStruct:
		if r.OptionalField(200) {
			// A pair is at least "00 00 00 01 00" + a 5-byte type + "FF FF".
			n, err := r.ReadCount(12)
			if err != nil {
				return err
			}
			t.Fields = make([]Field, n)
			for i := range t.Fields {
				f := &t.Fields[i]
				if err := r.ExpectField(0); err != nil {
					return err
				}
				if f.Name, err = r.ReadString(); err != nil {
					return err
				}
				if err := r.ExpectField(1); err != nil {
					return err
				}
				if err := decodeType(r, &f.Type, depth-1); err != nil {
					return err
				}
				if err := r.ExpectEnd(); err != nil {
					return err
				}
			}
		}
		if len(t.Fields) == 0 {
			return r.errorf(kindOff, ErrMalformed, "%s without fields", t.ID)
		}
		if t.ID == TypeUnion && (len(t.Fields) < 2 || t.Fields[0].Type.ID != TypeUTinyInt) {
			return r.errorf(kindOff, ErrMalformed, "UNION without UTINYINT tag and members")
		}
	case infoEnum:
		if err := r.ExpectField(200); err != nil {
			return err
		}
		cntOff := r.off
		want, err := r.ReadUvarint()
		if err != nil {
			return err
		}
		if err := r.ExpectField(201); err != nil {
			return err
		}
		n, err := r.ReadCount(1)
		if err != nil {
			return err
		}
		if uint64(n) != want || n == 0 {
			return r.errorf(cntOff, ErrMalformed, "ENUM values_count %d with %d values", want, n)
		}
		t.EnumValues = make([]string, n)
		for i := range t.EnumValues {
			if t.EnumValues[i], err = r.ReadString(); err != nil {
				return err
			}
		}
	case infoArray:
		if err := r.ExpectField(200); err != nil {
			return err
		}
		t.Child = new(LogicalType)
		if err := decodeType(r, t.Child, depth-1); err != nil {
			return err
		}
		sizeOff := r.off
		if r.OptionalField(201) {
			if t.ArraySize, err = r.ReadUint32(); err != nil {
				return err
			}
		}
		if err := r.ExpectEnd(); err != nil {
			return err
		}
		if t.ArraySize < 1 || t.ArraySize > maxArraySize {
			return r.errorf(sizeOff, ErrMalformed, "ARRAY size %d out of range", t.ArraySize)
		}
		return nil
	}
	return r.ExpectEnd()
}
