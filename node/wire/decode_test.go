package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestVarints(t *testing.T) {
	uTests := []struct {
		v   uint64
		hex string
	}{
		{0, "00"}, {127, "7F"}, {128, "80 01"}, {300, "AC 02"}, {math.MaxUint64, "FF FF FF FF FF FF FF FF FF 01"},
	}
	for _, tt := range uTests {
		assertBytes(t, "uleb", appendUvarint(nil, tt.v), hx(t, tt.hex))
		if got, err := NewReader(hx(t, tt.hex)).ReadUvarint(); err != nil || got != tt.v {
			t.Errorf("ReadUvarint(%s) = %d, %v", tt.hex, got, err)
		}
	}
	sTests := []struct {
		v   int64
		hex string
	}{
		{0, "00"}, {-1, "7F"}, {63, "3F"}, {64, "C0 00"}, {-65, "BF 7F"},
		{math.MinInt64, "80 80 80 80 80 80 80 80 80 7F"}, {math.MaxInt64, "FF FF FF FF FF FF FF FF FF 00"},
	}
	for _, tt := range sTests {
		assertBytes(t, "sleb", appendVarint(nil, tt.v), hx(t, tt.hex))
		if got, err := NewReader(hx(t, tt.hex)).ReadVarint(); err != nil || got != tt.v {
			t.Errorf("ReadVarint(%s) = %d, %v", tt.hex, got, err)
		}
	}
	// Non-minimal encodings decode (one Q2 snapshot padded counts to 5 bytes).
	for hexs, want := range map[string]uint64{"81 80 80 80 00": 1, "80 00": 0, "FF 80 80 80 80 80 80 80 80 00": 127} {
		if got, err := NewReader(hx(t, hexs)).ReadUvarint(); err != nil || got != want {
			t.Errorf("non-minimal %s = %d, %v", hexs, got, err)
		}
	}
	if got, err := NewReader(hx(t, "FF 7F")).ReadVarint(); err != nil || got != -1 {
		t.Errorf("non-minimal sleb -1 = %d, %v", got, err)
	}
	for _, bad := range []string{"FF FF FF FF FF FF FF FF FF 02", "80 80 80 80 80 80 80 80 80 80 00"} {
		if _, err := NewReader(hx(t, bad)).ReadUvarint(); !errors.Is(err, ErrMalformed) {
			t.Errorf("overflowing uleb %s: %v", bad, err)
		}
	}
	if _, err := NewReader(hx(t, "80 80 80 80 80 80 80 80 80 01")).ReadVarint(); !errors.Is(err, ErrMalformed) {
		t.Errorf("overflowing sleb accepted: %v", err)
	}
	if _, err := NewReader(hx(t, "80 80")).ReadUvarint(); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated uleb: %v", err)
	}
	if _, err := NewReader(hx(t, "80 02")).ReadUint8(); !errors.Is(err, ErrMalformed) {
		t.Errorf("uint8 of 256: %v", err)
	}
}

func TestReaderErrors(t *testing.T) {
	r := NewReader(hx(t, "01 00 05 02 00"))
	if err := r.ExpectField(2); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "offset 0") {
		t.Errorf("field mismatch: %v", err)
	}
	if r.OptionalField(2) || !r.OptionalField(1) {
		t.Error("OptionalField")
	}
	if _, err := r.ReadBool(); !errors.Is(err, ErrMalformed) {
		t.Errorf("bool 5: %v", err)
	}
	if _, err := NewReader(hx(t, "05 61 62")).ReadString(); !errors.Is(err, ErrTruncated) {
		t.Errorf("short string: %v", err)
	}
	if _, err := NewReader(hx(t, "03 61 62 63")).ReadBlock(4); !errors.Is(err, ErrMalformed) {
		t.Errorf("block length mismatch: %v", err)
	}
	if _, err := NewReader(hx(t, "FF FF FF FF 0F 00")).ReadCount(1); !errors.Is(err, ErrTruncated) {
		t.Errorf("huge count: %v", err)
	}
}

