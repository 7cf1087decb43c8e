package engine

import (
	"slices"
	"unsafe"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/wire"
)

// stringSize is sizeof(duckdb_string_t): a uint32 length, then either up to
// 12 inline bytes or a 4-byte prefix and a pointer to the bytes.
const (
	stringSize   = 16
	stringInline = 12
)

// reader turns one DuckDB vector into a wire.Vector. It is built once per
// result column and reused for every chunk, so reading a chunk allocates
// nothing once the string buffers have grown to size.
type reader struct {
	layout   layout
	width    int
	vec      wire.Vector
	children []*reader
}

func newReader(t wire.LogicalType) (*reader, error) {
	l, w, err := physical(&t)
	if err != nil {
		return nil, err
	}
	r := &reader{layout: l, width: w, vec: wire.Vector{Type: t}}
	if l == layoutList || l == layoutStruct || l == layoutArray {
		for _, ct := range children(&t) {
			c, err := newReader(ct)
			if err != nil {
				return nil, err
			}
			r.children = append(r.children, c)
			r.vec.Children = append(r.vec.Children, &c.vec)
		}
	}
	if t.ID == wire.TypeGeometry {
		r.vec.GeometryFormat = 1 // WKB, the only format DuckDB writes
	}
	return r, nil
}

// read fills r.vec from count rows of v. Fixed-width data, validity and list
// entries alias DuckDB's memory; strings are copied into r's buffers.
func (r *reader) read(v bindings.Vector, count int) *wire.Vector {
	out := &r.vec
	out.Count = count
	out.Validity = nil
	if p := bindings.VectorGetValidity(v); p != nil && count > 0 {
		out.Validity = unsafe.Slice((*byte)(p), 8*((count+63)/64))
	}
	data := bindings.VectorGetData(v)
	switch r.layout {
	case layoutFixed:
		out.Data = nil
		if data != nil && count > 0 {
			out.Data = unsafe.Slice((*byte)(data), count*r.width)
		}
	case layoutString:
		r.readStrings(data, count)
	case layoutList:
		out.Entries = nil
		if data != nil && count > 0 {
			out.Entries = unsafe.Slice((*wire.ListEntry)(data), count)
		}
		out.ListSize = uint64(bindings.ListVectorGetSize(v))
		r.children[0].read(bindings.ListVectorGetChild(v), int(out.ListSize))
	case layoutStruct:
		for i, c := range r.children {
			c.read(bindings.StructVectorGetChild(v, bindings.IdxT(i)), count)
		}
	case layoutArray:
		r.children[0].read(bindings.ArrayVectorGetChild(v), count*int(out.Type.ArraySize))
	}
	return out
}

// readStrings copies count duckdb_string_t values into Offsets and Bytes in
// two passes, sizing Bytes once. NULL rows become empty strings: their
// string_t may be uninitialised.
//
// This runs for every row of every string column of every result, and
// most strings are inline (12 bytes or fewer): those are copied as a fixed
// 12 bytes, into a buffer with 12 bytes of slack, rather than by a call to
// memmove per string; the next string overwrites what spilled past this
// one.
func (r *reader) readStrings(data unsafe.Pointer, count int) {
	out := &r.vec
	offsets := slices.Grow(out.Offsets[:0], count+1)[:count+1]
	if data == nil || count == 0 {
		clear(offsets)
		out.Offsets, out.Bytes = offsets, out.Bytes[:0]
		return
	}
	raw := unsafe.Slice((*[stringSize]byte)(data), count)
	length := func(s *[stringSize]byte) int { return int(*(*uint32)(unsafe.Pointer(s))) }
	// Without NULLs, the common case, no row pays for a validity check
	// (about 8% of this function in BenchmarkReadStrings).
	total := 0
	if out.Validity == nil {
		for i := range raw {
			total += length(&raw[i])
		}
	} else {
		for i := range raw {
			if out.IsValid(i) {
				total += length(&raw[i])
			}
		}
	}
	buf := slices.Grow(out.Bytes[:0], total+stringInline)[:total+stringInline]
	pos := 0
	for i := range raw {
		offsets[i] = uint32(pos)
		if out.Validity != nil && !out.IsValid(i) {
			continue
		}
		s := &raw[i]
		n := length(s)
		if n <= stringInline {
			*(*[stringInline]byte)(buf[pos:]) = *(*[stringInline]byte)(s[4:])
		} else {
			copy(buf[pos:pos+n], unsafe.Slice(*(**byte)(unsafe.Pointer(&s[8])), n))
		}
		pos += n
	}
	offsets[count] = uint32(pos)
	out.Offsets, out.Bytes = offsets, buf[:total]
}
