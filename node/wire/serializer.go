package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can branch with errors.Is.
var (
	// ErrTruncated means the input ended before a value, or a length or count
	// promised more bytes than remain.
	ErrTruncated = errors.New("truncated input")
	// ErrMalformed means the input is not a valid encoding: a field id out
	// of order, a varint overflow, a bad bool byte, inconsistent lengths.
	ErrMalformed = errors.New("malformed input")
	// ErrUnsupportedType means a LogicalType that is valid for DuckDB but
	// cannot travel on the wire or is not implemented here (binder-only
	// ids, extension type info, GEOMETRY with a CRS).
	ErrUnsupportedType = errors.New("unsupported logical type")
	// ErrUnsupportedMessage means a message type the generation does not
	// define.
	ErrUnsupportedMessage = errors.New("unsupported message type")
	// ErrLimit means the input is well-formed but exceeds a Limits bound.
	ErrLimit = errors.New("limit exceeded")
	// ErrInvalid means a value handed to an encoder is inconsistent (wrong
	// byte lengths, a field the generation does not carry, ...).
	ErrInvalid = errors.New("invalid value")
)

// FieldEnd is the field id that terminates every object.
const FieldEnd uint16 = 0xFFFF

const unsetIdx = math.MaxUint64

// The append helpers below are the encoders' BinarySerializer primitives:
// each appends one encoding to b and returns the extended slice. Field ids
// are two little-endian bytes, integers LEB128, strings length-prefixed.

func appendField(b []byte, id uint16) []byte { return append(b, byte(id), byte(id>>8)) }

