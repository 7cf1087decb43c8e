package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/wire"
)

// simpleTypes maps the C API's duckdb_type to DuckDB's internal
// LogicalTypeId (the wire id) for types without extra info. The two
// enumerations differ, so the mapping must be explicit.
var simpleTypes = map[bindings.Type]wire.TypeID{
	bindings.TypeSQLNull:       wire.TypeSQLNull,
	bindings.TypeBoolean:       wire.TypeBoolean,
	bindings.TypeTinyInt:       wire.TypeTinyInt,
	bindings.TypeSmallInt:      wire.TypeSmallInt,
	bindings.TypeInteger:       wire.TypeInteger,
	bindings.TypeBigInt:        wire.TypeBigInt,
	bindings.TypeUTinyInt:      wire.TypeUTinyInt,
	bindings.TypeUSmallInt:     wire.TypeUSmallInt,
	bindings.TypeUInteger:      wire.TypeUInteger,
	bindings.TypeUBigInt:       wire.TypeUBigInt,
	bindings.TypeHugeInt:       wire.TypeHugeInt,
	bindings.TypeUHugeInt:      wire.TypeUHugeInt,
	bindings.TypeFloat:         wire.TypeFloat,
	bindings.TypeDouble:        wire.TypeDouble,
	bindings.TypeDate:          wire.TypeDate,
	bindings.TypeTime:          wire.TypeTime,
	bindings.TypeTimeNS:        wire.TypeTimeNS,
	bindings.TypeTimeTZ:        wire.TypeTimeTZ,
	bindings.TypeTimestamp:     wire.TypeTimestamp,
	bindings.TypeTimestampS:    wire.TypeTimestampS,
	bindings.TypeTimestampMS:   wire.TypeTimestampMS,
	bindings.TypeTimestampNS:   wire.TypeTimestampNS,
	bindings.TypeTimestampTZ:   wire.TypeTimestampTZ,
	bindings.TypeTimestampTZNS: wire.TypeTimestampTZNS,
	bindings.TypeInterval:      wire.TypeInterval,
	bindings.TypeUUID:          wire.TypeUUID,
	bindings.TypeVarchar:       wire.TypeVarchar,
	bindings.TypeBlob:          wire.TypeBlob,
	bindings.TypeBit:           wire.TypeBit,
	bindings.TypeBigNum:        wire.TypeBigNum,
	bindings.TypeGeometry:      wire.TypeGeometry,
}

// cSimpleTypes is the inverse of simpleTypes.
var cSimpleTypes = func() map[wire.TypeID]bindings.Type {
	m := make(map[wire.TypeID]bindings.Type, len(simpleTypes))
	for c, w := range simpleTypes {
		m[w] = c
	}
	return m
}()

// variantFields are VARIANT's fixed internal struct (quack-protocol.md §6.2).
// The C API does not describe VARIANT's children, so they are spelled out.
var variantFields = []wire.Field{
	{Name: "keys", Type: listOf(wire.LogicalType{ID: wire.TypeVarchar})},
	{Name: "children", Type: listOf(structOf(
		wire.Field{Name: "keys_index", Type: wire.LogicalType{ID: wire.TypeUInteger}},
		wire.Field{Name: "values_index", Type: wire.LogicalType{ID: wire.TypeUInteger}},
	))},
	{Name: "values", Type: listOf(structOf(
		wire.Field{Name: "type_id", Type: wire.LogicalType{ID: wire.TypeUTinyInt}},
		wire.Field{Name: "byte_offset", Type: wire.LogicalType{ID: wire.TypeUInteger}},
	))},
	{Name: "data", Type: wire.LogicalType{ID: wire.TypeBlob}},
}

func listOf(child wire.LogicalType) wire.LogicalType {
	return wire.LogicalType{ID: wire.TypeList, Child: &child}
}

func structOf(fields ...wire.Field) wire.LogicalType {
	return wire.LogicalType{ID: wire.TypeStruct, Fields: fields}
}

// unionTag is the hidden first child of every UNION.
var unionTag = wire.Field{Name: "", Type: wire.LogicalType{ID: wire.TypeUTinyInt}}

