package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// randChunks returns a few random chunks of one set of column types.
func randChunks(rng *rand.Rand, g Generation) ([]LogicalType, []*DataChunk) {
	var types []LogicalType
	for range 1 + rng.IntN(4) {
		types = append(types, randType(rng, g, 0))
	}
	var chunks []*DataChunk
	for range 1 + rng.IntN(3) {
		rows := []int{0, 1, 3, 64, 65, 130}[rng.IntN(6)]
		c := &DataChunk{Rows: rows}
		for _, t := range types {
			c.Columns = append(c.Columns, randVector(rng, t, rows))
		}
		chunks = append(chunks, c)
	}
	return types, chunks
}

// TestDecodeBodyEncodedKeepsChunkBytes checks that the chunks a
// PREPARE_RESPONSE or FETCH_RESPONSE carries come out of DecodeBodyEncoded
// as exactly the bytes AppendDataChunk wrote, and that a message built from
// them again is byte-equal to the original: forwarding equals decoding and
// re-encoding.
func TestDecodeBodyEncodedKeepsChunkBytes(t *testing.T) {
	for _, g := range []Generation{Q1, Q2, Q3} {
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		for iter := 0; iter < 300; iter++ {
			types, chunks := randChunks(rng, g)
			var want [][]byte
			for _, c := range chunks {
				enc, err := AppendDataChunk(nil, c, g)
				if err != nil {
					t.Fatalf("Q%d iter %d: %v", g, iter, err)
				}
				want = append(want, enc)
			}
			names := make([]string, len(types))
			msgs := []Message{
				&PrepareResponse{Types: types, Names: names, NeedsMoreFetch: true, Chunks: chunks},
				&FetchResponse{Chunks: chunks, BatchIndex: Idx(3)},
			}
			for _, m := range msgs {
				b, err := AppendMessage(nil, g, Header{Type: m.Type()}, m)
				if err != nil {
					t.Fatalf("Q%d iter %d: %v", g, iter, err)
				}
				h, r, err := DecodeHeader(b)
				if err != nil {
					t.Fatal(err)
				}
				got, err := DecodeBodyEncoded(g, h.Type, r, Limits{}, types)
				if err != nil {
					t.Fatalf("Q%d iter %d %s: %v", g, iter, h.Type, err)
				}
				var enc [][]byte
				switch got := got.(type) {
				case *PrepareResponse:
					enc = got.Encoded
				case *FetchResponse:
					enc = got.Encoded
				}
				if len(enc) != len(want) {
					t.Fatalf("Q%d iter %d %s: %d chunks, want %d", g, iter, h.Type, len(enc), len(want))
				}
				for i := range want {
					if !bytes.Equal(enc[i], want[i]) {
						t.Fatalf("Q%d iter %d %s: chunk %d differs", g, iter, h.Type, i)
					}
					if n, err := EncodedChunkRows(enc[i]); err != nil || n != chunks[i].Rows {
						t.Fatalf("EncodedChunkRows = %d, %v; want %d", n, err, chunks[i].Rows)
					}
				}
				again, err := AppendMessage(nil, g, h, got)
				if err != nil || !bytes.Equal(again, b) {
					t.Fatalf("Q%d iter %d %s: forwarded message differs from the original (%v)", g, iter, h.Type, err)
				}
			}
		}
	}
}

// TestDecodeBodyEncodedRefusesBadFraming feeds every truncation and many
// corruptions of a FETCH_RESPONSE to DecodeBodyEncoded: each is an error or
// chunks the full decoder accepts too, never a panic.
func TestDecodeBodyEncodedRefusesBadFraming(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, g := range []Generation{Q1, Q3} {
		for iter := 0; iter < 20; iter++ {
			types, chunks := randChunks(rng, g)
			b, err := AppendMessage(nil, g, Header{Type: MsgFetchResponse}, &FetchResponse{Chunks: chunks, BatchIndex: Idx(1)})
			if err != nil {
				t.Fatal(err)
			}
			_, r, err := DecodeHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			body := b[r.Offset():]
			for _, n := range truncations(rng, len(body)) {
				if _, err := DecodeBodyEncoded(g, MsgFetchResponse, NewReader(body[:n]), Limits{}, types); err == nil {
					t.Fatalf("Q%d: body truncated to %d of %d bytes accepted", g, n, len(body))
				}
			}
			for range 200 {
				bad := bytes.Clone(body)
				bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
				m, err := DecodeBodyEncoded(g, MsgFetchResponse, NewReader(bad), Limits{}, types)
				if err != nil {
					continue
				}
				for _, c := range m.(*FetchResponse).Encoded {
					if _, err := DecodeDataChunk(NewReader(c), Limits{}); err != nil {
						t.Fatalf("Q%d: a chunk passed the check but does not decode: %v", g, err)
					}
				}
			}
		}
	}
}

