package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// lineitemChunk builds a 2048-row chunk shaped like TPC-H lineitem: integer
// keys, DECIMAL(15,2) amounts, doubles, dates and short strings. When
// withNulls is set every 10th row of the price and comment columns is NULL.
func lineitemChunk(withNulls bool) *DataChunk {
	const n = 2048
	rng := rand.New(rand.NewPCG(1, 2))
	fixed := func(id TypeID, w int, gen func(i int) uint64) *Vector {
		v := &Vector{Type: LogicalType{ID: id}, Count: n, Data: make([]byte, n*w)}
		for i := 0; i < n; i++ {
			var le [8]byte
			binary.LittleEndian.PutUint64(le[:], gen(i))
			copy(v.Data[i*w:], le[:w])
		}
		return v
	}
	strs := func(gen func(i int) string) *Vector {
		v := &Vector{Type: LogicalType{ID: TypeVarchar}, Count: n, Offsets: make([]uint32, n+1)}
		for i := 0; i < n; i++ {
			v.Bytes = append(v.Bytes, gen(i)...)
			v.Offsets[i+1] = uint32(len(v.Bytes))
		}
		return v
	}
	dec := func(gen func(i int) uint64) *Vector {
		v := fixed(TypeDecimal, 8, gen)
		v.Type = LogicalType{ID: TypeDecimal, Width: 15, Scale: 2}
		return v
	}
	modes := []string{"AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB", "REG AIR"}
	cols := []*Vector{
		fixed(TypeBigInt, 8, func(i int) uint64 { return uint64(i / 4) }),
		fixed(TypeInteger, 4, func(int) uint64 { return uint64(rng.IntN(200000)) }),
		fixed(TypeInteger, 4, func(i int) uint64 { return uint64(i%7 + 1) }),
		dec(func(int) uint64 { return uint64(rng.IntN(5000)) }),
		dec(func(int) uint64 { return uint64(rng.IntN(10000000)) }),
		fixed(TypeDouble, 8, func(int) uint64 { return math.Float64bits(float64(rng.IntN(11)) / 100) }),
		fixed(TypeDouble, 8, func(int) uint64 { return math.Float64bits(float64(rng.IntN(9)) / 100) }),
		strs(func(int) string { return string("ANR"[rng.IntN(3)]) }),
		strs(func(int) string { return string("OF"[rng.IntN(2)]) }),
		fixed(TypeDate, 4, func(int) uint64 { return uint64(8000 + rng.IntN(2500)) }),
		fixed(TypeDate, 4, func(int) uint64 { return uint64(8000 + rng.IntN(2500)) }),
		strs(func(int) string { return "DELIVER IN PERSON" }),
		strs(func(int) string { return modes[rng.IntN(len(modes))] }),
		strs(func(i int) string { return fmt.Sprintf("carefully final deposits %d", i) }),
	}
	if withNulls {
		for _, c := range []*Vector{cols[4], cols[13]} {
			c.Validity = make([]byte, n/8)
			for i := 0; i < n; i++ {
				if i%10 != 0 {
					c.Validity[i/8] |= 1 << (i % 8)
				}
			}
		}
	}
	return &DataChunk{Rows: n, Columns: cols}
}

func BenchmarkAppendDataChunk(b *testing.B) {
	for _, bc := range []struct {
		name  string
		g     Generation
		nulls bool
	}{
		{"Q1", Q1, false},
		{"Q1/nulls", Q1, true},
		{"Q3", Q3, false},
		{"Q3/nulls", Q3, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := lineitemChunk(bc.nulls)
			out, err := AppendDataChunk(nil, c, bc.g)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			buf := make([]byte, 0, len(out))
			for b.Loop() {
				buf, _ = AppendDataChunk(buf[:0], c, bc.g)
			}
		})
	}
}

func BenchmarkDecodeDataChunk(b *testing.B) {
	for _, g := range []Generation{Q1, Q3} {
		b.Run(fmt.Sprintf("Q%d", g), func(b *testing.B) {
			enc, err := AppendDataChunk(nil, lineitemChunk(true), g)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeDataChunk(NewReader(enc), Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeBodyEncoded is a router's check of a FETCH answer it
// forwards: 12 lineitem chunks walked as the decoder does, nothing
// materialised.
func BenchmarkDecodeBodyEncoded(b *testing.B) {
	for _, g := range []Generation{Q1, Q3} {
		b.Run(fmt.Sprintf("Q%d", g), func(b *testing.B) {
			c := lineitemChunk(false)
			types := columnTypes(c)
			m := &FetchResponse{Chunks: slices.Repeat([]*DataChunk{c}, 12), BatchIndex: Idx(1)}
			body, err := AppendMessage(nil, g, Header{Type: m.Type()}, m)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				h, r, err := DecodeHeader(body)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := DecodeBodyEncoded(g, h.Type, r, Limits{}, types); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
