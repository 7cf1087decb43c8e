package wal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"
	"time"
)

func sampleBatch() Batch {
	return Batch{Commands: []Command{
		{Timestamp: 1700000000000000, Key: []byte("client-1/42"), Entry: Statement{
			SQL: "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			Params: []Param{Null(), Bool(true), Int64(-7), Uint64(math.MaxUint64), Float64(math.NaN()),
				String("héllo"), Blob([]byte{0, 1, 2}), Timestamp(-1), Date(19000), UUID([16]byte{15: 1})},
			Returning: true,
		}},
		{Timestamp: 2, Entry: Append{Schema: "main", Table: "t", Chunk: []byte{9, 9, 9}}},
		{Timestamp: 3, Entry: Txn{Entries: []Entry{
			Statement{SQL: "DELETE FROM t"},
			Append{Schema: "s", Table: "u"},
			Append{Schema: "b", Parents: []string{"a", "x.y"}, Table: "t", Chunk: []byte{1}},
		}}},
		{Entry: NoOp{}},
	}}
}

// stagingBatch holds the entries that load a transaction's rows ahead of
// its commit.
func stagingBatch() Batch {
	return Batch{Commands: []Command{
		{Timestamp: 10, Key: []byte("k1"), Entry: Stage{ID: math.MaxUint64, Part: 3, Offset: 4096, Chunks: [][]byte{{1, 2}, {3}}}},
		{Timestamp: 11, Entry: Txn{Entries: []Entry{
			Statement{SQL: "CREATE TABLE t (i INTEGER)"},
			Staged{ID: 7, Part: 0, Rows: 6144, Schema: "main", Table: "t"},
			Staged{ID: 7, Part: 1, Rows: 1, Schema: "b", Parents: []string{"a"}, Table: "u"},
		}}},
		{Timestamp: 12, Entry: Staged{ID: 8, Rows: 0, Schema: "s", Table: "t"}},
		{Timestamp: 13, Entry: Unstage{ID: 7, IdleBefore: math.MaxInt64}},
		{Entry: Unstage{ID: 9, IdleBefore: -1}},
	}}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		batch Batch
	}{
		{"empty", Batch{}},
		{"noop", Batch{Commands: []Command{{Entry: NoOp{}}}}},
		{"sample", sampleBatch()},
		{"staging", stagingBatch()},
		{"empty txn", Batch{Commands: []Command{{Timestamp: -5, Entry: Txn{}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := tt.batch.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.batch) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tt.batch)
			}
		})
	}
}

