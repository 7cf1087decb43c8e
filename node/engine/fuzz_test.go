package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// FuzzAppendVariant appends one VARIANT row built from the fuzzer's bytes
// (keys separated by NUL; children as pairs of uint32, a keys_index of
// 2^32-1 for none; values as a type id and a uint32 offset; the data) and,
// when the append is accepted, has DuckDB read it every way it can. A row
// checkVariant lets through that DuckDB misreads crashes the process, which
// the fuzzer reports.
func FuzzAppendVariant(f *testing.F) {
	seed := func(s *variantSpec) {
		var children, values []byte
		for _, c := range s.children {
			k, ok := c[0].(uint32)
			if !ok {
				k = 1<<32 - 1
			}
			children = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(children, k), c[1].(uint32))
		}
		for _, v := range s.values {
			values = binary.LittleEndian.AppendUint32(append(values, v[0].(uint8)), v[1].(uint32))
		}
		f.Add([]byte(joinKeys(s.keys)), children, values, s.data)
	}
	seed(&variantSpec{values: [][2]any{{uint8(variantInt32), uint32(0)}}, data: u32(42)})
	seed(&variantSpec{
		keys: []string{"a"}, children: [][2]any{{uint32(0), uint32(1)}},
		values: [][2]any{{uint8(variantObject), uint32(0)}, {uint8(variantVarchar), uint32(2)}},
		data:   []byte{1, 0, 1, 'x'},
	})
	seed(&variantSpec{
		children: [][2]any{{nil, uint32(1)}, {nil, uint32(2)}},
		values:   [][2]any{{uint8(variantArray), uint32(0)}, {uint8(variantDecimal), uint32(2)}, {uint8(variantBignum), uint32(6)}},
		data:     []byte{2, 0, 4, 1, 0xd2, 0x04, 4, 0x80, 0, 1, 7},
	})
	seed(deepArrays(3))

	db, err := Open("", Options{Threads: 1})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Exec(ctx, "CREATE TABLE v(v VARIANT)"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, keys, children, values, data []byte) {
		s := &variantSpec{data: data}
		if len(keys) > 0 {
			for _, k := range bytes.Split(keys, []byte{0}) {
				s.keys = append(s.keys, string(k))
			}
		}
		for ; len(children) >= 8; children = children[8:] {
			var k any = binary.LittleEndian.Uint32(children)
			if k == uint32(1<<32-1) {
				k = nil
			}
			s.children = append(s.children, [2]any{k, binary.LittleEndian.Uint32(children[4:])})
		}
		for ; len(values) >= 5; values = values[5:] {
			s.values = append(s.values, [2]any{values[0], binary.LittleEndian.Uint32(values[1:])})
		}
		vec, err := wire.NewVector(wire.LogicalType{ID: wire.TypeStruct, Fields: variantFields}, []any{s.row()})
		if err != nil {
			return // keys that are not UTF-8
		}
		vec.Type.ID = wire.TypeVariant
		if _, err := c.Exec(ctx, "DELETE FROM v"); err != nil {
			t.Fatal(err)
		}
		if err := c.Append("", "v", &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{vec}}); err != nil {
			return
		}
		// Errors are fine (a DECIMAL whose digits exceed its width, say);
		// crashes are not.
		for _, q := range []string{
			"SELECT v::VARCHAR, variant_typeof(v), hash(v), v::JSON::VARCHAR FROM v",
			"SELECT variant_normalize(v)::VARCHAR, variant_to_parquet_variant(v)::VARCHAR, variant_comparator(v) FROM v",
			"SELECT variant_keys(v), variant_extract(v, 'a')::VARCHAR, variant_extract(v, 1)::VARCHAR, v = v FROM v",
		} {
			res, err := c.Query(ctx, q)
			if err != nil {
				continue
			}
			for {
				ch, err := res.Next()
				if err != nil || ch == nil {
					break
				}
			}
			res.Close()
		}
	})
}

