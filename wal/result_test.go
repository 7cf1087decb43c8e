package wal

import (
	"errors"
	"reflect"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

func sampleResult(t testing.TB) *Result {
	t.Helper()
	v, err := wire.NewVector(wire.LogicalType{ID: wire.TypeBigInt}, []any{int64(7), nil})
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := wire.AppendDataChunk(nil, &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{v}}, wire.Q3)
	if err != nil {
		t.Fatal(err)
	}
	return &Result{Index: 42, RowsChanged: -1, Columns: []string{"id"},
		Types: []wire.LogicalType{{ID: wire.TypeBigInt}}, Chunks: [][]byte{chunk}, Replayed: true}
}

func TestResultRoundTrip(t *testing.T) {
	for name, r := range map[string]*Result{
		"empty":     {},
		"count":     {Index: 1 << 40, RowsChanged: 3},
		"returning": sampleResult(t),
	} {
		t.Run(name, func(t *testing.T) {
			enc, err := r.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeResult(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("round trip changed the result:\n got %#v\nwant %#v", got, r)
			}
		})
	}
}

func TestDecodeResultRefuses(t *testing.T) {
	good, err := sampleResult(t).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[5] ^= 0xff
	for name, c := range map[string]struct {
		data []byte
		want error
	}{
		"empty":     {nil, ErrCorrupt},
		"version":   {append([]byte{Version + 1}, good[1:]...), ErrVersion},
		"checksum":  {flipped, ErrCorrupt},
		"batch":     {reseal(append([]byte{Version, recordBatch}, good[2:]...)), ErrCorrupt},
		"truncated": {reseal(append([]byte(nil), good[:len(good)-9]...)), ErrCorrupt},
		"huge count": {reseal(append([]byte{Version, recordResult, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
			0, 0, 0, 0)), ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeResult(c.data); !errors.Is(err, c.want) {
				t.Fatalf("DecodeResult = %v, want %v", err, c.want)
			}
		})
	}
}

// FuzzDecodeResult checks that DecodeResult never panics and that what it
// accepts re-encodes to the same bytes.
func FuzzDecodeResult(f *testing.F) {
	for _, r := range []*Result{{}, {Index: 9, RowsChanged: 2}, sampleResult(f)} {
		data, err := r.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < headerLen+trailerLen {
			return
		}
		for _, in := range [][]byte{data, reseal(append([]byte(nil), data...))} {
			r, err := DecodeResult(in)
			if err != nil {
				continue
			}
			again, err := r.MarshalBinary()
			if err != nil {
				t.Fatalf("re-encode accepted result: %v", err)
			}
			r2, err := DecodeResult(again)
			if err != nil || !reflect.DeepEqual(r, r2) {
				t.Fatalf("round trip changed the result: %v\n%#v\n%#v", err, r, r2)
			}
		}
	})
}
