package wire

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// Vector type tags of field 90 (§7.2).
const (
	vectorFlat       = 0
	vectorConstant   = 2
	vectorDictionary = 3
	vectorSequence   = 4
)

// vectorEncoder writes flat Vector objects. The layout is decided by the
// type tree of the column, never by the Type fields of child vectors, so a
// caller cannot make the data disagree with the types written in the chunk.
type vectorEncoder struct {
	buf  []byte
	blob bool // strings in the V2_0_0 blob layout (Q3)
}

func (e *vectorEncoder) vector(t *LogicalType, v *Vector, count, depth int) error {
	if v == nil {
		return errorf(ErrInvalid, "nil %s vector", t)
	}
	if v.Count != count {
		return errorf(ErrInvalid, "%s vector has %d rows, expected %d", t, v.Count, count)
	}
	if depth > defaultMaxDepth {
		return errorf(ErrLimit, "vector nesting deeper than %d", defaultMaxDepth)
	}
	hasNull, err := checkValidity(v, count)
	if err != nil {
		return err
	}
	if t.ID == TypeGeometry && v.GeometryFormat != 0 {
		e.buf = appendField(e.buf, 99)
		e.buf = appendUvarint(e.buf, uint64(v.GeometryFormat))
	}
	phys := t.Physical()
	if w := phys.width(); w > 0 {
		return e.fixed(phys, w, v, count, hasNull)
	}
	e.validity(v, count, hasNull)
	switch phys {
	case PhysicalVarchar:
		if e.blob && t.ID != TypeGeometry {
			err = e.stringsBlob(v, count, hasNull)
		} else {
			err = e.stringsList(v, count, hasNull)
		}
	case PhysicalStruct:
		if t.ID == TypeVariant && !e.blob {
			if err := variantBeforeQ3(v); err != nil {
				return err
			}
		}
		err = e.structChildren(t, v, count, depth)
	case PhysicalList:
		err = e.list(t, v, count, hasNull, depth)
	case PhysicalArray:
		err = e.array(t, v, count, depth)
	default:
		err = errorf(ErrUnsupportedType, "%s has no vector layout", t)
	}
	if err != nil {
		return err
	}
	e.buf = appendEnd(e.buf)
	return nil
}

// checkValidity checks the mask's length and reports whether a row in
// [0, count) is NULL.
func checkValidity(v *Vector, count int) (bool, error) {
	if v.Validity == nil {
		return false, nil
	}
	if len(v.Validity) < (count+7)/8 {
		return false, errorf(ErrInvalid, "validity of %d bytes for %d rows", len(v.Validity), count)
	}
	full := count / 8
	m := v.Validity
	i := 0
	for ; i+8 <= full; i += 8 {
		if binary.LittleEndian.Uint64(m[i:]) != math.MaxUint64 {
			return true, nil
		}
	}
	for ; i < full; i++ {
		if m[i] != 0xFF {
			return true, nil
		}
	}
	if rest := count % 8; rest != 0 {
		want := byte(1)<<rest - 1
		return m[full]&want != want, nil
	}
	return false, nil
}

// validity writes fields 100 and 101. DuckDB writes the mask exactly when a
// row is NULL, with the bits beyond count set.
func (e *vectorEncoder) validity(v *Vector, count int, hasNull bool) {
	if !hasNull {
		e.buf = append(e.buf, 0x64, 0x00, 0x00)
		return
	}
	n := (count + 63) / 64 * 8
	e.buf = append(e.buf, 0x64, 0x00, 0x01, 0x65, 0x00)
	e.buf = appendUvarint(e.buf, uint64(n))
	start := len(e.buf)
	e.buf = append(e.buf, v.Validity[:min(n, len(v.Validity))]...)
	for len(e.buf) < start+n {
		e.buf = append(e.buf, 0xFF)
	}
	m := e.buf[start:]
	if rest := count % 8; rest != 0 {
		m[count/8] |= ^(byte(1)<<rest - 1)
	}
	for i := (count + 7) / 8; i < n; i++ {
		m[i] = 0xFF
	}
}