// truncations are the lengths to cut a body of size bytes to: every one
// within 512 bytes of either end, where the framing is, and 300 at random
// in between. Every length would cost O(size²) decoding, over a minute
// under the race detector.
func truncations(rng *rand.Rand, size int) []int {
	var ns []int
	for n := range min(size, 512) {
		ns = append(ns, n)
	}
	for n := max(512, size-512); n < size; n++ {
		ns = append(ns, n)
	}
	if size > 1024 {
		for range 300 {
			ns = append(ns, 512+rng.IntN(size-1024))
		}
	}
	return ns
}

// columnTypes are c's column types, as a PREPARE answer announces them.
func columnTypes(c *DataChunk) []LogicalType {
	types := make([]LogicalType, len(c.Columns))
	for i, col := range c.Columns {
		types[i] = col.Type
	}
	return types
}

func TestDecodeBodyEncodedChecksTypesAndLayout(t *testing.T) {
	c := chunkExample()
	types := columnTypes(c)
	other := append([]LogicalType{{ID: TypeBigInt}}, types[1:]...)
	q1, _ := AppendDataChunk(nil, c, Q1)
	tests := []struct {
		name  string
		g     Generation
		types []LogicalType
		enc   []byte
	}{
		{"types differ from the result's", Q1, other, q1},
		{"list-layout strings in Q3", Q3, types, q1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := AppendMessage(nil, Q1, Header{Type: MsgFetchResponse}, &FetchResponse{Encoded: [][]byte{tt.enc}, BatchIndex: Idx(1)})
			if err != nil {
				t.Fatal(err)
			}
			if tt.g == Q3 {
				b, err = AppendMessage(nil, Q3, Header{Type: MsgFetchResponse}, &FetchResponse{Encoded: [][]byte{tt.enc}, BatchIndex: Idx(1)})
				if err != nil {
					t.Fatal(err)
				}
			}
			_, r, _ := DecodeHeader(b)
			if _, err := DecodeBodyEncoded(tt.g, MsgFetchResponse, r, Limits{}, tt.types); !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want ErrMalformed", err)
			}
		})
	}
}

// TestMessagePartsEqualAppendMessage checks that the parts MessageParts
// returns, written one after the other, are byte for byte the message
// AppendMessage encodes, for every message that carries pre-encoded
// chunks, with and without chunks, and that the chunks are not copied.
func TestMessagePartsEqualAppendMessage(t *testing.T) {
	for _, g := range []Generation{Q1, Q2, Q3} {
		rng := rand.New(rand.NewPCG(uint64(g), 11))
		for iter := 0; iter < 100; iter++ {
			types, chunks := randChunks(rng, g)
			var enc [][]byte
			for _, c := range chunks {
				b, err := AppendDataChunk(nil, c, g)
				if err != nil {
					t.Fatal(err)
				}
				enc = append(enc, b)
			}
			if iter%10 == 0 {
				enc = [][]byte{}
			}
			msgs := []Message{
				&PrepareResponse{Types: types, Names: make([]string, len(types)), NeedsMoreFetch: true, Encoded: enc, UUID: Hugeint{Lower: 9}},
				&FetchResponse{Encoded: enc, BatchIndex: Idx(3)},
			}
			switch g {
			case Q2:
				msgs = append(msgs, &SendDataRequest{Schema: "s", Table: "t", Encoded: enc, BatchIndex: Idx(1)})
			case Q3:
				msgs = append(msgs, &SendDataRequest{StreamID: "x", Encoded: enc, BatchIndex: Idx(1)})
			}
			for _, m := range msgs {
				want, err := AppendMessage(nil, g, Header{Type: m.Type()}, m)
				if err != nil {
					t.Fatalf("Q%d %s: %v", g, m.Type(), err)
				}
				prefix := []byte("keep")
				parts, err := MessageParts(prefix, g, Header{Type: m.Type()}, m)
				if err != nil {
					t.Fatalf("Q%d %s: MessageParts: %v", g, m.Type(), err)
				}
				if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
					t.Fatalf("Q%d %s iter %d: parts join to %d bytes that differ from AppendMessage's %d", g, m.Type(), iter, len(got), len(want))
				}
				shared := 0
				for _, p := range parts {
					for _, c := range enc {
						if len(p) > 0 && &p[0] == &c[0] {
							shared++
						}
					}
				}
				if shared != len(enc) {
					t.Fatalf("Q%d %s: %d of %d chunks passed in place", g, m.Type(), shared, len(enc))
				}
			}
		}
	}
}

// TestMessagePartsRefusesBadChunk checks that a pre-encoded chunk that is
// no DataChunk object is refused, as AppendMessage refuses it.
func TestMessagePartsRefusesBadChunk(t *testing.T) {
	m := &FetchResponse{Encoded: [][]byte{[]byte("not a chunk")}, BatchIndex: Idx(1)}
	if _, err := MessageParts(nil, Q1, Header{}, m); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MessageParts = %v, want ErrInvalid", err)
	}
}