func appendEnd(b []byte) []byte { return append(b, 0xFF, 0xFF) }

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendVarint(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendString(b []byte, s string) []byte {
	b = appendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHugeint(b []byte, h Hugeint) []byte {
	b = appendVarint(b, h.Upper)
	return appendUvarint(b, h.Lower)
}

func appendOptIdx(b []byte, o OptIdx) []byte {
	if !o.Valid {
		return appendUvarint(b, unsetIdx)
	}
	return appendUvarint(b, o.Value)
}

// errorf describes an encoder-side error of the given kind; the public
// entry points add the "wire:" prefix and the context.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, kind)...)
}

// Reader is a cursor over one BinarySerializer encoding. Its methods never
// panic and never allocate more than the remaining input justifies; errors
// name the offset at which decoding failed.
type Reader struct {
	buf []byte
	off int
}

// NewReader returns a Reader positioned at the start of b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Offset returns the number of bytes consumed.
func (r *Reader) Offset() int { return r.off }

// Remaining returns the number of unconsumed bytes.
func (r *Reader) Remaining() int { return len(r.buf) - r.off }

// Rest returns the unconsumed bytes without consuming them. The slice
// aliases the input.
func (r *Reader) Rest() []byte { return r.buf[r.off:] }

// Skip consumes all remaining input.
func (r *Reader) Skip() { r.off = len(r.buf) }

// errorf wraps kind with a description and the offset it refers to.
func (r *Reader) errorf(off int, kind error, format string, args ...any) error {
	return fmt.Errorf("wire: %s at offset %d: %w", fmt.Sprintf(format, args...), off, kind)
}

// PeekField returns the next field id without consuming it.
func (r *Reader) PeekField() (uint16, error) {
	if r.Remaining() < 2 {
		return 0, r.errorf(r.off, ErrTruncated, "reading field id")
	}
	return binary.LittleEndian.Uint16(r.buf[r.off:]), nil
}

// ExpectField consumes the next field id, which must be id. It is used for
// "always" fields; a different id means the peer's schema differs.
func (r *Reader) ExpectField(id uint16) error {
	got, err := r.PeekField()
	if err != nil {
		return err
	}
	if got != id {
		if got == FieldEnd {
			return r.errorf(r.off, ErrMalformed, "expected field %d, found end of object", id)
		}
		return r.errorf(r.off, ErrMalformed, "expected field %d, found field %d", id, got)
	}
	r.off += 2
	return nil
}

// OptionalField consumes the next field id if it is id and reports whether
// it did. It is used for "def" fields, which the writer omits at their
// default.
func (r *Reader) OptionalField(id uint16) bool {
	if got, err := r.PeekField(); err == nil && got == id {
		r.off += 2
		return true
	}
	return false
}

// ExpectEnd consumes the end-of-object marker FF FF.
func (r *Reader) ExpectEnd() error {
	got, err := r.PeekField()
	if err != nil {
		return err
	}
	if got != FieldEnd {
		return r.errorf(r.off, ErrMalformed, "expected end of object, found field %d", got)
	}
	r.off += 2
	return nil
}

// ReadUvarint reads an unsigned LEB128 value of at most 64 bits. Non-minimal
// encodings (padding 0x80 bytes) are accepted as DuckDB accepts them.
func (r *Reader) ReadUvarint() (uint64, error) {
	start := r.off
	var v uint64
	for i := 0; ; i++ {
		if r.off >= len(r.buf) {
			return 0, r.errorf(start, ErrTruncated, "reading varint")
		}
		c := r.buf[r.off]
		r.off++
		if i == 9 && c > 1 {
			return 0, r.errorf(start, ErrMalformed, "varint overflows 64 bits")
		}
		v |= uint64(c&0x7F) << (7 * uint(i))
		if c < 0x80 {
			return v, nil
		}
	}
}

// ReadVarint reads a signed LEB128 value of at most 64 bits.
func (r *Reader) ReadVarint() (int64, error) {
	start := r.off
	var v int64
	for i := 0; ; i++ {
		if r.off >= len(r.buf) {
			return 0, r.errorf(start, ErrTruncated, "reading varint")
		}
		c := r.buf[r.off]
		r.off++
		if i == 9 {
			// The tenth byte holds bit 63 only; the rest must extend its sign.
			if c != 0x00 && c != 0x7F {
				return 0, r.errorf(start, ErrMalformed, "signed varint overflows 64 bits")
			}
			return v | int64(c)<<63, nil
		}
		v |= int64(c&0x7F) << (7 * uint(i))
		if c < 0x80 {
			if shift := 7 * uint(i+1); c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
}

// readUvarintMax reads an unsigned varint and checks it against max, the
// largest value of the target type.
func (r *Reader) readUvarintMax(max uint64, what string) (uint64, error) {
	start := r.off
	v, err := r.ReadUvarint()
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, r.errorf(start, ErrMalformed, "%s %d out of range", what, v)
	}
	return v, nil
}

// ReadUint8 reads an unsigned varint that must fit in 8 bits.
func (r *Reader) ReadUint8() (uint8, error) {
	v, err := r.readUvarintMax(math.MaxUint8, "uint8")
	return uint8(v), err
}

// ReadUint32 reads an unsigned varint that must fit in 32 bits.
func (r *Reader) ReadUint32() (uint32, error) {
	v, err := r.readUvarintMax(math.MaxUint32, "uint32")
	return uint32(v), err
}

// ReadBool reads a bool byte, which must be 0 or 1.
func (r *Reader) ReadBool() (bool, error) {
	if r.off >= len(r.buf) {
		return false, r.errorf(r.off, ErrTruncated, "reading bool")
	}
	c := r.buf[r.off]
	if c > 1 {
		return false, r.errorf(r.off, ErrMalformed, "bool byte 0x%02x", c)
	}
	r.off++
	return c == 1, nil
}

// ReadPresent reads the presence flag of a nullable pointer.
func (r *Reader) ReadPresent() (bool, error) { return r.ReadBool() }

// readLen reads a length prefix and checks that that many bytes remain.
func (r *Reader) readLen(what string) (int, error) {
	start := r.off
	n, err := r.ReadUvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(r.Remaining()) {
		return 0, r.errorf(start, ErrTruncated, "%s of %d bytes with %d remaining", what, n, r.Remaining())
	}
	return int(n), nil
}

// ReadBytes reads a length-prefixed string or block of any length. The
// result aliases the input.
func (r *Reader) ReadBytes() ([]byte, error) {
	n, err := r.readLen("string")
	if err != nil {
		return nil, err
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b, nil
}

// ReadString reads a length-prefixed string and copies it.
func (r *Reader) ReadString() (string, error) {
	b, err := r.ReadBytes()
	return string(b), err
}

// ReadBlock reads a data block whose length the schema fixes at n bytes; a
// different length prefix is an error. The result aliases the input.
func (r *Reader) ReadBlock(n int) ([]byte, error) {
	start := r.off
	got, err := r.ReadUvarint()
	if err != nil {
		return nil, err
	}
	if n < 0 || got != uint64(n) {
		return nil, r.errorf(start, ErrMalformed, "data block of %d bytes, expected %d", got, n)
	}
	if n > r.Remaining() {
		return nil, r.errorf(start, ErrTruncated, "data block of %d bytes with %d remaining", n, r.Remaining())
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b, nil
}

// ReadHugeint reads a signed 128-bit integer.
func (r *Reader) ReadHugeint() (Hugeint, error) {
	upper, err := r.ReadVarint()
	if err != nil {
		return Hugeint{}, err
	}
	lower, err := r.ReadUvarint()
	if err != nil {
		return Hugeint{}, err
	}
	return Hugeint{Upper: upper, Lower: lower}, nil
}

// ReadUhugeint reads an unsigned 128-bit integer.
func (r *Reader) ReadUhugeint() (upper, lower uint64, err error) {
	if upper, err = r.ReadUvarint(); err != nil {
		return 0, 0, err
	}
	if lower, err = r.ReadUvarint(); err != nil {
		return 0, 0, err
	}
	return upper, lower, nil
}

// ReadOptIdx reads an optional_idx.
func (r *Reader) ReadOptIdx() (OptIdx, error) {
	v, err := r.ReadUvarint()
	if err != nil || v == unsetIdx {
		return OptIdx{}, err
	}
	return Idx(v), nil
}

// ReadCount reads a list element count and checks that the remaining input
// can hold that many elements of at least minSize bytes each, so that
// callers may allocate count elements.
func (r *Reader) ReadCount(minSize int) (int, error) {
	start := r.off
	n, err := r.ReadUvarint()
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(r.Remaining()/minSize) {
		return 0, r.errorf(start, ErrTruncated, "list of %d elements with %d bytes remaining", n, r.Remaining())
	}
	return int(n), nil
}

// ReadFloat64 reads a double stored as 8 raw little-endian bytes.
func (r *Reader) ReadFloat64() (float64, error) {
	if r.Remaining() < 8 {
		return 0, r.errorf(r.off, ErrTruncated, "reading double")
	}
	v := binary.LittleEndian.Uint64(r.buf[r.off:])
	r.off += 8
	return math.Float64frombits(v), nil
}

// ReadFloat32 reads a float stored as 4 raw little-endian bytes.
func (r *Reader) ReadFloat32() (float32, error) {
	if r.Remaining() < 4 {
		return 0, r.errorf(r.off, ErrTruncated, "reading float")
	}
	v := binary.LittleEndian.Uint32(r.buf[r.off:])
	r.off += 4
	return math.Float32frombits(v), nil
}