// fixed writes a fixed-width vector: one append of Data, then DuckDB's
// placeholder patched into the NULL slots of the appended copy.
func (e *vectorEncoder) fixed(phys PhysicalType, w int, v *Vector, count int, hasNull bool) error {
	if count > math.MaxInt/w || len(v.Data) != w*count {
		return errorf(ErrInvalid, "data of %d bytes for %d rows of width %d", len(v.Data), count, w)
	}
	n := w * count
	e.buf = slices.Grow(e.buf, n+(count+63)/64*8+32)
	e.validity(v, count, hasNull)
	e.buf = append(e.buf, 0x66, 0x00)
	e.buf = appendUvarint(e.buf, uint64(n))
	start := len(e.buf)
	e.buf = append(e.buf, v.Data...)
	if hasNull {
		patchNulls(e.buf[start:], v.Validity, count, w, phys.nullSlot())
	}
	e.buf = appendEnd(e.buf)
	return nil
}

// patchNulls writes slot into every NULL row of data.
func patchNulls(data, validity []byte, count, w int, slot []byte) {
	nbytes := (count + 7) / 8
	for i := 0; i < nbytes; i++ {
		if i+8 <= nbytes && binary.LittleEndian.Uint64(validity[i:]) == math.MaxUint64 {
			i += 7
			continue
		}
		nulls := ^validity[i]
		for nulls != 0 {
			row := i*8 + bits.TrailingZeros8(nulls)
			if row >= count {
				break
			}
			copy(data[row*w:row*w+w], slot)
			nulls &= nulls - 1
		}
	}
}

// checkOffsets validates the string offsets of v.
func checkOffsets(v *Vector, count int) error {
	if len(v.Offsets) != count+1 {
		return errorf(ErrInvalid, "%d string offsets for %d rows", len(v.Offsets), count)
	}
	prev := v.Offsets[0]
	for _, o := range v.Offsets[1:] {
		if o < prev {
			return errorf(ErrInvalid, "string offsets decrease")
		}
		prev = o
	}
	if int64(prev) > int64(len(v.Bytes)) {
		return errorf(ErrInvalid, "string offset %d beyond %d bytes", prev, len(v.Bytes))
	}
	return nil
}

// stringsList writes field 102 as a list of strings (V1_5_0 layout); NULL
// rows carry DuckDB's NULL marker, the 1-byte string 0x80.
func (e *vectorEncoder) stringsList(v *Vector, count int, hasNull bool) error {
	if err := checkOffsets(v, count); err != nil {
		return err
	}
	off := v.Offsets
	// Grow once for the worst case (a uint32 length takes at most 5 bytes),
	// then write by index: this loop runs once per row of every string
	// column of every result.
	b := slices.Grow(e.buf, int(off[count]-off[0])+5*count+12)
	b = append(b, 0x66, 0x00)
	b = appendUvarint(b, uint64(count))
	p := len(b)
	b = b[:cap(b)]
	for i := 0; i < count; i++ {
		if hasNull && !v.IsValid(i) {
			b[p], b[p+1] = 0x01, 0x80
			p += 2
			continue
		}
		o, n := int(off[i]), int(off[i+1]-off[i])
		if n < 0x80 {
			b[p] = byte(n)
			p++
		} else {
			p += len(appendUvarint(b[p:p], uint64(n)))
		}
		// Most strings are short: a fixed 16-byte move where both sides
		// have room for it, not a call to memmove per string. The next
		// string overwrites what spilled past this one.
		if n <= 16 && o+16 <= len(v.Bytes) && p+16 <= len(b) {
			*(*[16]byte)(b[p:]) = *(*[16]byte)(v.Bytes[o:])
			p += n
		} else {
			p += copy(b[p:], v.Bytes[o:o+n])
		}
	}
	e.buf = b[:p]
	return nil
}

