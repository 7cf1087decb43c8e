package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

var scalarIDs = []TypeID{
	TypeSQLNull, TypeType, TypeBoolean, TypeTinyInt, TypeSmallInt, TypeInteger, TypeBigInt, TypeDate, TypeTime,
	TypeTimestampS, TypeTimestampMS, TypeTimestamp, TypeTimestampNS, TypeFloat, TypeDouble, TypeChar,
	TypeVarchar, TypeBlob, TypeInterval, TypeUTinyInt, TypeUSmallInt, TypeUInteger, TypeUBigInt,
	TypeTimestampTZ, TypeTimeTZ, TypeTimeNS, TypeBit, TypeBigNum, TypeUHugeInt, TypeHugeInt, TypeUUID, TypeGeometry,
}

// randType returns a random type that generation g can carry and that
// decodes back to itself.
func randType(rng *rand.Rand, g Generation, depth int) LogicalType {
	k := rng.IntN(14)
	if depth >= 3 {
		k = 0
	}
	switch k {
	case 1:
		return LogicalType{ID: TypeDecimal, Width: uint8(1 + rng.IntN(38)), Scale: uint8(rng.IntN(2))}
	case 2:
		n := 1 + rng.IntN(3)
		if rng.IntN(4) == 0 {
			n = 300 // UINT16 indexes
		}
		vals := make([]string, n)
		for i := range vals {
			vals[i] = fmt.Sprintf("v%d", i)
		}
		return LogicalType{ID: TypeEnum, EnumValues: vals}
	case 3, 4:
		c := randType(rng, g, depth+1)
		return LogicalType{ID: TypeList, Child: &c}
	case 5:
		c := randType(rng, g, depth+1)
		return LogicalType{ID: TypeArray, Child: &c, ArraySize: uint32(1 + rng.IntN(3))}
	case 6, 7:
		fs := make([]Field, 1+rng.IntN(3))
		for i := range fs {
			fs[i] = Field{Name: fmt.Sprintf("f%d", i), Type: randType(rng, g, depth+1)}
		}
		return LogicalType{ID: TypeStruct, Fields: fs}
	case 8:
		kv := LogicalType{ID: TypeStruct, Fields: []Field{
			{"key", LogicalType{ID: TypeVarchar}}, {"value", randType(rng, g, depth+1)}}}
		return LogicalType{ID: TypeMap, Child: &kv}
	case 9:
		fs := []Field{{"", LogicalType{ID: TypeUTinyInt}}}
		for i := 0; i <= rng.IntN(2); i++ {
			fs = append(fs, Field{Name: fmt.Sprintf("m%d", i), Type: randType(rng, g, depth+1)})
		}
		return LogicalType{ID: TypeUnion, Fields: fs}
	case 10:
		if g == Q3 {
			return LogicalType{ID: TypeTuple, Fields: []Field{{"", LogicalType{ID: TypeInteger}}, {"", LogicalType{ID: TypeVarchar}}}}
		}
	case 11:
		return LogicalType{ID: TypeVarchar, Alias: "JSON"}
	}
	id := scalarIDs[rng.IntN(len(scalarIDs))]
	if g == Q3 && rng.IntN(10) == 0 {
		id = TypeTimestampTZNS
	}
	return LogicalType{ID: id}
}

