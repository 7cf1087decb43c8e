package cluster

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		meta Meta
	}{
		{"zero", Meta{}},
		{"voter", Meta{ID: "n1", RaftAddr: "127.0.0.1:9505", QuackAddr: "127.0.0.1:9504", AppliedIndex: 12345, Load: 7, Engine: "v2.0.0", Staging: true, CompressedSnapshots: true}},
		{"with its operations address", Meta{ID: "n1", RaftAddr: "127.0.0.1:9505", QuackAddr: "127.0.0.1:9504", Engine: "v2.0.0", HTTPAddr: "127.0.0.1:9497"}},
		{"replica leader leaving", Meta{ID: "n2", Role: RoleReplica, Leader: true, Leaving: true, LeaderID: "n2", AppliedIndex: math.MaxUint64, Load: math.MaxUint64}},
		{"ipv6", Meta{ID: "node-ü", RaftAddr: "[::1]:9505", QuackAddr: "[fe80::1%eth0]:9504", LeaderID: "n1"}},
		{"largest", Meta{ID: strings.Repeat("i", 100), RaftAddr: strings.Repeat("r", 120), QuackAddr: strings.Repeat("q", 120), LeaderID: strings.Repeat("l", 100), AppliedIndex: math.MaxUint64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.meta.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MetaMaxSize {
				t.Fatalf("encoded %d bytes", len(b))
			}
			got, err := DecodeMeta(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.meta {
				t.Fatalf("got %+v, want %+v", got, tt.meta)
			}
			// A later version may append fields; this one reads what it knows.
			b[0]++
			got, err = DecodeMeta(append(b, 1, 2, 3))
			if err != nil || got != tt.meta {
				t.Fatalf("with appended fields: %+v, %v", got, err)
			}
		})
	}
}

func TestMetaEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		meta Meta
		want error
	}{
		{"too large", Meta{ID: "n1", RaftAddr: strings.Repeat("x", MetaMaxSize)}, ErrMetaTooLarge},
		{"bad role", Meta{ID: "n1", Role: 7}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.meta.Encode()
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Encode = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestDecodeMetaVersion1 reads what a build before Engine gossiped: the
// same fields, version 1, no Engine.
func TestDecodeMetaVersion1(t *testing.T) {
	v1 := []byte{1, 0, 7, 0, 2, 'n', '1', 1, 'r', 1, 'q', 0}
	m, err := DecodeMeta(v1)
	want := Meta{ID: "n1", RaftAddr: "r", QuackAddr: "q", AppliedIndex: 7}
	if err != nil || m != want {
		t.Fatalf("DecodeMeta(v1) = %+v, %v; want %+v", m, err, want)
	}
}

// TestDecodeMetaVersion2 reads what a build before HTTPAddr gossiped, and
// checks that version 3 only appends: its bytes start with version 2's
// fields, which a version-2 decoder reads, ignoring the rest.
func TestDecodeMetaVersion2(t *testing.T) {
	v2 := []byte{2, 0, 7, 0, 2, 'n', '1', 1, 'r', 1, 'q', 0, 6, 'v', '2', '.', '0', '.', '0'}
	m, err := DecodeMeta(v2)
	want := Meta{ID: "n1", RaftAddr: "r", QuackAddr: "q", AppliedIndex: 7, Engine: "v2.0.0"}
	if err != nil || m != want {
		t.Fatalf("DecodeMeta(v2) = %+v, %v; want %+v", m, err, want)
	}
	want.HTTPAddr = "h"
	v3, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v3[1:len(v2)], v2[1:]) || v3[0] != 3 {
		t.Fatalf("version 3 = %v, want version 2's fields %v first", v3, v2)
	}
}

func TestDecodeMetaErrors(t *testing.T) {
	good, err := Meta{ID: "n1", RaftAddr: "127.0.0.1:9505"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMetaCorrupt},
		{"version only", []byte{1}, ErrMetaCorrupt},
		{"version 0", []byte{0, 0, 0, 0, 0, 0, 0, 0}, ErrMetaVersion},
		{"no fields", []byte{1, 0}, ErrMetaCorrupt},
		{"overlong varint", append([]byte{1, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrMetaCorrupt},
		{"string past end", []byte{1, 0, 0, 0, 10, 'n'}, ErrMetaCorrupt},
		{"huge string length", []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrMetaCorrupt},
		{"truncated", good[:len(good)-3], ErrMetaCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := DecodeMeta(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("DecodeMeta = %v, want %v", err, tt.want)
			}
		})
	}
}

// FuzzDecodeMeta checks that decoding never panics and that whatever decodes re-encodes
// to something that decodes to the same Meta.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{},
		{ID: "n1", RaftAddr: "127.0.0.1:9505", QuackAddr: "127.0.0.1:9504", AppliedIndex: 300, Load: 2},
		{ID: "n2", Role: RoleReplica, Leader: true, LeaderID: "n2", AppliedIndex: math.MaxUint64},
	} {
		b, err := m.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			return
		}
		enc, err := m.Encode()
		if err != nil {
			// Re-encoding is never longer than the input (varints become minimal), so only
			// inputs over the limit may fail.
			if errors.Is(err, ErrMetaTooLarge) && len(b) > MetaMaxSize {
				return
			}
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		again, err := DecodeMeta(enc)
		if err != nil || again != m {
			t.Fatalf("re-decoded %+v, %v; want %+v", again, err, m)
		}
	})
}