// wireType converts a C API logical type to its wire form. It does not take
// ownership of lt; every child type it obtains is destroyed before return.
func wireType(lt bindings.LogicalType) (wire.LogicalType, error) {
	id := bindings.GetTypeId(lt)
	t := wire.LogicalType{Alias: bindings.LogicalTypeGetAlias(lt)}
	if w, ok := simpleTypes[id]; ok {
		t.ID = w
		return t, nil
	}
	switch id {
	case bindings.TypeDecimal:
		t.ID = wire.TypeDecimal
		t.Width, t.Scale = bindings.DecimalWidth(lt), bindings.DecimalScale(lt)
	case bindings.TypeEnum:
		t.ID = wire.TypeEnum
		n := bindings.EnumDictionarySize(lt)
		t.EnumValues = make([]string, n)
		for i := range t.EnumValues {
			t.EnumValues[i] = bindings.EnumDictionaryValue(lt, bindings.IdxT(i))
		}
	case bindings.TypeList:
		t.ID = wire.TypeList
		child, err := ownedWireType(bindings.ListTypeChildType(lt))
		if err != nil {
			return t, err
		}
		t.Child = &child
	case bindings.TypeArray:
		t.ID = wire.TypeArray
		t.ArraySize = uint32(bindings.ArrayTypeArraySize(lt))
		child, err := ownedWireType(bindings.ArrayTypeChildType(lt))
		if err != nil {
			return t, err
		}
		t.Child = &child
	case bindings.TypeMap:
		t.ID = wire.TypeMap
		key, err := ownedWireType(bindings.MapTypeKeyType(lt))
		if err != nil {
			return t, err
		}
		value, err := ownedWireType(bindings.MapTypeValueType(lt))
		if err != nil {
			return t, err
		}
		entry := structOf(wire.Field{Name: "key", Type: key}, wire.Field{Name: "value", Type: value})
		t.Child = &entry
	case bindings.TypeStruct:
		t.ID = wire.TypeStruct
		n := int(bindings.StructTypeChildCount(lt))
		t.Fields = make([]wire.Field, n)
		for i := range t.Fields {
			ft, err := ownedWireType(bindings.StructTypeChildType(lt, bindings.IdxT(i)))
			if err != nil {
				return t, err
			}
			t.Fields[i] = wire.Field{Name: bindings.StructTypeChildName(lt, bindings.IdxT(i)), Type: ft}
		}
		// The C API reports DuckDB 2.0's TUPLE as a STRUCT whose fields have
		// empty names. DuckDB tells the two apart the same way when it reads
		// a type written as STRUCT (StructType::IsUnnamed: a first field
		// without a name); an empty TUPLE (ROW()) cannot be told from an
		// empty STRUCT and stays one.
		if n > 0 && t.Fields[0].Name == "" {
			t.ID = wire.TypeTuple
		}
	case bindings.TypeUnion:
		t.ID = wire.TypeUnion
		n := int(bindings.UnionTypeMemberCount(lt))
		t.Fields = make([]wire.Field, 1, n+1)
		t.Fields[0] = unionTag
		for i := range n {
			mt, err := ownedWireType(bindings.UnionTypeMemberType(lt, bindings.IdxT(i)))
			if err != nil {
				return t, err
			}
			t.Fields = append(t.Fields, wire.Field{Name: bindings.UnionTypeMemberName(lt, bindings.IdxT(i)), Type: mt})
		}
	case bindings.TypeVariant:
		t.ID = wire.TypeVariant
		t.Fields = variantFields
	case bindings.TypeInvalid:
		// The C API reports types it has no id for as INVALID: DuckDB 2.0's
		// TYPE (a value that is a type, e.g. SELECT TYPE 'INTEGER'), which
		// no table can hold, and types internal to DuckDB.
		return t, errors.New("type without a DuckDB C API id (such as TYPE): cast the column, e.g. to VARCHAR")
	default:
		return t, fmt.Errorf("unsupported DuckDB type id %d", id)
	}
	return t, nil
}