// randVector builds a canonical vector: NULL rows carry DuckDB's
// placeholders, empty strings and 0/0 list entries, and a mask exists only
// when a row is NULL, so that decode(encode(v)) equals v.
func randVector(rng *rand.Rand, t LogicalType, n int) *Vector {
	v := &Vector{Type: t, Count: n}
	nullRate := []int{0, 0, 2, 5}[rng.IntN(4)]
	if t.ID == TypeSQLNull {
		nullRate = 1
	}
	if nullRate > 0 && n > 0 {
		mask := bytes.Repeat([]byte{0xFF}, (n+63)/64*8)
		anyNull := false
		for i := 0; i < n; i++ {
			if rng.IntN(nullRate) == 0 {
				mask[i/8] &^= 1 << (i % 8)
				anyNull = true
			}
		}
		if anyNull {
			v.Validity = mask
		}
	}
	phys := t.Physical()
	switch phys {
	case PhysicalVarchar:
		v.Offsets = make([]uint32, n+1)
		for i := 0; i < n; i++ {
			if v.IsValid(i) {
				l := rng.IntN(20)
				if rng.IntN(10) == 0 {
					l = 130 + rng.IntN(200)
				}
				for j := 0; j < l; j++ {
					v.Bytes = append(v.Bytes, byte('a'+rng.IntN(26)))
				}
			}
			v.Offsets[i+1] = uint32(len(v.Bytes))
		}
		if t.ID == TypeGeometry {
			v.GeometryFormat = 1
		}
	case PhysicalStruct:
		for i, f := range t.Fields {
			c := randVector(rng, f.Type, n)
			if t.ID == TypeUnion && i == 0 {
				for r := 0; r < n; r++ {
					if c.IsValid(r) {
						c.Data[r] = byte(rng.IntN(len(t.Fields) - 1))
					}
				}
			}
			v.Children = append(v.Children, c)
		}
	case PhysicalList:
		v.Entries = make([]ListEntry, n)
		for i := 0; i < n; i++ {
			if v.IsValid(i) {
				l := uint64(rng.IntN(4))
				v.Entries[i] = ListEntry{Offset: v.ListSize, Length: l}
				v.ListSize += l
			}
		}
		v.Children = []*Vector{randVector(rng, *t.Child, int(v.ListSize))}
	case PhysicalArray:
		v.Children = []*Vector{randVector(rng, *t.Child, n*int(t.ArraySize))}
	default:
		w := phys.width()
		v.Data = make([]byte, w*n)
		for i := range v.Data {
			v.Data[i] = byte(rng.Uint32())
		}
		if t.ID == TypeEnum {
			for i := range v.Data {
				v.Data[i] = 0 // indexes must stay in range
			}
		}
		slot := phys.nullSlot()
		for i := 0; i < n; i++ {
			if !v.IsValid(i) {
				copy(v.Data[i*w:], slot)
			}
		}
	}
	return v
}

// diffVectors describes the first difference between two vectors, treating
// nil and empty slices alike; it returns "" when they are equal.
func diffVectors(path string, a, b *Vector) string {
	switch {
	case a.Count != b.Count:
		return fmt.Sprintf("%s: count %d vs %d", path, a.Count, b.Count)
	case a.Type.String() != b.Type.String():
		return fmt.Sprintf("%s: type %s vs %s", path, a.Type, b.Type)
	case !bytes.Equal(a.Validity, b.Validity):
		return fmt.Sprintf("%s: validity % x vs % x", path, a.Validity, b.Validity)
	case !bytes.Equal(a.Data, b.Data):
		return fmt.Sprintf("%s: data differs", path)
	case !bytes.Equal(a.Bytes, b.Bytes):
		return fmt.Sprintf("%s: bytes %q vs %q", path, a.Bytes, b.Bytes)
	case fmt.Sprint(a.Offsets) != fmt.Sprint(b.Offsets) && len(a.Offsets)+len(b.Offsets) > 0:
		return fmt.Sprintf("%s: offsets %v vs %v", path, a.Offsets, b.Offsets)
	case fmt.Sprint(a.Entries) != fmt.Sprint(b.Entries) && len(a.Entries)+len(b.Entries) > 0:
		return fmt.Sprintf("%s: entries %v vs %v", path, a.Entries, b.Entries)
	case a.ListSize != b.ListSize || a.GeometryFormat != b.GeometryFormat:
		return fmt.Sprintf("%s: list size or geometry format", path)
	case len(a.Children) != len(b.Children):
		return fmt.Sprintf("%s: %d vs %d children", path, len(a.Children), len(b.Children))
	}
	for i := range a.Children {
		if d := diffVectors(fmt.Sprintf("%s.%d", path, i), a.Children[i], b.Children[i]); d != "" {
			return d
		}
	}
	return ""
}