// TestQ1PrepareWithQueryUUID decodes the c853cd38 shape (field 2 present)
// in Q1 and re-encodes it only when asked.
func TestQ1PrepareWithQueryUUID(t *testing.T) {
	body := hx(t, "01 00 01 78  02 00 00 00  FF FF")
	msg := append(AppendHeader(nil, Header{Type: MsgPrepareRequest}), body...)
	_, m, err := DecodeMessage(msg, Q1, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p := m.(*PrepareRequest)
	if !p.HasQueryUUID || p.SQL != "x" {
		t.Errorf("%+v", p)
	}
	if _, _, err := DecodeMessage(append(AppendHeader(nil, Header{Type: MsgPrepareRequest}), hx(t, "01 00 01 78 FF FF")...), Q2, Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("Q2 PREPARE without uuid: %v", err)
	}
}

func TestErrorResponseIgnoresTrailingFields(t *testing.T) {
	msg := append(AppendHeader(nil, Header{Type: MsgErrorResponse}), hx(t, "01 00 02 68 69  02 00 03 61 62 63 03 00 01 FF FF")...)
	_, m, err := DecodeMessage(msg, Q1, Limits{})
	if err != nil || m.(*ErrorResponse).Message != "hi" {
		t.Errorf("%+v %v", m, err)
	}
	msg = append(AppendHeader(nil, Header{Type: MsgErrorResponse}), hx(t, "01 00 02 68 69  05 00 01 FF FF")...)
	if _, m, err := DecodeMessage(msg, Q3, Limits{}); err != nil || m.(*ErrorResponse).Message != "hi" {
		t.Errorf("Q3 with a later field: %+v %v", m, err)
	}
}

// TestErrorResponseQ3 decodes the typed error of a DuckDB 2.0 server, as
// third-party codecs tested against one write it: message (1), exception
// type (2), extra information as key/value objects (3), must-invalidate (4).
func TestErrorResponseQ3(t *testing.T) {
	body := hx(t, "01 00 05 6E 6F 20 74 62"+ // "no tb"
		" 02 00 07 43 61 74 61 6C 6F 67"+ // "Catalog"
		" 03 00 01 00 00 04 6E 61 6D 65 01 00 02 74 62 FF FF"+ // {name: tb}
		" 04 00 01 FF FF")
	_, m, err := DecodeMessage(append(AppendHeader(nil, Header{Type: MsgErrorResponse}), body...), Q3, Limits{})
	want := &ErrorResponse{Message: "no tb", ExceptionType: "Catalog", ExtraInfo: map[string]string{"name": "tb"}, MustInvalidate: true}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Fatalf("decoded %+v, %v; want %+v", m, err, want)
	}
	got, err := AppendMessage(nil, Q3, Header{Type: MsgErrorResponse}, want)
	if err != nil || !bytes.Equal(got, append(AppendHeader(nil, Header{Type: MsgErrorResponse}), body...)) {
		t.Errorf("encoded % x, %v", got, err)
	}
	q1, _ := AppendMessage(nil, Q1, Header{Type: MsgErrorResponse}, want)
	if !bytes.Equal(q1, append(AppendHeader(nil, Header{Type: MsgErrorResponse}), hx(t, "01 00 05 6E 6F 20 74 62 FF FF")...)) {
		t.Errorf("Q1 body % x: a Q1 error carries the message only", q1)
	}
}

func TestDecodeBodyRejectsTrailingBytes(t *testing.T) {
	msg := append(AppendHeader(nil, Header{Type: MsgSuccessResponse}), 0xFF, 0xFF, 0x00)
	if _, _, err := DecodeMessage(msg, Q1, Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("trailing byte: %v", err)
	}
	// A Q1 reader does not know field 7 of CONNECTION_REQUEST.
	msg = append(AppendHeader(nil, Header{Type: MsgConnectionRequest}), hx(t, "07 00 3C FF FF")...)
	if _, _, err := DecodeMessage(msg, Q1, Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("Q3 field in Q1: %v", err)
	}
}

// vectorHex decodes one vector object of type t and count rows.
func decodeVector(t *testing.T, typ LogicalType, count int, in []byte, lim Limits) (*Vector, error) {
	t.Helper()
	d := newDecoder(NewReader(in), lim)
	v, err := d.vector(&typ, count, 1)
	if err == nil && d.r.Remaining() != 0 {
		t.Fatalf("%d bytes left", d.r.Remaining())
	}
	return v, err
}

