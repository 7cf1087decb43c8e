package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
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

// FuzzDecodeBodyEncoded checks the router's pass-through decoder against
// the full one: a PREPARE_RESPONSE or FETCH_RESPONSE whose chunks
// DecodeBodyEncoded accepts must decode in full too, with the same chunks,
// and the message built from the kept bytes, copied or in parts, must be
// the one built from the decoded chunks.
func FuzzDecodeBodyEncoded(f *testing.F) {
	f.Add(hx(f, "01 00 08 03 00 "+unsetHex+" FF FF  01 00 01 03 00 01 FF FF 64 00 01 65 00 01 64 00 0D FF FF 66 00 01 64 00 00 66 00 04 2A 00 00 00 FF FF FF FF"), uint(3))
	f.Add(hx(f, "01 00 0D 03 00 "+unsetHex+" FF FF  01 00 00 01 02 00 03 FF FF"), uint(2))
	for _, g := range []Generation{Q1, Q2, Q3} {
		rng := rand.New(rand.NewPCG(uint64(g), 5))
		for range 3 {
			types, chunks := randChunks(rng, g)
			for _, m := range []Message{
				&PrepareResponse{Types: types, Names: make([]string, len(types)), Chunks: chunks},
				&FetchResponse{Chunks: chunks, BatchIndex: Idx(1)},
			} {
				b, err := AppendMessage(nil, g, Header{}, m)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(b, uint(g-1))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, gen uint) {
		g := Generation(gen%3 + 1)
		h, r, err := DecodeHeader(b)
		if err != nil || h.Type != MsgPrepareResponse && h.Type != MsgFetchResponse {
			return
		}
		m, err := DecodeBodyEncoded(g, h.Type, r, fuzzLimits, nil)
		if err != nil {
			return
		}
		_, r, _ = DecodeHeader(b)
		full, err := DecodeBody(g, h.Type, r, fuzzLimits)
		if err != nil {
			t.Fatalf("DecodeBodyEncoded accepted what DecodeBody refuses: %v", err)
		}
		fromChunks, err := AppendMessage(nil, g, h, full)
		if err != nil {
			t.Fatalf("re-encode decoded: %v", err)
		}
		kept, err := AppendMessage(nil, g, h, m)
		if err != nil {
			t.Fatalf("re-encode kept bytes: %v", err)
		}
		parts, err := MessageParts(nil, g, h, m)
		if err != nil {
			t.Fatalf("MessageParts: %v", err)
		}
		if !bytes.Equal(bytes.Join(parts, nil), kept) {
			t.Fatal("MessageParts differs from AppendMessage")
		}
		if _, again, err := DecodeMessage(kept, g, fuzzLimits); err != nil {
			t.Fatalf("the forwarded message does not decode: %v", err)
		} else if b2, _ := AppendMessage(nil, g, h, again); !bytes.Equal(b2, fromChunks) {
			t.Fatal("the forwarded message decodes to other chunks")
		}
	})
}