func TestDataChunkRoundTripRandom(t *testing.T) {
	for _, g := range []Generation{Q1, Q2, Q3} {
		rng := rand.New(rand.NewPCG(uint64(g), 42))
		for iter := 0; iter < 400; iter++ {
			rows := []int{0, 1, 3, 64, 65, 130}[rng.IntN(6)]
			c := &DataChunk{Rows: rows}
			for range 1 + rng.IntN(4) {
				c.Columns = append(c.Columns, randVector(rng, randType(rng, g, 0), rows))
			}
			enc, err := AppendDataChunk(nil, c, g)
			if err != nil {
				t.Fatalf("Q%d iter %d: encode: %v", g, iter, err)
			}
			r := NewReader(enc)
			dec, err := DecodeDataChunk(r, Limits{})
			if err != nil {
				t.Fatalf("Q%d iter %d: decode: %v", g, iter, err)
			}
			if r.Remaining() != 0 {
				t.Fatalf("Q%d iter %d: %d bytes left", g, iter, r.Remaining())
			}
			for i := range c.Columns {
				if d := diffVectors(fmt.Sprintf("col%d(%s)", i, &c.Columns[i].Type), c.Columns[i], dec.Columns[i]); d != "" {
					t.Fatalf("Q%d iter %d: %s", g, iter, d)
				}
			}
			again, err := AppendDataChunk(nil, dec, g)
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("Q%d iter %d: re-encode not byte-exact (%v)", g, iter, err)
			}
		}
	}
}

// TestEncoderNormalisesNullSlots checks that arbitrary bytes in NULL slots,
// stray bits beyond Count and an all-valid mask do not reach the wire.
func TestEncoderNormalisesNullSlots(t *testing.T) {
	mk := func(data []byte, mask byte) *DataChunk {
		return &DataChunk{Rows: 3, Columns: []*Vector{
			{Type: LogicalType{ID: TypeDouble}, Count: 3, Validity: []byte{mask}, Data: data},
			{Type: LogicalType{ID: TypeVarchar}, Count: 3, Validity: []byte{mask}, Offsets: []uint32{0, 1, 3, 4}, Bytes: []byte("abcd")},
		}}
	}
	data := bytes.Repeat([]byte{0x11}, 24)
	got, err := AppendDataChunk(nil, mk(data, 0x05), Q1) // row 1 NULL, high bits clear
	if err != nil {
		t.Fatal(err)
	}
	want := hx(t, `64 00 03 65 00 02 64 00 17 FF FF 64 00 19 FF FF 66 00 02
		64 00 01 65 00 08 FD FF FF FF FF FF FF FF 66 00 18
		  1111111111111111 000000000000F87F 1111111111111111 FF FF
		64 00 01 65 00 08 FD FF FF FF FF FF FF FF 66 00 03 01 61 01 80 01 64 FF FF
		FF FF`)
	assertBytes(t, "normalised", got, want)
	if !bytes.Equal(data, bytes.Repeat([]byte{0x11}, 24)) {
		t.Error("caller data modified")
	}
	allValid, _ := AppendDataChunk(nil, mk(data, 0x07), Q1)
	if bytes.Contains(allValid, []byte{0x65, 0x00, 0x08}) {
		t.Error("mask written for a vector without NULLs")
	}
}