// stringsBlob writes fields 107-109 (V2_0_0 layout): the total byte count,
// the uint32 length of every row (0 for NULL) and the bytes of the non-NULL
// rows.
func (e *vectorEncoder) stringsBlob(v *Vector, count int, hasNull bool) error {
	if err := checkOffsets(v, count); err != nil {
		return err
	}
	off := v.Offsets
	total := uint64(off[count] - off[0])
	if hasNull {
		total = 0
		for i := 0; i < count; i++ {
			if v.IsValid(i) {
				total += uint64(off[i+1] - off[i])
			}
		}
	}
	e.buf = slices.Grow(e.buf, int(total)+4*count+32)
	e.buf = append(e.buf, 0x6B, 0x00)
	e.buf = appendUvarint(e.buf, total)
	e.buf = append(e.buf, 0x6C, 0x00)
	e.buf = appendUvarint(e.buf, uint64(4*count))
	for i := 0; i < count; i++ {
		n := off[i+1] - off[i]
		if hasNull && !v.IsValid(i) {
			n = 0
		}
		e.buf = binary.LittleEndian.AppendUint32(e.buf, n)
	}
	e.buf = append(e.buf, 0x6D, 0x00)
	e.buf = appendUvarint(e.buf, total)
	if !hasNull {
		e.buf = append(e.buf, v.Bytes[off[0]:off[count]]...)
		return nil
	}
	for i := 0; i < count; i++ {
		if v.IsValid(i) {
			e.buf = append(e.buf, v.Bytes[off[i]:off[i+1]]...)
		}
	}
	return nil
}

