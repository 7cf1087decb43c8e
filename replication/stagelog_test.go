package replication

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzStageBody: staged rows restored from a snapshot or read from
// staged_entries decode to chunks or to an ErrSnapshotCorrupt error, never a
// panic, and chunks that decode encode to bytes that decode to them again.
func FuzzStageBody(f *testing.F) {
	f.Add(encodeStageBody([][]byte{[]byte("chunk one"), {}, []byte("chunk three")}))
	f.Add(encodeStageBody(nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		chunks, err := decodeStageBody(b)
		if err != nil {
			if !errors.Is(err, ErrSnapshotCorrupt) {
				t.Fatalf("err = %v, want ErrSnapshotCorrupt", err)
			}
			return
		}
		again, err := decodeStageBody(encodeStageBody(chunks))
		if err != nil || len(again) != len(chunks) {
			t.Fatalf("%x: %d chunks encode to %d (%v)", b, len(chunks), len(again), err)
		}
		for i := range chunks {
			if !bytes.Equal(again[i], chunks[i]) {
				t.Fatalf("%x: chunk %d is %x, after encoding %x", b, i, chunks[i], again[i])
			}
		}
	})
}