func TestEncoderRejectsInconsistentVectors(t *testing.T) {
	integer := LogicalType{ID: TypeInteger}
	list := LogicalType{ID: TypeList, Child: &integer}
	tests := []struct {
		name string
		v    *Vector
		rows int
	}{
		{"short data", &Vector{Type: integer, Count: 2, Data: make([]byte, 7)}, 2},
		{"count mismatch", &Vector{Type: integer, Count: 1, Data: make([]byte, 4)}, 2},
		{"short validity", &Vector{Type: integer, Count: 9, Validity: []byte{0}, Data: make([]byte, 36)}, 9},
		{"offsets decrease", &Vector{Type: LogicalType{ID: TypeVarchar}, Count: 2, Offsets: []uint32{0, 3, 1}, Bytes: []byte("abc")}, 2},
		{"offset beyond bytes", &Vector{Type: LogicalType{ID: TypeVarchar}, Count: 1, Offsets: []uint32{0, 9}, Bytes: []byte("abc")}, 1},
		{"entry beyond list", &Vector{Type: list, Count: 1, Entries: []ListEntry{{1, 2}}, ListSize: 2,
			Children: []*Vector{{Type: integer, Count: 2, Data: make([]byte, 8)}}}, 1},
		{"list child count", &Vector{Type: list, Count: 1, Entries: []ListEntry{{0, 1}}, ListSize: 1,
			Children: []*Vector{{Type: integer, Count: 2, Data: make([]byte, 8)}}}, 1},
		{"bad decimal", &Vector{Type: LogicalType{ID: TypeDecimal, Width: 40}, Count: 0}, 0},
	}
	for _, tt := range tests {
		in := []byte("prefix")
		out, err := AppendDataChunk(in, &DataChunk{Rows: tt.rows, Columns: []*Vector{tt.v}}, Q1)
		if !errorsIs(err, ErrInvalid) {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		if string(out) != "prefix" {
			t.Errorf("%s: dst changed on error", tt.name)
		}
	}
}

func TestGeneratedMessagesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	chunk := func(g Generation) *DataChunk {
		c := &DataChunk{Rows: 5}
		for range 2 {
			c.Columns = append(c.Columns, randVector(rng, randType(rng, g, 0), 5))
		}
		return c
	}
	u := Hugeint{Upper: -5, Lower: 99}
	for _, g := range []Generation{Q1, Q2, Q3} {
		msgs := []Message{
			&ConnectionRequest{AuthString: "tok", MinVersion: uint64(g), MaxVersion: uint64(g), ClientID: "abcd"},
			&ConnectionResponse{ServerDuckDBVersion: "v", QuackVersion: uint64(g)},
			&PrepareRequest{SQL: "SELECT 1", QueryUUID: u, HasQueryUUID: true},
			&PrepareResponse{Types: []LogicalType{{ID: TypeInteger}}, Names: []string{"a"}, NeedsMoreFetch: true,
				Chunks: []*DataChunk{chunk(g), chunk(g)}, UUID: u},
			&FetchRequest{UUID: u},
			&FetchResponse{Chunks: []*DataChunk{chunk(g)}, BatchIndex: Idx(3)},
			&CancelRequest{UUID: u},
			&Acknowledgement{},
			&ErrorResponse{Message: "boom"},
			&SuccessResponse{}, &DisconnectMessage{},
		}
		switch g {
		case Q1:
			msgs = append(msgs, &AppendRequest{Schema: "main", Table: "t", Chunk: chunk(g)}, &AppendRequest{Table: "t"},
				&ProgressRequest{}, &ProgressResponse{Progress: -1})
		case Q2:
			msgs = append(msgs, &FetchRequest{UUID: u, BatchIndex: 4, AckIndex: 2},
				&SendDataRequest{Schema: "s", Table: "t", Chunks: []*DataChunk{chunk(g)}, QueryUUID: u, BatchIndex: Idx(1),
					SequenceIndex: 2, IsLastInBatch: true, BatchWatermark: Idx(0), DeadRangeEnd: Idx(9)},
				&SendDataResponse{}, &FinalizeRequest{QueryUUID: u})
		case Q3:
			msgs = append(msgs, &FetchRequest{UUID: u, BatchIndex: 4, AckIndex: 2},
				&PrepareRequest{SQL: "x", QueryUUID: u, HasQueryUUID: true, InlineRows: Idx(0)},
				&ConnectionRequest{HeartbeatTimeoutSeconds: 60},
				&SendDataRequest{StreamID: "id", Chunks: []*DataChunk{chunk(g), chunk(g)}, BatchIndex: Idx(1)},
				&SendDataRequest{StreamID: "id", TotalBatches: Idx(1)},
				&FetchResponse{TotalBatches: Idx(2)},
				&SendDataResponse{RowCount: Idx(5)}, &Acknowledgement{UUID: u}, &HeartbeatRequest{},
				&ErrorResponse{Message: "m", ExceptionType: "Catalog"},
				&ErrorResponse{Message: "m", ExceptionType: "FATAL", ExtraInfo: map[string]string{"a": "1", "b": ""}, MustInvalidate: true})
		}
		for _, m := range msgs {
			b, err := AppendMessage(nil, g, Header{ConnectionID: "C", ClientQueryID: Idx(1)}, m)
			if err != nil {
				t.Fatalf("Q%d %T: %v", g, m, err)
			}
			roundTrip(t, g, b)
		}
	}
}