// ownedWireType converts lt and destroys it.
func ownedWireType(lt bindings.LogicalType) (wire.LogicalType, error) {
	defer bindings.DestroyLogicalType(&lt)
	return wireType(lt)
}

// cType builds the C API logical type for t on conn. The caller must destroy
// it.
func cType(conn bindings.Connection, t wire.LogicalType) (bindings.LogicalType, error) {
	lt, err := cTypeNoAlias(conn, t)
	if err == nil && t.Alias != "" {
		bindings.LogicalTypeSetAlias(lt, t.Alias)
	}
	return lt, err
}

func cTypeNoAlias(conn bindings.Connection, t wire.LogicalType) (bindings.LogicalType, error) {
	if c, ok := cSimpleTypes[t.ID]; ok && t.ID != wire.TypeSQLNull {
		return bindings.CreateLogicalType(c), nil
	}
	cType := func(t wire.LogicalType) (bindings.LogicalType, error) { return cType(conn, t) }
	switch t.ID {
	case wire.TypeVariant:
		return variantType(conn, t)
	case wire.TypeDecimal:
		if t.Width < 1 || t.Width > 38 || t.Scale > t.Width {
			return bindings.LogicalType{}, fmt.Errorf("invalid type DECIMAL(%d,%d)", t.Width, t.Scale)
		}
		return bindings.CreateDecimalType(t.Width, t.Scale), nil
	case wire.TypeEnum:
		return bindings.CreateEnumType(t.EnumValues), nil
	case wire.TypeList, wire.TypeArray:
		if t.Child == nil {
			return bindings.LogicalType{}, fmt.Errorf("%s without element type", typeName(t))
		}
		child, err := cType(*t.Child)
		if err != nil {
			return child, err
		}
		defer bindings.DestroyLogicalType(&child)
		if t.ID == wire.TypeList {
			return bindings.CreateListType(child), nil
		}
		if t.ArraySize == 0 {
			return bindings.LogicalType{}, fmt.Errorf("ARRAY of size 0")
		}
		return bindings.CreateArrayType(child, bindings.IdxT(t.ArraySize)), nil
	case wire.TypeMap:
		if t.Child == nil || len(t.Child.Fields) != 2 {
			return bindings.LogicalType{}, fmt.Errorf("MAP without STRUCT(key, value) entry type")
		}
		key, err := cType(t.Child.Fields[0].Type)
		if err != nil {
			return key, err
		}
		defer bindings.DestroyLogicalType(&key)
		value, err := cType(t.Child.Fields[1].Type)
		if err != nil {
			return value, err
		}
		defer bindings.DestroyLogicalType(&value)
		return bindings.CreateMapType(key, value), nil
	case wire.TypeStruct, wire.TypeUnion, wire.TypeTuple:
		fields := t.Fields
		if t.ID == wire.TypeUnion {
			if len(fields) == 0 || fields[0].Type.ID != wire.TypeUTinyInt {
				return bindings.LogicalType{}, fmt.Errorf("UNION without its UTINYINT tag field")
			}
			fields = fields[1:]
		}
		types := make([]bindings.LogicalType, 0, len(fields))
		defer func() {
			for i := range types {
				bindings.DestroyLogicalType(&types[i])
			}
		}()
		names := make([]string, len(fields))
		for i, f := range fields {
			ft, err := cType(f.Type)
			if err != nil {
				return ft, err
			}
			types = append(types, ft)
			names[i] = f.Name
		}
		if t.ID == wire.TypeUnion {
			return bindings.CreateUnionType(types, names), nil
		}
		// A TUPLE's fields have empty names; the C API has no TUPLE, and
		// its STRUCT of unnamed fields is what DuckDB reads a TUPLE as
		// (StructType::IsUnnamed), so the appender takes it for one.
		return bindings.CreateStructType(types, names), nil
	}
	return bindings.LogicalType{}, fmt.Errorf("type %s cannot be created through the DuckDB C API", typeName(t))
}

// layout is how a type's rows are laid out in a flat vector.
type layout uint8