func joinKeys(keys []string) string {
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(k)
	}
	return b.String()
}

// fuzzTypes are the column types FuzzAppendValue appends raw values of.
var fuzzTypes = []string{
	"BIT", "BIGNUM", "GEOMETRY", "BLOB", "VARCHAR", "DATE", "TIME", "TIME_NS", "TIMETZ", "TIMESTAMP",
	"TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMPTZ", "TIMESTAMPTZ_NS", "INTERVAL", "UUID",
	"HUGEINT", "UHUGEINT", "DECIMAL(4,1)", "DECIMAL(18,3)", "DECIMAL(38,10)", "FLOAT", "DOUBLE",
	"ENUM('a', 'b')", "BOOLEAN",
}

// FuzzAppendValue appends one value of raw bytes to a column of each of
// fuzzTypes (strings as they are, fixed-width types cut or padded to their
// width) and, when the append is accepted, has DuckDB read it every way it
// can. A value DuckDB takes and then cannot read without invalidating the
// database fails the next statement.
func FuzzAppendValue(f *testing.F) {
	f.Add(byte(0), []byte{0})
	f.Add(byte(1), []byte{0x80, 0, 1, 7})
	f.Add(byte(2), []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0x40})
	f.Add(byte(5), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Add(byte(8), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(byte(15), []byte{1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	// Values that invalidated the database before they were checked: a
	// MULTIPOINT whose part is a LINESTRING, a TIMESTAMP_S beyond the
	// microseconds of a TIMESTAMP.
	f.Add(byte(2), []byte{1, 4, 0, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0})
	f.Add(byte(10), []byte{0x22, 0x40, 0xb0, 0x6e, 0x10, 0x30})

	db, err := Open("", Options{Threads: 1})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	c, err := db.Connect()
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	types := make([]wire.LogicalType, len(fuzzTypes))
	for i, typ := range fuzzTypes {
		if _, err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE t%d(v %s)", i, typ)); err != nil {
			f.Fatal(err)
		}
		ts, _ := collect(f, c, fmt.Sprintf("FROM t%d", i))
		types[i] = ts[0]
	}
	// last names the value appended before, which a failing DELETE blames:
	// the fuzzer's minimizer cannot, since the state is the database's.
	var last string
	f.Fuzz(func(t *testing.T, which byte, b []byte) {
		i := int(which) % len(fuzzTypes)
		v := &wire.Vector{Type: types[i], Count: 1}
		l, width, err := physical(&v.Type)
		if err != nil {
			t.Fatal(err)
		}
		if l == layoutString {
			v.Offsets, v.Bytes = []uint32{0, uint32(len(b))}, b
			if v.Type.ID == wire.TypeGeometry {
				v.GeometryFormat = 1
			}
		} else {
			v.Data = append(b[:min(len(b), width):min(len(b), width)], make([]byte, max(0, width-len(b)))...)
		}
		table := fmt.Sprintf("t%d", i)
		if _, err := c.Exec(ctx, "DELETE FROM "+table); err != nil {
			t.Fatalf("after %s: %v", last, err)
		}
		last = fmt.Sprintf("%s value %x", fuzzTypes[i], b)
		if err := c.Append("", table, &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{v}}); err != nil {
			return
		}
		for _, q := range []string{
			"SELECT v::VARCHAR, hash(v), v = v, v < v, v::VARIANT::VARCHAR FROM " + table,
			"SELECT to_json(v)::VARCHAR, min(v)::VARCHAR, max(v)::VARCHAR FROM " + table + " GROUP BY v ORDER BY v",
		} {
			res, err := c.Query(ctx, q)
			if err != nil {
				continue
			}
			for {
				ch, err := res.Next()
				if err != nil || ch == nil {
					break
				}
			}
			res.Close()
		}
		if _, err := c.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatalf("%s value %x: %v", fuzzTypes[i], b, err)
		}
	})
}
