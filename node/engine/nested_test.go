package engine

import (
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// nestedTypes have NULLs at every level; row 1 is NULL.
var nestedTypes = []struct {
	sqlType string
	values  []string
	want    wire.LogicalType
}{
	{"INTEGER[]", []string{"[1, 2, NULL]", "NULL", "[]", "[3]"}, listOf(lt(wire.TypeInteger))},
	{"VARCHAR[][]", []string{"[['a', 'a string longer than twelve'], NULL, []]", "NULL", "[NULL]", "[['x']]"}, listOf(listOf(lt(wire.TypeVarchar)))},
	{"STRUCT(a INTEGER, b VARCHAR)", []string{"{'a': 1, 'b': 'x'}", "NULL", "{'a': NULL, 'b': 'a string longer than twelve'}"},
		structOf(wire.Field{Name: "a", Type: lt(wire.TypeInteger)}, wire.Field{Name: "b", Type: lt(wire.TypeVarchar)})},
	{"MAP(VARCHAR, INTEGER)", []string{"MAP {'k': 1, 'l': NULL}", "NULL", "MAP {}"},
		wire.LogicalType{ID: wire.TypeMap, Child: ptr(structOf(wire.Field{Name: "key", Type: lt(wire.TypeVarchar)}, wire.Field{Name: "value", Type: lt(wire.TypeInteger)}))}},
	{"INTEGER[3]", []string{"[1, 2, 3]", "NULL", "[4, NULL, 6]"}, wire.LogicalType{ID: wire.TypeArray, ArraySize: 3, Child: ptr(lt(wire.TypeInteger))}},
	{"UNION(i INTEGER, s VARCHAR)", []string{"1::INTEGER", "NULL", "'a string longer than twelve'::VARCHAR"},
		wire.LogicalType{ID: wire.TypeUnion, Fields: []wire.Field{unionTag, {Name: "i", Type: lt(wire.TypeInteger)}, {Name: "s", Type: lt(wire.TypeVarchar)}}}},
	{"STRUCT(l INTEGER[], m MAP(INTEGER, VARCHAR[]))[]", []string{"[{'l': [1, NULL], 'm': MAP {1: ['a', NULL]}}, NULL, {'l': NULL, 'm': NULL}]", "NULL", "[]"},
		listOf(structOf(
			wire.Field{Name: "l", Type: listOf(lt(wire.TypeInteger))},
			wire.Field{Name: "m", Type: wire.LogicalType{ID: wire.TypeMap, Child: ptr(structOf(
				wire.Field{Name: "key", Type: lt(wire.TypeInteger)}, wire.Field{Name: "value", Type: listOf(lt(wire.TypeVarchar))}))}},
		))},
	{"INTEGER[2][]", []string{"[[1, 2], NULL, [NULL, 4]]", "NULL", "[]"}, listOf(wire.LogicalType{ID: wire.TypeArray, ArraySize: 2, Child: ptr(lt(wire.TypeInteger))})},
}

func ptr[T any](v T) *T { return &v }

func TestQueryNestedTypes(t *testing.T) {
	c := connect(t, openTest(t))
	for _, nt := range nestedTypes {
		t.Run(nt.sqlType, func(t *testing.T) {
			createTypeTable(t, c, "src", typeCase{sqlType: nt.sqlType, values: nt.values})
			types, chunks := collect(t, c, "SELECT v FROM src ORDER BY id")
			if !sameType(&types[0], &nt.want) {
				t.Fatalf("type = %s, want %s", typeName(types[0]), typeName(nt.want))
			}
			v := chunks[0].Columns[0]
			if v.IsValid(1) || !v.IsValid(0) {
				t.Errorf("validity %x, want row 1 NULL", v.Validity)
			}
		})
	}
}

func TestQueryListLayout(t *testing.T) {
	c := connect(t, openTest(t))
	_, chunks := collect(t, c, "SELECT * FROM (VALUES (0, [1, 2, NULL]), (1, NULL), (2, []), (3, [4])) t(id, l) ORDER BY id")
	v := chunks[0].Columns[1]
	if v.IsValid(1) || !v.IsValid(2) {
		t.Errorf("validity %x", v.Validity)
	}
	if v.ListSize != 4 || len(v.Entries) != 4 {
		t.Fatalf("list size %d, %d entries", v.ListSize, len(v.Entries))
	}
	for _, i := range []int{0, 2, 3} {
		want := []wire.ListEntry{{Offset: 0, Length: 3}, {}, {Offset: 3}, {Offset: 3, Length: 1}}[i]
		if v.Entries[i] != want {
			t.Errorf("entry %d = %+v, want %+v", i, v.Entries[i], want)
		}
	}
	child := v.Children[0]
	if child.Count != 4 || child.IsValid(2) || !child.IsValid(3) || rowHex(t, child, 3) != "04000000" {
		t.Errorf("child %+v", child)
	}
}

func TestQueryStructUnionMapArrayLayout(t *testing.T) {
	c := connect(t, openTest(t))
	_, chunks := collect(t, c, `SELECT
		{'a': 1, 'b': 'x'} AS s,
		union_value(s := 'a string longer than twelve')::UNION(i INTEGER, s VARCHAR) AS u,
		MAP {'k': 7} AS m,
		[5, NULL, 7]::INTEGER[3] AS a`)
	s, u, m, a := chunks[0].Columns[0], chunks[0].Columns[1], chunks[0].Columns[2], chunks[0].Columns[3]
	if len(s.Children) != 2 || rowHex(t, s.Children[0], 0) != "01000000" || str(s.Children[1], 0) != "x" {
		t.Errorf("struct children %+v", s.Children)
	}
	if len(u.Children) != 3 || rowHex(t, u.Children[0], 0) != "01" || u.Children[1].IsValid(0) ||
		str(u.Children[2], 0) != "a string longer than twelve" {
		t.Errorf("union: tag %x, members %+v %+v", u.Children[0].Data, u.Children[1], u.Children[2])
	}
	entry := m.Children[0]
	if m.ListSize != 1 || len(entry.Children) != 2 || str(entry.Children[0], 0) != "k" || rowHex(t, entry.Children[1], 0) != "07000000" {
		t.Errorf("map %+v", m)
	}
	if a.Children[0].Count != 3 || a.Children[0].IsValid(1) || rowHex(t, a.Children[0], 2) != "07000000" {
		t.Errorf("array child %+v", a.Children[0])
	}
}

func TestQueryVariant(t *testing.T) {
	c := connect(t, openTest(t))
	types, chunks := collect(t, c, "SELECT v::VARIANT FROM (VALUES (1), (NULL)) t(v)")
	want := wire.LogicalType{ID: wire.TypeVariant, Fields: variantFields}
	if !sameType(&types[0], &want) {
		t.Fatalf("type %s", typeName(types[0]))
	}
	v := chunks[0].Columns[0]
	if len(v.Children) != 4 || v.IsValid(1) || v.Children[3].Count != 2 {
		t.Errorf("variant vector %+v", v)
	}
}
