package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Version is the encoding version this package writes and reads.
const Version = 1

// recordBatch is the type byte of an encoded Batch; other record types may
// follow in later versions.
const recordBatch = 'B'

// headerLen is the version and type bytes; trailerLen the CRC-32C.
const (
	headerLen  = 2
	trailerLen = 4
)

// tagNestedAppend is written instead of KindAppend for an Append with
// Parents, which follow as a count and names before the schema. It is a tag
// of the encoding, not a Kind: a decoder that predates nested schemas
// refuses such an entry as corrupt instead of appending to a schema of the
// same name at the top.
const tagNestedAppend = 0x80 | byte(KindAppend)

// Sentinel errors. Decode errors wrap ErrCorrupt or ErrVersion; encode errors
// wrap ErrInvalid.
var (
	ErrCorrupt = errors.New("wal: corrupt entry")
	ErrVersion = errors.New("wal: unsupported entry version")
	ErrInvalid = errors.New("wal: invalid entry")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarshalBinary encodes the batch.
func (b Batch) MarshalBinary() ([]byte, error) {
	return b.AppendBinary(nil)
}

// AppendBinary appends the encoding of the batch to dst: a version byte, a
// type byte, the commands, and a CRC-32C of everything before it.
func (b Batch) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, Version, recordBatch)
	dst = binary.AppendUvarint(dst, uint64(len(b.Commands)))
	for i, c := range b.Commands {
		var err error
		if dst, err = appendCommand(dst, c); err != nil {
			return nil, fmt.Errorf("command %d: %w", i, err)
		}
	}
	sum := crc32.Checksum(dst[start:], castagnoli)
	return binary.LittleEndian.AppendUint32(dst, sum), nil
}

func appendCommand(dst []byte, c Command) ([]byte, error) {
	if len(c.Key) > MaxKeyLen {
		return nil, fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalid, len(c.Key), MaxKeyLen)
	}
	dst = binary.AppendVarint(dst, c.Timestamp)
	dst = appendBytes(dst, c.Key)
	return appendEntry(dst, c.Entry, true)
}

func appendEntry(dst []byte, e Entry, top bool) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil entry", ErrInvalid)
	}
	dst = append(dst, byte(e.Kind()))
	switch e := e.(type) {
	case Statement:
		var flags byte
		if e.Returning {
			flags |= flagReturning
		}
		dst = appendString(dst, e.SQL)
		dst = append(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(len(e.Params)))
		for i, p := range e.Params {
			var err error
			if dst, err = appendParam(dst, p); err != nil {
				return nil, fmt.Errorf("param %d: %w", i, err)
			}
		}
	case Append:
		if len(e.Parents) > 0 {
			dst[len(dst)-1] = tagNestedAppend
			dst = binary.AppendUvarint(dst, uint64(len(e.Parents)))
			for _, p := range e.Parents {
				dst = appendString(dst, p)
			}
		}
		dst = appendString(dst, e.Schema)
		dst = appendString(dst, e.Table)
		dst = appendBytes(dst, e.Chunk)
	case Txn:
		if !top {
			return nil, fmt.Errorf("%w: nested txn", ErrInvalid)
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Entries)))
		for i, sub := range e.Entries {
			if sub != nil && sub.Kind() == KindNoOp {
				return nil, fmt.Errorf("%w: txn entry %d: noop inside txn", ErrInvalid, i)
			}
			var err error
			if dst, err = appendEntry(dst, sub, false); err != nil {
				return nil, fmt.Errorf("txn entry %d: %w", i, err)
			}
		}
	case NoOp:
	case Stage:
		if !top {
			return nil, fmt.Errorf("%w: stage inside txn", ErrInvalid)
		}
		if len(e.Chunks) == 0 {
			return nil, fmt.Errorf("%w: stage without chunks", ErrInvalid)
		}
		dst = binary.AppendUvarint(dst, e.ID)
		dst = binary.AppendUvarint(dst, uint64(e.Part))
		dst = binary.AppendUvarint(dst, e.Offset)
		dst = binary.AppendUvarint(dst, uint64(len(e.Chunks)))
		for _, c := range e.Chunks {
			dst = appendBytes(dst, c)
		}
	case Staged:
		dst = binary.AppendUvarint(dst, e.ID)
		dst = binary.AppendUvarint(dst, uint64(e.Part))
		dst = binary.AppendUvarint(dst, e.Rows)
		dst = binary.AppendUvarint(dst, uint64(len(e.Parents)))
		for _, p := range e.Parents {
			dst = appendString(dst, p)
		}
		dst = appendString(dst, e.Schema)
		dst = appendString(dst, e.Table)
	case Unstage:
		if !top {
			return nil, fmt.Errorf("%w: unstage inside txn", ErrInvalid)
		}
		dst = binary.AppendUvarint(dst, e.ID)
		dst = binary.AppendVarint(dst, e.IdleBefore)
	default:
		return nil, fmt.Errorf("%w: unknown entry type %T", ErrInvalid, e)
	}
	return dst, nil
}