const (
	layoutFixed  layout = iota // Width bytes per row
	layoutString               // duckdb_string_t per row; Offsets+Bytes on the wire
	layoutList                 // list_entry_t per row plus one child
	layoutStruct               // one child per field, no data of its own
	layoutArray                // ArraySize child rows per row
)

// physical returns the layout of t and, for fixed-width types, the bytes
// per row (DuckDB's in-memory width, which is also the wire width).
func physical(t *wire.LogicalType) (layout, int, error) {
	switch t.ID {
	case wire.TypeBoolean, wire.TypeTinyInt, wire.TypeUTinyInt:
		return layoutFixed, 1, nil
	case wire.TypeSmallInt, wire.TypeUSmallInt:
		return layoutFixed, 2, nil
	case wire.TypeInteger, wire.TypeUInteger, wire.TypeDate, wire.TypeFloat, wire.TypeSQLNull:
		return layoutFixed, 4, nil
	case wire.TypeBigInt, wire.TypeUBigInt, wire.TypeDouble, wire.TypeTime, wire.TypeTimeNS, wire.TypeTimeTZ,
		wire.TypeTimestamp, wire.TypeTimestampS, wire.TypeTimestampMS, wire.TypeTimestampNS,
		wire.TypeTimestampTZ, wire.TypeTimestampTZNS:
		return layoutFixed, 8, nil
	case wire.TypeHugeInt, wire.TypeUHugeInt, wire.TypeUUID, wire.TypeInterval:
		return layoutFixed, 16, nil
	case wire.TypeDecimal:
		switch {
		case t.Width <= 4:
			return layoutFixed, 2, nil
		case t.Width <= 9:
			return layoutFixed, 4, nil
		case t.Width <= 18:
			return layoutFixed, 8, nil
		case t.Width <= 38:
			return layoutFixed, 16, nil
		}
	case wire.TypeEnum:
		switch n := len(t.EnumValues); {
		case n <= 1<<8-1:
			return layoutFixed, 1, nil
		case n <= 1<<16-1:
			return layoutFixed, 2, nil
		default:
			return layoutFixed, 4, nil
		}
	case wire.TypeVarchar, wire.TypeChar, wire.TypeBlob, wire.TypeBit, wire.TypeBigNum, wire.TypeGeometry:
		return layoutString, 16, nil
	case wire.TypeList, wire.TypeMap:
		if t.Child != nil {
			return layoutList, 16, nil
		}
	case wire.TypeStruct, wire.TypeUnion, wire.TypeVariant, wire.TypeTuple:
		return layoutStruct, 0, nil
	case wire.TypeArray:
		if t.Child != nil {
			return layoutArray, 0, nil
		}
	}
	return 0, 0, fmt.Errorf("unsupported type %s", typeName(*t))
}

// children returns the child types of a nested type in vector order.
func children(t *wire.LogicalType) []wire.LogicalType {
	switch t.ID {
	case wire.TypeList, wire.TypeMap, wire.TypeArray:
		return []wire.LogicalType{*t.Child}
	}
	out := make([]wire.LogicalType, len(t.Fields))
	for i, f := range t.Fields {
		out[i] = f.Type
	}
	return out
}

var typeNames = map[wire.TypeID]string{
	wire.TypeSQLNull: "NULL", wire.TypeBoolean: "BOOLEAN", wire.TypeTinyInt: "TINYINT",
	wire.TypeSmallInt: "SMALLINT", wire.TypeInteger: "INTEGER", wire.TypeBigInt: "BIGINT",
	wire.TypeDate: "DATE", wire.TypeTime: "TIME", wire.TypeTimestampS: "TIMESTAMP_S",
	wire.TypeTimestampMS: "TIMESTAMP_MS", wire.TypeTimestamp: "TIMESTAMP", wire.TypeTimestampNS: "TIMESTAMP_NS",
	wire.TypeFloat: "FLOAT", wire.TypeDouble: "DOUBLE", wire.TypeChar: "CHAR", wire.TypeVarchar: "VARCHAR",
	wire.TypeBlob: "BLOB", wire.TypeInterval: "INTERVAL", wire.TypeUTinyInt: "UTINYINT",
	wire.TypeUSmallInt: "USMALLINT", wire.TypeUInteger: "UINTEGER", wire.TypeUBigInt: "UBIGINT",
	wire.TypeTimestampTZ: "TIMESTAMP WITH TIME ZONE", wire.TypeTimestampTZNS: "TIMESTAMPTZ_NS",
	wire.TypeTimeTZ: "TIME WITH TIME ZONE", wire.TypeTimeNS: "TIME_NS", wire.TypeBit: "BIT",
	wire.TypeBigNum: "BIGNUM", wire.TypeUHugeInt: "UHUGEINT", wire.TypeHugeInt: "HUGEINT",
	wire.TypeUUID: "UUID", wire.TypeGeometry: "GEOMETRY", wire.TypeVariant: "VARIANT",
}