func (e *vectorEncoder) structChildren(t *LogicalType, v *Vector, count, depth int) error {
	if len(v.Children) != len(t.Fields) {
		return errorf(ErrInvalid, "%s vector with %d children", t, len(v.Children))
	}
	e.buf = appendField(e.buf, 103)
	e.buf = appendUvarint(e.buf, uint64(len(t.Fields)))
	for i := range t.Fields {
		if err := e.vector(&t.Fields[i].Type, v.Children[i], count, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// variantTimestampNanosTZ is the VARIANT value type id of a TIMESTAMPTZ_NS
// (DuckDB 2.0's VariantLogicalType::TIMESTAMP_NANOS_TZ). DuckDB 1.5's
// VARIANT ids end at 33 (GEOMETRY).
const variantTimestampNanosTZ = 34

// variantBeforeQ3 refuses a VARIANT vector holding a TIMESTAMPTZ_NS value
// for a generation before Q3, as a TIMESTAMP_TZ_NS column is refused: a
// DuckDB 1.5 client does not know the value type. It looks at the type ids
// of the values list (field "values", its STRUCT's "type_id"); a vector of
// another shape is left to the encoder's checks.
func variantBeforeQ3(v *Vector) error {
	if len(v.Children) != 4 || v.Children[2] == nil || len(v.Children[2].Children) != 1 {
		return nil
	}
	values := v.Children[2].Children[0]
	if values == nil || len(values.Children) != 2 || values.Children[0] == nil {
		return nil
	}
	typeIDs := values.Children[0]
	if typeIDs.Validity != nil && len(typeIDs.Validity) < (typeIDs.Count+7)/8 {
		return nil
	}
	for i, id := range typeIDs.Data[:min(len(typeIDs.Data), typeIDs.Count)] {
		if id == variantTimestampNanosTZ && typeIDs.IsValid(i) {
			return errorf(ErrUnsupportedType, "VARIANT holding a TIMESTAMPTZ_NS (TIMESTAMP_TZ_NS) value, which does not exist before Q3")
		}
	}
	return nil
}

// list writes a LIST or MAP vector. Entries of NULL rows are written as 0/0,
// as DuckDB's serializer does whatever its memory holds; entries of valid
// rows must lie in the child.
func (e *vectorEncoder) list(t *LogicalType, v *Vector, count int, hasNull bool, depth int) error {
	if len(v.Entries) != count || len(v.Children) != 1 {
		return errorf(ErrInvalid, "%s vector with %d entries and %d children for %d rows",
			t, len(v.Entries), len(v.Children), count)
	}
	if v.ListSize > math.MaxInt {
		return errorf(ErrInvalid, "list size %d", v.ListSize)
	}
	for i, le := range v.Entries {
		if (!hasNull || v.IsValid(i)) && (le.Length > v.ListSize || le.Offset > v.ListSize-le.Length) {
			return errorf(ErrInvalid, "list entry %d (%d+%d) beyond list size %d", i, le.Offset, le.Length, v.ListSize)
		}
	}
	e.buf = slices.Grow(e.buf, 10*count+32)
	e.buf = appendField(e.buf, 104)
	e.buf = appendUvarint(e.buf, v.ListSize)
	e.buf = appendField(e.buf, 105)
	e.buf = appendUvarint(e.buf, uint64(count))
	for i, le := range v.Entries {
		if hasNull && !v.IsValid(i) {
			le = ListEntry{}
		}
		e.buf = append(e.buf, 0x64, 0x00)
		e.buf = appendUvarint(e.buf, le.Offset)
		e.buf = append(e.buf, 0x65, 0x00)
		e.buf = appendUvarint(e.buf, le.Length)
		e.buf = appendEnd(e.buf)
	}
	e.buf = appendField(e.buf, 106)
	return e.vector(t.Child, v.Children[0], int(v.ListSize), depth+1)
}

func (e *vectorEncoder) array(t *LogicalType, v *Vector, count, depth int) error {
	if len(v.Children) != 1 {
		return errorf(ErrInvalid, "%s vector with %d children", t, len(v.Children))
	}
	n := int(t.ArraySize)
	if n > 0 && count > math.MaxInt/n {
		return errorf(ErrInvalid, "%d rows of %s", count, t)
	}
	e.buf = appendField(e.buf, 103)
	e.buf = appendUvarint(e.buf, uint64(n))
	e.buf = appendField(e.buf, 104)
	return e.vector(t.Child, v.Children[0], count*n, depth+1)
}

// vector reads one Vector object of count rows and returns it flat.
func (d *decoder) vector(t *LogicalType, count, depth int) (*Vector, error) {
	r := d.r
	if depth > d.lim.MaxDepth {
		return nil, r.errorf(r.off, ErrLimit, "vector nesting deeper than %d", d.lim.MaxDepth)
	}
	if count > d.lim.MaxVectorRows {
		return nil, r.errorf(r.off, ErrLimit, "vector of %d rows (limit %d)", count, d.lim.MaxVectorRows)
	}
	if !r.OptionalField(90) {
		return d.flat(t, count, depth)
	}
	off := r.off
	vt, err := r.ReadUint8()
	if err != nil {
		return nil, err
	}
	switch vt {
	case vectorFlat:
		return d.flat(t, count, depth)
	case vectorConstant:
		src, err := d.flat(t, 1, depth)
		if err != nil || d.scan {
			return src, err
		}
		if err := d.charge(4 * int64(count)); err != nil {
			return nil, err
		}
		return d.gather(src, make([]uint32, count))
	case vectorDictionary:
		return d.dictionary(t, count, depth)
	case vectorSequence:
		return d.sequence(t, count)
	}
	return nil, r.errorf(off, ErrMalformed, "vector type %d", vt)
}

// charge takes n bytes from the budget for materialising compressed
// vectors.
func (d *decoder) charge(n int64) error {
	if n < 0 || n > d.budget {
		return d.r.errorf(d.r.off, ErrLimit, "materialising compressed vectors needs more than %d bytes", d.lim.MaxExpandBytes)
	}
	d.budget -= n
	return nil
}

func (d *decoder) dictionary(t *LogicalType, count, depth int) (*Vector, error) {
	r := d.r
	if err := r.ExpectField(91); err != nil {
		return nil, err
	}
	raw, err := r.ReadBlock(4 * count)
	if err != nil {
		return nil, err
	}
	if err := r.ExpectField(92); err != nil {
		return nil, err
	}
	off := r.off
	n, err := r.ReadUvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(d.lim.MaxVectorRows) {
		return nil, r.errorf(off, ErrLimit, "dictionary of %d rows", n)
	}
	dict, err := d.flat(t, int(n), depth)
	if err != nil {
		return nil, err
	}
	if d.scan {
		for i := 0; i < count; i++ {
			if s := binary.LittleEndian.Uint32(raw[4*i:]); uint64(s) >= n {
				return nil, r.errorf(off, ErrMalformed, "dictionary index %d beyond %d entries", s, n)
			}
		}
		return dict, nil
	}
	if err := d.charge(4 * int64(count)); err != nil {
		return nil, err
	}
	sel := make([]uint32, count)
	for i := range sel {
		sel[i] = binary.LittleEndian.Uint32(raw[4*i:])
		if uint64(sel[i]) >= n {
			return nil, r.errorf(off, ErrMalformed, "dictionary index %d beyond %d entries", sel[i], n)
		}
	}
	return d.gather(dict, sel)
}

func (d *decoder) sequence(t *LogicalType, count int) (*Vector, error) {
	r := d.r
	off := r.off
	phys := t.Physical()
	switch phys {
	case PhysicalInt8, PhysicalInt16, PhysicalInt32, PhysicalInt64,
		PhysicalUint8, PhysicalUint16, PhysicalUint32, PhysicalUint64:
	default:
		return nil, r.errorf(off, ErrMalformed, "sequence vector of %s", t)
	}
	if err := r.ExpectField(91); err != nil {
		return nil, err
	}
	start, err := r.ReadVarint()
	if err != nil {
		return nil, err
	}
	if err := r.ExpectField(92); err != nil {
		return nil, err
	}
	inc, err := r.ReadVarint()
	if err != nil {
		return nil, err
	}
	if err := r.ExpectEnd(); err != nil {
		return nil, err
	}
	if d.scan {
		return &Vector{Type: *t, Count: count}, nil
	}
	w := phys.width()
	if err := d.charge(int64(w) * int64(count)); err != nil {
		return nil, err
	}
	data := make([]byte, w*count)
	var le [8]byte
	for i := 0; i < count; i++ {
		binary.LittleEndian.PutUint64(le[:], uint64(start+int64(i)*inc))
		copy(data[i*w:], le[:w])
	}
	return &Vector{Type: *t, Count: count, Data: data}, nil
}

// flat reads the fields of a flat vector (after any field 90) through the
// end of the object.
func (d *decoder) flat(t *LogicalType, count, depth int) (*Vector, error) {
	r := d.r
	v := &Vector{Type: *t, Count: count}
	var err error
	if t.ID == TypeGeometry && r.OptionalField(99) {
		if v.GeometryFormat, err = r.ReadUint8(); err != nil {
			return nil, err
		}
	}
	if err := r.ExpectField(100); err != nil {
		return nil, err
	}
	hasMask, err := r.ReadBool()
	if err != nil {
		return nil, err
	}
	if hasMask {
		if err := r.ExpectField(101); err != nil {
			return nil, err
		}
		if v.Validity, err = r.ReadBlock((count + 63) / 64 * 8); err != nil {
			return nil, err
		}
	}
	phys := t.Physical()
	switch phys {
	case PhysicalVarchar:
		blob := t.ID != TypeGeometry && r.OptionalField(107)
		if d.scan && blob != (d.gen >= Q3 && t.ID != TypeGeometry) {
			return nil, r.errorf(r.off, ErrMalformed, "%s strings in the wrong layout for generation Q%d", t, d.gen)
		}
		if blob {
			err = d.stringsBlob(v)
		} else {
			err = d.stringsList(v)
		}
	case PhysicalStruct:
		err = d.structChildren(v, depth)
	case PhysicalList:
		err = d.list(v, depth)
	case PhysicalArray:
		err = d.array(v, depth)
	default:
		w := phys.width()
		if w == 0 {
			return nil, r.errorf(r.off, ErrUnsupportedType, "%s has no vector layout", t)
		}
		if err = r.ExpectField(102); err == nil {
			v.Data, err = r.ReadBlock(w * count)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := r.ExpectEnd(); err != nil {
		return nil, err
	}
	return v, nil
}

// stringsList reads field 102, a list of count strings, copying them into
// one buffer. NULL rows (DuckDB writes the marker 0x80) become empty.
func (d *decoder) stringsList(v *Vector) error {
	r := d.r
	if err := r.ExpectField(102); err != nil {
		return err
	}
	off := r.off
	n, err := r.ReadCount(1)
	if err != nil {
		return err
	}
	if n != v.Count {
		return r.errorf(off, ErrMalformed, "%d strings for %d rows", n, v.Count)
	}
	start := r.off
	if err := r.skipStrings(n); err != nil {
		return err
	}
	// Every string has a length byte at least, so what skipStrings
	// consumed bounds the valid rows' bytes from above.
	bound := r.off - start - n
	if uint64(bound) > math.MaxUint32 {
		// Only the valid rows' bytes count against the limit.
		if err := r.validBytesWithin(start, n, v, off); err != nil {
			return err
		}
	}
	if d.scan {
		return nil
	}
	// Second pass, with the bounds checked: copy the valid rows' bytes
	// into one allocation.
	v.Offsets = make([]uint32, n+1)
	v.Bytes = make([]byte, 0, bound)
	buf, at := r.buf, start
	for i := 0; i < n; i++ {
		var lo, hi int
		if buf[at] < 0x80 {
			lo = at + 1
			hi = lo + int(buf[at])
		} else {
			r.off = at
			lo, hi, _ = r.nextString() // checked by skipStrings
		}
		at = hi
		if v.IsValid(i) {
			v.Bytes = append(v.Bytes, buf[lo:hi]...)
		}
		v.Offsets[i+1] = uint32(len(v.Bytes))
	}
	r.off = at
	return nil
}

// validBytesWithin checks that the valid rows among the n strings from
// start hold at most math.MaxUint32 bytes, the most a vector's offsets
// address. The strings were checked by skipStrings.
func (r *Reader) validBytesWithin(start, n int, v *Vector, off int) error {
	end := r.off
	r.off = start
	total := 0
	for i := 0; i < n; i++ {
		lo, hi, _ := r.nextString()
		if v.IsValid(i) {
			total += hi - lo
		}
	}
	r.off = end
	if uint64(total) > math.MaxUint32 {
		return r.errorf(off, ErrLimit, "%d string bytes in one vector", total)
	}
	return nil
}

// skipStrings consumes n length-prefixed strings, checking only that each
// lies within the input: a router's check of chunks it forwards, which
// walks every string of a result. Its loop keeps the offset in a local and
// inlines the one-byte lengths that nearly every string has, since a call
// per string was a tenth of a router's CPU in a bulk scan.
func (r *Reader) skipStrings(n int) error {
	buf, off := r.buf, r.off
	for i := 0; i < n; i++ {
		if off < len(buf) && buf[off] < 0x80 {
			next := off + 1 + int(buf[off])
			if next > len(buf) {
				return r.errorf(off, ErrTruncated, "string of %d bytes with %d remaining", next-off-1, len(buf)-off-1)
			}
			off = next
			continue
		}
		r.off = off
		if _, _, err := r.nextString(); err != nil {
			return err
		}
		off = r.off
	}
	r.off = off
	return nil
}

// nextString consumes a length-prefixed string and returns its bounds in
// r.buf. Lengths below 128, one byte on the wire, take a fast path.
func (r *Reader) nextString() (lo, hi int, err error) {
	if r.off < len(r.buf) && r.buf[r.off] < 0x80 {
		lo = r.off + 1
		hi = lo + int(r.buf[r.off])
		if hi > len(r.buf) {
			return 0, 0, r.errorf(r.off, ErrTruncated, "string of %d bytes with %d remaining", hi-lo, len(r.buf)-lo)
		}
		r.off = hi
		return lo, hi, nil
	}
	n, err := r.readLen("string")
	if err != nil {
		return 0, 0, err
	}
	lo = r.off
	r.off += n
	return lo, r.off, nil
}

// stringsBlob reads fields 107 (already consumed), 108 and 109. Bytes
// aliases the input.
func (d *decoder) stringsBlob(v *Vector) error {
	r := d.r
	off := r.off
	total, err := r.ReadOptIdx()
	if err != nil {
		return err
	}
	if !total.Valid || total.Value > math.MaxUint32 {
		return r.errorf(off, ErrMalformed, "string byte_data_length %d", total.Value)
	}
	if err := r.ExpectField(108); err != nil {
		return err
	}
	lens, err := r.ReadBlock(4 * v.Count)
	if err != nil {
		return err
	}
	if err := r.ExpectField(109); err != nil {
		return err
	}
	if v.Bytes, err = r.ReadBlock(int(total.Value)); err != nil {
		return err
	}
	if !d.scan {
		v.Offsets = make([]uint32, v.Count+1)
	}
	var sum uint64
	for i := 0; i < v.Count; i++ {
		sum += uint64(binary.LittleEndian.Uint32(lens[4*i:]))
		if sum > total.Value {
			return r.errorf(off, ErrMalformed, "string lengths exceed byte_data_length %d", total.Value)
		}
		if !d.scan {
			v.Offsets[i+1] = uint32(sum)
		}
	}
	if sum != total.Value {
		return r.errorf(off, ErrMalformed, "string lengths sum to %d, byte_data_length is %d", sum, total.Value)
	}
	return nil
}

func (d *decoder) structChildren(v *Vector, depth int) error {
	r := d.r
	if err := r.ExpectField(103); err != nil {
		return err
	}
	off := r.off
	n, err := r.ReadCount(5)
	if err != nil {
		return err
	}
	if n != len(v.Type.Fields) {
		return r.errorf(off, ErrMalformed, "%d children for %s", n, &v.Type)
	}
	v.Children = make([]*Vector, n)
	for i := range v.Children {
		if v.Children[i], err = d.vector(&v.Type.Fields[i].Type, v.Count, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// list reads fields 104-106. Entries of valid rows must lie inside the
// child; entries of NULL rows that do not are zeroed so that every entry of
// a decoded vector can be sliced safely.
func (d *decoder) list(v *Vector, depth int) error {
	r := d.r
	if err := r.ExpectField(104); err != nil {
		return err
	}
	off := r.off
	size, err := r.ReadUvarint()
	if err != nil {
		return err
	}
	if size > uint64(d.lim.MaxVectorRows) {
		return r.errorf(off, ErrLimit, "list child of %d rows (limit %d)", size, d.lim.MaxVectorRows)
	}
	v.ListSize = size
	if err := r.ExpectField(105); err != nil {
		return err
	}
	off = r.off
	n, err := r.ReadCount(8) // 64 00 xx 65 00 xx FF FF
	if err != nil {
		return err
	}
	if n != v.Count {
		return r.errorf(off, ErrMalformed, "%d list entries for %d rows", n, v.Count)
	}
	// In scan mode the entries are checked one at a time and not kept.
	var scratch ListEntry
	if !d.scan {
		v.Entries = make([]ListEntry, n)
	}
	for i := 0; i < n; i++ {
		off := r.off
		le := &scratch
		if !d.scan {
			le = &v.Entries[i]
		}
		if err := r.ExpectField(100); err != nil {
			return err
		}
		if le.Offset, err = r.ReadUvarint(); err != nil {
			return err
		}
		if err := r.ExpectField(101); err != nil {
			return err
		}
		if le.Length, err = r.ReadUvarint(); err != nil {
			return err
		}
		if err := r.ExpectEnd(); err != nil {
			return err
		}
		if le.Length > size || le.Offset > size-le.Length {
			if v.IsValid(i) {
				return r.errorf(off, ErrMalformed, "list entry %d+%d beyond list size %d", le.Offset, le.Length, size)
			}
			*le = ListEntry{}
		}
	}
	if err := r.ExpectField(106); err != nil {
		return err
	}
	child, err := d.vector(v.Type.Child, int(size), depth+1)
	if err != nil {
		return err
	}
	v.Children = []*Vector{child}
	return nil
}

func (d *decoder) array(v *Vector, depth int) error {
	r := d.r
	if err := r.ExpectField(103); err != nil {
		return err
	}
	off := r.off
	n, err := r.ReadUvarint()
	if err != nil {
		return err
	}
	if n != uint64(v.Type.ArraySize) {
		return r.errorf(off, ErrMalformed, "array_size %d for %s", n, &v.Type)
	}
	rows := uint64(v.Count) * n
	if rows > uint64(d.lim.MaxVectorRows) {
		return r.errorf(off, ErrLimit, "array child of %d rows (limit %d)", rows, d.lim.MaxVectorRows)
	}
	if err := r.ExpectField(104); err != nil {
		return err
	}
	child, err := d.vector(v.Type.Child, int(rows), depth+1)
	if err != nil {
		return err
	}
	v.Children = []*Vector{child}
	return nil
}

// gather materialises rows sel of src as a new flat vector; it implements
// constant (all zeros) and dictionary vectors. LIST children are shared with
// src, not copied.
func (d *decoder) gather(src *Vector, sel []uint32) (*Vector, error) {
	n := len(sel)
	v := &Vector{Type: src.Type, Count: n, GeometryFormat: src.GeometryFormat}
	if src.Validity != nil {
		mask := make([]byte, (n+63)/64*8)
		anyNull := false
		for i, s := range sel {
			if src.IsValid(int(s)) {
				mask[i>>3] |= 1 << (uint(i) & 7)
			} else {
				anyNull = true
			}
		}
		if anyNull {
			for i := n; i < len(mask)*8; i++ {
				mask[i>>3] |= 1 << (uint(i) & 7)
			}
			v.Validity = mask
		}
		if err := d.charge(int64(len(mask))); err != nil {
			return nil, err
		}
	}
	phys := src.Type.Physical()
	switch phys {
	case PhysicalVarchar:
		var total int64
		for _, s := range sel {
			total += int64(src.Offsets[s+1] - src.Offsets[s])
		}
		if err := d.charge(total + 4*int64(n)); err != nil {
			return nil, err
		}
		if total > math.MaxUint32 {
			return nil, d.r.errorf(d.r.off, ErrLimit, "%d string bytes in one vector", total)
		}
		v.Offsets = make([]uint32, n+1)
		v.Bytes = make([]byte, 0, total)
		for i, s := range sel {
			v.Bytes = append(v.Bytes, src.Bytes[src.Offsets[s]:src.Offsets[s+1]]...)
			v.Offsets[i+1] = uint32(len(v.Bytes))
		}
	case PhysicalStruct:
		v.Children = make([]*Vector, len(src.Children))
		for i, c := range src.Children {
			var err error
			if v.Children[i], err = d.gather(c, sel); err != nil {
				return nil, err
			}
		}
	case PhysicalList:
		if err := d.charge(16 * int64(n)); err != nil {
			return nil, err
		}
		v.Entries = make([]ListEntry, n)
		for i, s := range sel {
			v.Entries[i] = src.Entries[s]
		}
		v.ListSize = src.ListSize
		v.Children = src.Children
	case PhysicalArray:
		size := int64(src.Type.ArraySize)
		if int64(n)*size > int64(d.lim.MaxVectorRows) {
			return nil, d.r.errorf(d.r.off, ErrLimit, "array child of %d rows", int64(n)*size)
		}
		if err := d.charge(4 * int64(n) * size); err != nil {
			return nil, err
		}
		childSel := make([]uint32, 0, int64(n)*size)
		for _, s := range sel {
			for j := int64(0); j < size; j++ {
				childSel = append(childSel, uint32(int64(s)*size+j))
			}
		}
		child, err := d.gather(src.Children[0], childSel)
		if err != nil {
			return nil, err
		}
		v.Children = []*Vector{child}
	default:
		w := phys.width()
		if err := d.charge(int64(w) * int64(n)); err != nil {
			return nil, err
		}
		v.Data = make([]byte, w*n)
		for i, s := range sel {
			copy(v.Data[i*w:i*w+w], src.Data[int(s)*w:])
		}
	}
	return v, nil
}