func TestCompressedVectorsNested(t *testing.T) {
	integer := LogicalType{ID: TypeInteger}
	varchar := LogicalType{ID: TypeVarchar}
	// Constant LIST(INTEGER) [7, NULL] over 3 rows: entries repeat, the child is shared.
	list := LogicalType{ID: TypeList, Child: &integer}
	v, err := decodeVector(t, list, 3, hx(t, `5A 00 02 64 00 00 68 00 02 69 00 01 64 00 00 65 00 02 FF FF
		6A 00 64 00 01 65 00 08 FD FF FF FF FF FF FF FF 66 00 08 07 00 00 00 00 00 00 80 FF FF FF FF`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Entries) != 3 || v.Entries[2] != (ListEntry{0, 2}) || v.Children[0].IsValid(1) {
		t.Errorf("constant list %+v", v)
	}
	// Constant NULL STRUCT(a INTEGER, b VARCHAR) over 2 rows, list-layout child.
	st := LogicalType{ID: TypeStruct, Fields: []Field{{"a", integer}, {"b", varchar}}}
	v, err = decodeVector(t, st, 2, hx(t, `5A 00 02 64 00 01 65 00 08 FE FF FF FF FF FF FF FF 67 00 02
		64 00 01 65 00 08 FE FF FF FF FF FF FF FF 66 00 04 00 00 00 80 FF FF
		64 00 01 65 00 08 FE FF FF FF FF FF FF FF 66 00 01 01 80 FF FF FF FF`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if v.IsValid(0) || v.IsValid(1) || v.Children[1].IsValid(1) || len(v.Children[1].Offsets) != 3 {
		t.Errorf("constant struct %+v", v)
	}
	if v.Validity[0] != 0xFC {
		t.Errorf("materialised mask %x: bits beyond count must be set", v.Validity[0])
	}
	// Dictionary over an ARRAY INTEGER[2] dictionary of 2 rows: rows 1, 0, 1.
	arr := LogicalType{ID: TypeArray, Child: &integer, ArraySize: 2}
	v, err = decodeVector(t, arr, 3, hx(t, `5A 00 03 5B 00 0C 01 00 00 00 00 00 00 00 01 00 00 00 5C 00 02
		64 00 00 67 00 02 68 00 64 00 00 66 00 10 01 00 00 00 02 00 00 00 03 00 00 00 04 00 00 00 FF FF FF FF`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertBytes(t, "array child", v.Children[0].Data, hx(t, "03000000 04000000 01000000 02000000 03000000 04000000"))
	// Dictionary index out of range.
	if _, err := decodeVector(t, integer, 1, hx(t, "5A 00 03 5B 00 04 02 00 00 00 5C 00 01 64 00 00 66 00 04 01 00 00 00 FF FF"), Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("dictionary index out of range: %v", err)
	}
	// Sequence of a VARCHAR is malformed.
	if _, err := decodeVector(t, varchar, 1, hx(t, "5A 00 04 5B 00 00 5C 00 01 FF FF"), Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("sequence VARCHAR: %v", err)
	}
	// A constant vector with a huge row count is charged against MaxExpandBytes.
	if _, err := decodeVector(t, integer, 1<<24, hx(t, "5A 00 02 64 00 00 66 00 04 07 00 00 00 FF FF"), Limits{MaxExpandBytes: 1 << 20, MaxVectorRows: 1 << 30}); !errors.Is(err, ErrLimit) {
		t.Errorf("constant expansion over budget: %v", err)
	}
}

func TestDecodeLimits(t *testing.T) {
	c := chunkExample()
	b, _ := AppendDataChunk(nil, c, Q1)
	if _, err := DecodeDataChunk(NewReader(b), Limits{MaxChunkRows: 1}); !errors.Is(err, ErrLimit) {
		t.Errorf("MaxChunkRows: %v", err)
	}
	// Deeply nested LIST type.
	var typ []byte
	for range 100 {
		typ = append(typ, hx(t, "64 00 65 65 00 01 64 00 04 C8 00")...)
	}
	typ = append(typ, hx(t, "64 00 0D FF FF")...)
	for range 100 {
		typ = append(typ, 0xFF, 0xFF, 0xFF, 0xFF)
	}
	if _, err := DecodeLogicalType(NewReader(typ), Limits{}); !errors.Is(err, ErrLimit) {
		t.Errorf("depth: %v", err)
	}
	// NULL list entries beyond the child are zeroed; valid ones are errors.
	integer := LogicalType{ID: TypeInteger}
	list := LogicalType{ID: TypeList, Child: &integer}
	v, err := decodeVector(t, list, 1, hx(t, `64 00 01 65 00 08 FE FF FF FF FF FF FF FF 68 00 00 69 00 01 64 00 05 65 00 05 FF FF
		6A 00 64 00 00 66 00 00 FF FF FF FF`), Limits{})
	if err != nil || v.Entries[0] != (ListEntry{}) {
		t.Errorf("NULL entry out of range: %v %+v", err, v)
	}
	if _, err := decodeVector(t, list, 1, hx(t, `64 00 00 68 00 00 69 00 01 64 00 05 65 00 05 FF FF
		6A 00 64 00 00 66 00 00 FF FF FF FF`), Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("valid entry out of range: %v", err)
	}
	// Blob-layout lengths that do not add up.
	if _, err := decodeVector(t, LogicalType{ID: TypeVarchar}, 1, hx(t, "64 00 00 6B 00 02 6C 00 04 03 00 00 00 6D 00 02 61 62 FF FF"), Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("blob lengths: %v", err)
	}
}

func TestDecompress(t *testing.T) {
	plain := AppendHeader(nil, Header{Type: MsgSuccessResponse})
	plain = append(plain, 0xFF, 0xFF)
	if out, err := Decompress(plain, 0); err != nil || !bytes.Equal(out, plain) {
		t.Fatalf("plain body: %v", err)
	}
	big := bytes.Repeat(plain, 1000)
	enc, _ := zstd.NewWriter(nil)
	frame := func(declared uint64, payload []byte) []byte {
		b := []byte{0xDB, 0xC2, codecZstd}
		b = binary.LittleEndian.AppendUint64(b, declared)
		return append(b, enc.EncodeAll(payload, nil)...)
	}
	out, err := Decompress(frame(uint64(len(big)), big), 0)
	if err != nil || !bytes.Equal(out, big) {
		t.Fatalf("round trip: %v", err)
	}
	tests := []struct {
		name string
		b    []byte
		max  int
		kind error
	}{
		{"size 0", frame(0, big), 0, ErrMalformed},
		{"size above 2^32", frame(1<<32+1, big), 0, ErrMalformed},
		{"size mismatch", frame(uint64(len(big))-1, big), 0, ErrMalformed},
		{"over maxSize", frame(uint64(len(big)), big), 100, ErrLimit},
		{"unknown codec", append([]byte{0xDB, 0xC2, 0x07}, frame(uint64(len(big)), big)[3:]...), 0, ErrMalformed},
		{"garbage frame", append(frame(5, nil)[:11], 1, 2, 3, 4, 5, 6), 0, ErrMalformed},
	}
	for _, tt := range tests {
		if _, err := Decompress(tt.b, tt.max); !errors.Is(err, tt.kind) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestAppendReaderRoundTrip writes each encoding the way the encoders do
// (the append helpers, or inline where they write it inline: data blocks,
// doubles) and reads it back with the Reader.
func TestAppendReaderRoundTrip(t *testing.T) {
	b := []byte{0xAA}
	b = appendField(b, 100)
	b = appendUvarint(b, 300)
	b = appendVarint(b, -65)
	b = appendBool(b, true)
	b = appendString(b, "duck")
	b = append(appendUvarint(b, 3), 1, 2, 3) // a data block
	b = appendHugeint(b, Hugeint{Upper: -1, Lower: 7})
	b = appendUvarint(appendUvarint(b, 1), 2) // a uhugeint
	b = appendOptIdx(b, OptIdx{})
	b = appendOptIdx(b, Idx(5))
	b = appendBool(b, false) // a pointer's presence flag
	b = appendUvarint(b, 2)  // a list count
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(1.5))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(-2))
	b = appendEnd(b)
	if b[0] != 0xAA {
		t.Fatal("the append helpers must append to their input")
	}
	r := NewReader(b[1:])
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.ExpectField(100))
	if v, err := r.ReadUvarint(); err != nil || v != 300 {
		t.Errorf("uvarint %d %v", v, err)
	}
	if v, err := r.ReadVarint(); err != nil || v != -65 {
		t.Errorf("varint %d %v", v, err)
	}
	if v, err := r.ReadBool(); err != nil || !v {
		t.Errorf("bool %v %v", v, err)
	}
	if v, err := r.ReadString(); err != nil || v != "duck" {
		t.Errorf("string %q %v", v, err)
	}
	if v, err := r.ReadBlock(3); err != nil || !bytes.Equal(v, []byte{1, 2, 3}) {
		t.Errorf("block %v %v", v, err)
	}
	if v, err := r.ReadHugeint(); err != nil || v != (Hugeint{-1, 7}) {
		t.Errorf("hugeint %v %v", v, err)
	}
	if u, l, err := r.ReadUhugeint(); err != nil || u != 1 || l != 2 {
		t.Errorf("uhugeint %d %d %v", u, l, err)
	}
	if v, err := r.ReadOptIdx(); err != nil || v.Valid {
		t.Errorf("unset optional_idx %v %v", v, err)
	}
	if v, err := r.ReadOptIdx(); err != nil || v != Idx(5) {
		t.Errorf("optional_idx %v %v", v, err)
	}
	if v, err := r.ReadPresent(); err != nil || v {
		t.Errorf("pointer flag %v %v", v, err)
	}
	if v, err := r.ReadCount(1); err != nil || v != 2 {
		t.Errorf("count %d %v", v, err)
	}
	if v, err := r.ReadFloat64(); err != nil || v != 1.5 {
		t.Errorf("double %v %v", v, err)
	}
	if v, err := r.ReadFloat32(); err != nil || v != -2 {
		t.Errorf("float %v %v", v, err)
	}
	must(r.ExpectEnd())
	if r.Remaining() != 0 || r.Offset() != len(b)-1 || len(r.Rest()) != 0 {
		t.Errorf("%d bytes left", r.Remaining())
	}
	if _, err := r.ReadFloat64(); !errors.Is(err, ErrTruncated) {
		t.Errorf("read past end: %v", err)
	}
}

func TestDecompressPrefix(t *testing.T) {
	msg := bytes.Repeat([]byte("quack "), 2000)
	frame := func(single bool) []byte {
		enc, _ := zstd.NewWriter(nil, zstd.WithSingleSegment(single))
		b := []byte{0xDB, 0xC2, codecZstd}
		b = binary.LittleEndian.AppendUint64(b, uint64(len(msg)))
		return enc.EncodeAll(msg, b)
	}
	for _, single := range []bool{false, true} {
		got, err := DecompressPrefix(frame(single), 100)
		if err != nil || !bytes.Equal(got, msg[:100]) {
			t.Fatalf("single segment %v: prefix %q, %v", single, got, err)
		}
		if got, err := DecompressPrefix(frame(single), 1<<20); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("single segment %v: prefix longer than the message: %d bytes, %v", single, len(got), err)
		}
	}
	if got, err := DecompressPrefix(msg, 10); err != nil || !bytes.Equal(got, msg[:10]) {
		t.Fatalf("plain body: %q, %v", got, err)
	}
	// A frame whose window is larger than the prefix window is refused.
	big := make([]byte, 2*prefixWindow)
	enc, _ := zstd.NewWriter(nil, zstd.WithSingleSegment(true))
	b := binary.LittleEndian.AppendUint64([]byte{0xDB, 0xC2, codecZstd}, uint64(len(big)))
	if _, err := DecompressPrefix(enc.EncodeAll(big, b), 100); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a 16 MiB window: %v, want ErrMalformed", err)
	}
}