// flagReturning marks a Statement whose rows are collected.
const flagReturning = 1

func appendParam(dst []byte, p Param) ([]byte, error) {
	dst = append(dst, byte(p.typ))
	switch p.typ {
	case ParamNull:
	case ParamBool:
		dst = append(dst, byte(p.num))
	case ParamInt64, ParamTimestamp, ParamDate:
		dst = binary.AppendVarint(dst, int64(p.num))
	case ParamUint64:
		dst = binary.AppendUvarint(dst, p.num)
	case ParamFloat64:
		dst = binary.LittleEndian.AppendUint64(dst, p.num)
	case ParamString, ParamBlob:
		dst = appendString(dst, p.str)
	case ParamUUID:
		if len(p.str) != 16 {
			return nil, fmt.Errorf("%w: uuid of %d bytes", ErrInvalid, len(p.str))
		}
		dst = append(dst, p.str...)
	default:
		return nil, fmt.Errorf("%w: unknown parameter type %d", ErrInvalid, p.typ)
	}
	return dst, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Decode decodes a Batch written by AppendBinary. It checks the version, the
// checksum and every length against the input, so it never allocates more
// than the input's size nor panics on hostile input. The returned batch does
// not alias data.
func Decode(data []byte) (Batch, error) {
	if len(data) < headerLen+trailerLen {
		return Batch{}, fmt.Errorf("%w: %d bytes is shorter than header and checksum", ErrCorrupt, len(data))
	}
	if data[0] != Version {
		return Batch{}, fmt.Errorf("%w: version %d, want %d", ErrVersion, data[0], Version)
	}
	body, tail := data[:len(data)-trailerLen], data[len(data)-trailerLen:]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(tail); got != want {
		return Batch{}, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if body[1] != recordBatch {
		return Batch{}, fmt.Errorf("%w: record type %#x, want batch", ErrCorrupt, body[1])
	}
	d := decoder{buf: body, off: headerLen}
	n := d.count("commands")
	var b Batch
	if n > 0 {
		b.Commands = make([]Command, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		b.Commands = append(b.Commands, d.command())
	}
	if d.err == nil && d.off != len(d.buf) {
		d.fail("%d trailing bytes", len(d.buf)-d.off)
	}
	if d.err != nil {
		return Batch{}, d.err
	}
	return b, nil
}

// decoder reads from buf; the first error sticks and every later read
// returns zero values.
type decoder struct {
	buf []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: offset %d: %s", ErrCorrupt, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) remaining() int { return len(d.buf) - d.off }

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.remaining() < 1 {
		d.fail("truncated reading %s", what)
		return 0
	}
	c := d.buf[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if !d.consumed(what, n) {
		return 0
	}
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf[d.off:])
	if !d.consumed(what, n) {
		return 0
	}
	return v
}

// consumed advances past a varint of n bytes as encoding/binary reports it:
// 0 means the input ended, a negative n that the value overflowed.
func (d *decoder) consumed(what string, n int) bool {
	switch {
	case n == 0:
		d.fail("truncated reading %s", what)
	case n < 0:
		d.fail("%s overflows 64 bits", what)
	default:
		d.off += n
		return true
	}
	return false
}

// count reads a number of elements; each takes at least one byte, so a count
// beyond the remaining input is corrupt and is refused before allocating.
func (d *decoder) count(what string) int {
	n := d.uvarint(what + " count")
	if d.err == nil && n > uint64(d.remaining()) {
		d.fail("%s count %d exceeds remaining %d bytes", what, n, d.remaining())
		return 0
	}
	return int(n)
}

// bytes reads a length-prefixed byte string, limited to max bytes.
func (d *decoder) bytes(what string, max uint64) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > max {
		d.fail("%s length %d exceeds limit %d", what, n, max)
		return nil
	}
	if n > uint64(d.remaining()) {
		d.fail("%s length %d exceeds remaining %d bytes", what, n, d.remaining())
		return nil
	}
	b := d.buf[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *decoder) string(what string) string {
	return string(d.bytes(what, math.MaxUint64))
}

func (d *decoder) command() Command {
	var c Command
	c.Timestamp = d.varint("timestamp")
	if key := d.bytes("key", MaxKeyLen); len(key) > 0 {
		c.Key = append([]byte(nil), key...)
	}
	c.Entry = d.entry(true)
	return c
}

func (d *decoder) entry(top bool) Entry {
	kind := Kind(d.byte("entry kind"))
	if d.err != nil {
		return nil
	}
	switch kind {
	case KindStatement:
		var s Statement
		s.SQL = d.string("sql")
		flags := d.byte("statement flags")
		if flags&^flagReturning != 0 {
			d.fail("unknown statement flags %#x", flags)
		}
		s.Returning = flags&flagReturning != 0
		n := d.count("params")
		if n > 0 {
			s.Params = make([]Param, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			s.Params = append(s.Params, d.param())
		}
		return s
	case KindAppend, Kind(tagNestedAppend):
		var a Append
		if kind == Kind(tagNestedAppend) {
			n := d.count("parent schemas")
			if d.err == nil && n == 0 {
				d.fail("nested append without parent schemas")
			}
			for i := 0; i < n && d.err == nil; i++ {
				a.Parents = append(a.Parents, d.string("parent schema"))
			}
		}
		a.Schema = d.string("schema")
		a.Table = d.string("table")
		if chunk := d.bytes("chunk", math.MaxUint64); len(chunk) > 0 {
			a.Chunk = append([]byte(nil), chunk...)
		}
		return a
	case KindTxn:
		if !top {
			d.fail("nested txn")
			return nil
		}
		var t Txn
		n := d.count("txn entries")
		if n > 0 {
			t.Entries = make([]Entry, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			t.Entries = append(t.Entries, d.entry(false))
		}
		return t
	case KindNoOp:
		if !top {
			d.fail("noop inside txn")
			return nil
		}
		return NoOp{}
	case KindStage:
		if !top {
			d.fail("stage inside txn")
			return nil
		}
		s := Stage{ID: d.uvarint("stage id"), Part: d.part(), Offset: d.uvarint("stage offset")}
		n := d.count("stage chunks")
		if d.err == nil && n == 0 {
			d.fail("stage without chunks")
		}
		if d.err != nil {
			return nil
		}
		s.Chunks = make([][]byte, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			s.Chunks = append(s.Chunks, append([]byte(nil), d.bytes("stage chunk", math.MaxUint64)...))
		}
		return s
	case KindStaged:
		s := Staged{ID: d.uvarint("stage id"), Part: d.part(), Rows: d.uvarint("staged rows")}
		n := d.count("parent schemas")
		for i := 0; i < n && d.err == nil; i++ {
			s.Parents = append(s.Parents, d.string("parent schema"))
		}
		s.Schema = d.string("schema")
		s.Table = d.string("table")
		return s
	case KindUnstage:
		if !top {
			d.fail("unstage inside txn")
			return nil
		}
		return Unstage{ID: d.uvarint("stage id"), IdleBefore: d.varint("idle before")}
	}
	d.fail("unknown entry kind %d", kind)
	return nil
}

// part reads a stage part number.
func (d *decoder) part() uint32 {
	v := d.uvarint("stage part")
	if v > math.MaxUint32 {
		d.fail("stage part %d out of range", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) param() Param {
	p := Param{typ: ParamType(d.byte("param type"))}
	switch p.typ {
	case ParamNull:
	case ParamBool:
		switch v := d.byte("bool"); v {
		case 0, 1:
			p.num = uint64(v)
		default:
			d.fail("bool value %d", v)
		}
	case ParamInt64, ParamTimestamp:
		p.num = uint64(d.varint(p.typ.String()))
	case ParamDate:
		v := d.varint("date")
		if v < math.MinInt32 || v > math.MaxInt32 {
			d.fail("date %d out of range", v)
		}
		p.num = uint64(v)
	case ParamUint64:
		p.num = d.uvarint("uint64")
	case ParamFloat64:
		if d.err == nil && d.remaining() < 8 {
			d.fail("truncated reading float64")
		}
		if d.err == nil {
			p.num = binary.LittleEndian.Uint64(d.buf[d.off:])
			d.off += 8
		}
	case ParamString, ParamBlob:
		p.str = d.string(p.typ.String())
	case ParamUUID:
		if d.err == nil && d.remaining() < 16 {
			d.fail("truncated reading uuid")
		}
		if d.err == nil {
			p.str = string(d.buf[d.off : d.off+16])
			d.off += 16
		}
	default:
		d.fail("unknown parameter type %d", p.typ)
	}
	if d.err != nil {
		return Param{}
	}
	return p
}