// typeName renders t the way DuckDB prints types, for error messages.
func typeName(t wire.LogicalType) string {
	if t.Alias != "" {
		return t.Alias
	}
	if name, ok := typeNames[t.ID]; ok {
		return name
	}
	fields := func(fs []wire.Field) string {
		parts := make([]string, len(fs))
		for i, f := range fs {
			parts[i] = strconv.Quote(f.Name) + " " + typeName(f.Type)
		}
		return strings.Join(parts, ", ")
	}
	switch t.ID {
	case wire.TypeDecimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", t.Width, t.Scale)
	case wire.TypeEnum:
		return fmt.Sprintf("ENUM(%d values)", len(t.EnumValues))
	case wire.TypeList:
		if t.Child != nil {
			return typeName(*t.Child) + "[]"
		}
	case wire.TypeArray:
		if t.Child != nil {
			return fmt.Sprintf("%s[%d]", typeName(*t.Child), t.ArraySize)
		}
	case wire.TypeMap:
		if t.Child != nil && len(t.Child.Fields) == 2 {
			return fmt.Sprintf("MAP(%s, %s)", typeName(t.Child.Fields[0].Type), typeName(t.Child.Fields[1].Type))
		}
	case wire.TypeStruct:
		return "STRUCT(" + fields(t.Fields) + ")"
	case wire.TypeTuple:
		if len(t.Fields) > 0 {
			parts := make([]string, len(t.Fields))
			for i, f := range t.Fields {
				parts[i] = typeName(f.Type)
			}
			return "TUPLE(" + strings.Join(parts, ", ") + ")"
		}
	case wire.TypeUnion:
		if len(t.Fields) > 0 {
			return "UNION(" + fields(t.Fields[1:]) + ")"
		}
	}
	if name, ok := nestedNames[t.ID]; ok {
		return name
	}
	return fmt.Sprintf("type id %d", t.ID)
}

// nestedNames name nested types whose type information is missing.
var nestedNames = map[wire.TypeID]string{
	wire.TypeStruct: "STRUCT", wire.TypeList: "LIST", wire.TypeMap: "MAP", wire.TypeEnum: "ENUM",
	wire.TypeUnion: "UNION", wire.TypeArray: "ARRAY", wire.TypeTuple: "TUPLE", wire.TypeDecimal: "DECIMAL",
}

// sameType reports whether a and b are the same DuckDB type, aliases and
// field names included.
func sameType(a, b *wire.LogicalType) bool {
	if a.ID != b.ID || a.Alias != b.Alias || a.Width != b.Width || a.Scale != b.Scale ||
		a.ArraySize != b.ArraySize || len(a.Fields) != len(b.Fields) || len(a.EnumValues) != len(b.EnumValues) ||
		(a.Child == nil) != (b.Child == nil) {
		return false
	}
	if a.Child != nil && !sameType(a.Child, b.Child) {
		return false
	}
	for i := range a.Fields {
		if a.Fields[i].Name != b.Fields[i].Name || !sameType(&a.Fields[i].Type, &b.Fields[i].Type) {
			return false
		}
	}
	for i := range a.EnumValues {
		if a.EnumValues[i] != b.EnumValues[i] {
			return false
		}
	}
	return true
}