func TestAppendBinaryKeepsPrefix(t *testing.T) {
	prefix := []byte("prefix")
	data, err := sampleBatch().AppendBinary(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if string(data[:len(prefix)]) != "prefix" {
		t.Fatalf("prefix clobbered: %q", data[:len(prefix)])
	}
	if _, err := Decode(data[len(prefix):]); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeInvalid(t *testing.T) {
	tests := []struct {
		name string
		cmd  Command
	}{
		{"nil entry", Command{}},
		{"nested txn", Command{Entry: Txn{Entries: []Entry{Txn{}}}}},
		{"noop in txn", Command{Entry: Txn{Entries: []Entry{NoOp{}}}}},
		{"nil in txn", Command{Entry: Txn{Entries: []Entry{nil}}}},
		{"long key", Command{Key: make([]byte, MaxKeyLen+1), Entry: NoOp{}}},
		{"stage in txn", Command{Entry: Txn{Entries: []Entry{Stage{Chunks: [][]byte{{1}}}}}}},
		{"stage without chunks", Command{Entry: Stage{ID: 1}}},
		{"unstage in txn", Command{Entry: Txn{Entries: []Entry{Unstage{ID: 1}}}}},
		{"bad param", Command{Entry: Statement{SQL: "x", Params: []Param{{typ: 200}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Batch{Commands: []Command{tt.cmd}}.MarshalBinary()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// reseal recomputes the checksum after a test tampered with the body.
func reseal(data []byte) []byte {
	body := data[:len(data)-trailerLen]
	binary.LittleEndian.PutUint32(data[len(data)-trailerLen:], crc32.Checksum(body, castagnoli))
	return data
}

func TestDecodeRejects(t *testing.T) {
	good, err := sampleBatch().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	clone := func() []byte { return append([]byte(nil), good...) }
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"nil", nil, ErrCorrupt},
		{"short", []byte{Version, recordBatch, 0}, ErrCorrupt},
		{"version", func() []byte { b := clone(); b[0] = 2; return b }(), ErrVersion},
		{"checksum", func() []byte { b := clone(); b[len(b)-1] ^= 1; return b }(), ErrCorrupt},
		{"flipped body bit", func() []byte { b := clone(); b[10] ^= 0x40; return b }(), ErrCorrupt},
		{"record type", reseal(func() []byte { b := clone(); b[1] = 'X'; return b }()), ErrCorrupt},
		{"truncated", reseal(append(clone()[:len(good)/2], 0, 0, 0, 0)), ErrCorrupt},
		{"trailing", func() []byte {
			b := append(clone()[:len(good)-trailerLen], 0, 0, 0, 0, 0)
			return reseal(b)
		}(), ErrCorrupt},
		{"huge count", reseal(binary.AppendUvarint([]byte{Version, recordBatch}, math.MaxUint64>>1)), ErrCorrupt},
		{"huge key", reseal(append([]byte{Version, recordBatch, 1, 0}, binary.AppendUvarint(nil, MaxKeyLen+1)...)), ErrCorrupt},
		{"huge sql", reseal(append([]byte{Version, recordBatch, 1, 0, 0, byte(KindStatement)}, append(binary.AppendUvarint(nil, 1<<40), 0, 0, 0, 0)...)), ErrCorrupt},
		{"unknown kind", reseal([]byte{Version, recordBatch, 1, 0, 0, 99, 0, 0, 0, 0}), ErrCorrupt},
		{"bad bool", reseal([]byte{Version, recordBatch, 1, 0, 0, byte(KindStatement), 0, 0, 1, byte(ParamBool), 7, 0, 0, 0, 0}), ErrCorrupt},
		{"bad flags", reseal([]byte{Version, recordBatch, 1, 0, 0, byte(KindStatement), 0, 0x80, 0, 0, 0, 0, 0}), ErrCorrupt},
		{"nested append without parents", reseal([]byte{Version, recordBatch, 1, 0, 0, tagNestedAppend, 0, 1, 's', 1, 't', 0, 0, 0, 0, 0}), ErrCorrupt},
		{"nested txn", reseal([]byte{Version, recordBatch, 1, 0, 0, byte(KindTxn), 1, byte(KindTxn), 0, 0, 0, 0, 0}), ErrCorrupt},
		{"stage in txn", reseal([]byte{Version, recordBatch, 1, 0, 0, byte(KindTxn), 1, byte(KindStage), 1, 0, 0, 1, 1, 9, 0, 0, 0, 0}), ErrCorrupt},
		{"stage without chunks", reseal([]byte{Version, recordBatch, 1, 0, 0, byte(KindStage), 1, 0, 0, 0, 0, 0, 0, 0}), ErrCorrupt},
		{"stage part too large", reseal(append(append([]byte{Version, recordBatch, 1, 0, 0, byte(KindStage), 1},
			binary.AppendUvarint(nil, math.MaxUint32+1)...), 0, 1, 1, 9, 0, 0, 0, 0)), ErrCorrupt},
		{"unstage in txn", reseal([]byte{Version, recordBatch, 1, 0, 0, byte(KindTxn), 1, byte(KindUnstage), 1, 0, 0, 0, 0, 0}), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.data)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodeEveryTruncation(t *testing.T) {
	for _, b := range []Batch{sampleBatch(), stagingBatch()} {
		good, err := b.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		body := good[:len(good)-trailerLen]
		for n := headerLen; n < len(body); n++ {
			data := reseal(append(append([]byte(nil), body[:n]...), 0, 0, 0, 0))
			if _, err := Decode(data); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d: err = %v, want ErrCorrupt", n, err)
			}
		}
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	data, err := sampleBatch().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	clear(data)
	if !reflect.DeepEqual(b, sampleBatch()) {
		t.Fatal("decoded batch changed when the input was cleared")
	}
}

func TestParamValue(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	tests := []struct {
		in   any
		typ  ParamType
		want any
	}{
		{nil, ParamNull, nil},
		{true, ParamBool, true},
		{int32(-3), ParamInt64, int64(-3)},
		{uint16(3), ParamUint64, uint64(3)},
		{float32(1.5), ParamFloat64, 1.5},
		{"s", ParamString, "s"},
		{[]byte("b"), ParamBlob, []byte("b")},
		{ts, ParamTimestamp, ts},
		{[16]byte{0: 0xab, 15: 0xcd}, ParamUUID, "ab000000-0000-0000-0000-0000000000cd"},
	}
	for _, tt := range tests {
		p, err := ParamOf(tt.in)
		if err != nil {
			t.Fatalf("ParamOf(%v): %v", tt.in, err)
		}
		if p.Type() != tt.typ {
			t.Errorf("ParamOf(%v).Type() = %v, want %v", tt.in, p.Type(), tt.typ)
		}
		if got := p.Value(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParamOf(%v).Value() = %#v, want %#v", tt.in, got, tt.want)
		}
	}
	if got := Date(1).Value(); got != time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC) {
		t.Errorf("Date(1) = %v", got)
	}
	if _, err := ParamOf(struct{}{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParamOf(struct{}{}) err = %v, want ErrInvalid", err)
	}
}

func BenchmarkEncodeDecode(b *testing.B) {
	batch := sampleBatch()
	var buf []byte
	for b.Loop() {
		var err error
		buf, err = batch.AppendBinary(buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
