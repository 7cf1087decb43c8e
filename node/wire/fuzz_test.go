package wire

import (
	"bytes"
	"errors"
	"testing"
)

// fuzzLimits keeps the fuzzers' memory small; the code paths are the same
// as with the defaults.
var fuzzLimits = Limits{MaxChunkRows: 1 << 12, MaxVectorRows: 1 << 16, MaxExpandBytes: 1 << 22}

// checkStable requires that what decoded once re-encodes, and that the
// re-encoding decodes and encodes to itself. The input itself need not come
// back: non-minimal varints, explicit defaults and all-valid masks are
// normalised.
func checkStable(t *testing.T, what string, encode func() ([]byte, error), decodeEncode func([]byte) ([]byte, error)) {
	t.Helper()
	b, err := encode()
	if err != nil {
		// Decoders accept DuckDB 2.0 types in every generation; encoders
		// refuse them where DuckDB 1.5 would not understand them.
		if errors.Is(err, ErrUnsupportedType) {
			return
		}
		t.Fatalf("%s: decoded value does not re-encode: %v", what, err)
	}
	again, err := decodeEncode(b)
	if err != nil {
		t.Fatalf("%s: re-encoded bytes do not decode: %v\n% x", what, err, b)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("%s: encoding not stable\n% x\n% x", what, b, again)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(hx(f, "01 00 0A 03 00 "+unsetHex+" FF FF  FF FF"), uint(1))
	f.Add(hx(f, "01 00 08 03 00 "+unsetHex+" FF FF  01 00 01 03 00 01 FF FF 64 00 01 65 00 01 64 00 0D FF FF 66 00 01 64 00 00 66 00 04 2A 00 00 00 FF FF FF FF"), uint(3))
	f.Add(hx(f, "01 00 0D 03 00 "+unsetHex+" FF FF  01 00 00 01 02 00 03 FF FF"), uint(2))
	f.Fuzz(func(t *testing.T, b []byte, gen uint) {
		g := Generation(gen%3 + 1)
		h, m, err := DecodeMessage(b, g, fuzzLimits)
		if err != nil {
			return
		}
		checkStable(t, h.Type.String(),
			func() ([]byte, error) { return AppendMessage(nil, g, h, m) },
			func(b []byte) ([]byte, error) {
				h, m, err := DecodeMessage(b, g, fuzzLimits)
				if err != nil {
					return nil, err
				}
				return AppendMessage(nil, g, h, m)
			})
	})
}

func FuzzDecodeDataChunk(f *testing.F) {
	f.Add(hx(f, "64 00 01 65 00 01 64 00 0D FF FF 66 00 01 5A 00 02 64 00 00 66 00 04 07 00 00 00 FF FF FF FF"))
	f.Add(hx(f, "64 00 02 65 00 01 64 00 19 FF FF 66 00 01 64 00 00 6B 00 06 6C 00 08 02 00 00 00 04 00 00 00 6D 00 06 68 69 64 75 63 6B FF FF FF FF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeDataChunk(NewReader(b), fuzzLimits)
		if err != nil {
			return
		}
		for _, g := range []Generation{Q1, Q3} {
			checkStable(t, "chunk",
				func() ([]byte, error) { return AppendDataChunk(nil, c, g) },
				func(b []byte) ([]byte, error) {
					r := NewReader(b)
					c, err := DecodeDataChunk(r, fuzzLimits)
					if err != nil {
						return nil, err
					}
					if r.Remaining() != 0 {
						t.Fatalf("%d bytes left after re-decoding", r.Remaining())
					}
					return AppendDataChunk(nil, c, g)
				})
		}
	})
}

func FuzzDecodeLogicalType(f *testing.F) {
	f.Add(hx(f, "64 00 15 65 00 01 64 00 02 C8 00 12 C9 00 03 FF FF FF FF"))
	f.Add(hx(f, "64 00 68 65 00 01 64 00 06 C8 00 02 C9 00 02 01 61 01 62 FF FF FF FF"))
	f.Add(hx(f, "64 00 6C 65 00 01 64 00 09 C8 00 64 00 0D FF FF C9 00 03 FF FF FF FF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := DecodeLogicalType(NewReader(b), fuzzLimits)
		if err != nil {
			return
		}
		_ = typ.String()
		_ = typ.FixedWidth()
		checkStable(t, "type",
			func() ([]byte, error) { return AppendLogicalType(nil, &typ, Q3) },
			func(b []byte) ([]byte, error) {
				typ, err := DecodeLogicalType(NewReader(b), fuzzLimits)
				if err != nil {
					return nil, err
				}
				return AppendLogicalType(nil, &typ, Q3)
			})
	})
}