func TestEncodedChunksAreUsedVerbatim(t *testing.T) {
	c := chunkExample()
	enc, err := AppendDataChunk(nil, c, Q1)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []Generation{Q1, Q3} {
		if g == Q3 {
			enc, _ = AppendDataChunk(nil, c, Q3)
		}
		a, _ := AppendMessage(nil, g, Header{}, &FetchResponse{Chunks: []*DataChunk{c, c}, BatchIndex: Idx(1)})
		b, err := AppendMessage(nil, g, Header{}, &FetchResponse{Encoded: [][]byte{enc, enc}, BatchIndex: Idx(1)})
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("Q%d: Encoded chunks differ from Chunks (%v)", g, err)
		}
	}
	if _, err := AppendMessage(nil, Q1, Header{}, &FetchResponse{Encoded: [][]byte{{1, 2, 3}}}); !errorsIs(err, ErrInvalid) {
		t.Errorf("garbage pre-encoded chunk accepted: %v", err)
	}
}

func TestMessageGenerationChecks(t *testing.T) {
	tests := []struct {
		g    Generation
		m    Message
		kind error
	}{
		{Q2, &AppendRequest{}, ErrUnsupportedMessage},
		{Q1, &SendDataRequest{}, ErrUnsupportedMessage},
		{Q1, &HeartbeatRequest{}, ErrUnsupportedMessage},
		{Q3, &FinalizeRequest{}, ErrUnsupportedMessage},
		{Q3, &ProgressRequest{}, ErrUnsupportedMessage},
		{Q1, &FetchRequest{BatchIndex: 1}, ErrInvalid},
		{Q1, &ConnectionRequest{HeartbeatTimeoutSeconds: 1}, ErrInvalid},
		{Q2, &FetchResponse{TotalBatches: Idx(1)}, ErrInvalid},
		{Q3, &SendDataRequest{Table: "t"}, ErrInvalid},
		{Q2, &SendDataRequest{StreamID: "s"}, ErrInvalid},
		{Q1, &PrepareRequest{QueryUUID: Hugeint{0, 1}}, ErrInvalid},
		{4, &SuccessResponse{}, ErrInvalid},
	}
	for _, tt := range tests {
		if _, err := AppendMessage(nil, tt.g, Header{}, tt.m); !errorsIs(err, tt.kind) {
			t.Errorf("Q%d %T: err = %v, want %v", tt.g, tt.m, err, tt.kind)
		}
	}
	if _, err := AppendMessage(nil, Q1, Header{Type: MsgFetchRequest}, &SuccessResponse{}); !errorsIs(err, ErrInvalid) {
		t.Errorf("header/body type mismatch: %v", err)
	}
	for _, typ := range []MessageType{0, 5, 6, 17, 99, 200} {
		b := AppendHeader(nil, Header{Type: typ})
		if _, _, err := DecodeMessage(append(b, 0xFF, 0xFF), Q3, Limits{}); !errorsIs(err, ErrUnsupportedMessage) {
			t.Errorf("type %d: %v", typ, err)
		}
	}
}
