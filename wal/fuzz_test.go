package wal

import (
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// re-encodes to a batch that decodes to the same value. Each input is also
// tried with a recomputed checksum, so the fuzzer reaches the parser instead
// of stopping at the CRC.
func FuzzDecode(f *testing.F) {
	for _, b := range []Batch{{}, sampleBatch(), stagingBatch(), {Commands: []Command{{Entry: NoOp{}}}}} {
		data, err := b.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRoundTrip(t, data)
		if len(data) >= headerLen+trailerLen {
			checkRoundTrip(t, reseal(append([]byte(nil), data...)))
		}
	})
}

func checkRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	b, err := Decode(data)
	if err != nil {
		return
	}
	again, err := b.MarshalBinary()
	if err != nil {
		t.Fatalf("re-encode accepted batch: %v", err)
	}
	b2, err := Decode(again)
	if err != nil {
		t.Fatalf("decode re-encoded batch: %v", err)
	}
	if !reflect.DeepEqual(b, b2) {
		t.Fatalf("round trip changed batch:\n%#v\n%#v", b, b2)
	}
}
