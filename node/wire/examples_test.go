package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// hx parses a spec-style hex dump ("64 00 0D  FF FF"); whitespace is ignored.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func assertBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got  % X\n want % X", what, got, want)
	}
}

const unsetHex = "FF FF FF FF FF FF FF FF FF 01"

func TestHeaderExamples(t *testing.T) { // §5.1
	tests := []struct {
		h    Header
		want string
	}{
		{Header{Type: MsgPrepareRequest, ConnectionID: "c0ffee", ClientQueryID: Idx(7)},
			"01 00 03  02 00 06 63 30 66 66 65 65  03 00 07  FF FF"},
		{Header{Type: MsgPrepareRequest, ConnectionID: "c0ffee"},
			"01 00 03  02 00 06 63 30 66 66 65 65  03 00" + unsetHex + " FF FF"},
		{Header{Type: MsgConnectionRequest}, "01 00 01  03 00 " + unsetHex + "  FF FF"},
	}
	for _, tt := range tests {
		want := hx(t, tt.want)
		assertBytes(t, "header", AppendHeader(nil, tt.h), want)
		h, r, err := DecodeHeader(want)
		if err != nil || h != tt.h || r.Remaining() != 0 {
			t.Errorf("DecodeHeader = %+v, %v", h, err)
		}
	}
}

func TestLogicalTypeExamples(t *testing.T) { // §5.3, §6.4
	integer := LogicalType{ID: TypeInteger}
	varchar := LogicalType{ID: TypeVarchar}
	kv := LogicalType{ID: TypeStruct, Fields: []Field{{"key", varchar}, {"value", integer}}}
	tests := []struct {
		t    LogicalType
		sql  string
		want string
	}{
		{integer, "INTEGER", "64 00 0D FF FF"},
		{LogicalType{ID: TypeBigInt}, "BIGINT", "64 00 0E FF FF"},
		{varchar, "VARCHAR", "64 00 19 FF FF"},
		{LogicalType{ID: TypeBoolean}, "BOOLEAN", "64 00 0A FF FF"},
		{LogicalType{ID: TypeDouble}, "DOUBLE", "64 00 17 FF FF"},
		{LogicalType{ID: TypeDate}, "DATE", "64 00 0F FF FF"},
		{LogicalType{ID: TypeTimestamp}, "TIMESTAMP", "64 00 13 FF FF"},
		{LogicalType{ID: TypeTimestampTZ}, "TIMESTAMP WITH TIME ZONE", "64 00 20 FF FF"},
		{LogicalType{ID: TypeUUID}, "UUID", "64 00 36 FF FF"},
		{LogicalType{ID: TypeHugeInt}, "HUGEINT", "64 00 32 FF FF"},
		{LogicalType{ID: TypeDecimal, Width: 18, Scale: 3}, "DECIMAL(18,3)",
			"64 00 15 65 00 01 64 00 02 C8 00 12 C9 00 03 FF FF FF FF"},
		{LogicalType{ID: TypeDecimal, Width: 10}, "DECIMAL(10,0)",
			"64 00 15 65 00 01 64 00 02 C8 00 0A FF FF FF FF"},
		{LogicalType{ID: TypeList, Child: &varchar}, "VARCHAR[]",
			"64 00 65 65 00 01 64 00 04 C8 00 64 00 19 FF FF FF FF FF FF"},
		{LogicalType{ID: TypeArray, Child: &integer, ArraySize: 3}, "INTEGER[3]",
			"64 00 6C 65 00 01 64 00 09 C8 00 64 00 0D FF FF C9 00 03 FF FF FF FF"},
		{LogicalType{ID: TypeStruct, Fields: []Field{{"a", integer}, {"b", varchar}}}, "STRUCT(a INTEGER, b VARCHAR)",
			`64 00 64 65 00 01 64 00 05 C8 00 02
			 00 00 01 61 01 00 64 00 0D FF FF FF FF
			 00 00 01 62 01 00 64 00 19 FF FF FF FF
			 FF FF FF FF`},
		{LogicalType{ID: TypeMap, Child: &kv}, "MAP(VARCHAR, INTEGER)",
			`64 00 66 65 00 01 64 00 04 C8 00
			 64 00 64 65 00 01 64 00 05 C8 00 02
			   00 00 03 6B 65 79 01 00 64 00 19 FF FF FF FF
			   00 00 05 76 61 6C 75 65 01 00 64 00 0D FF FF FF FF
			 FF FF FF FF
			 FF FF FF FF`},
		{LogicalType{ID: TypeEnum, EnumValues: []string{"a", "b"}}, "ENUM('a', 'b')",
			"64 00 68 65 00 01 64 00 06 C8 00 02 C9 00 02 01 61 01 62 FF FF FF FF"},
		{LogicalType{ID: TypeEnum, EnumValues: []string{"sad", "ok", "happy"}}, "ENUM('sad', 'ok', 'happy')",
			"64 00 68 65 00 01 64 00 06 C8 00 03 C9 00 03 03 73 61 64 02 6F 6B 05 68 61 70 70 79 FF FF FF FF"},
		{LogicalType{ID: TypeUnion, Fields: []Field{{"", LogicalType{ID: TypeUTinyInt}}, {"i", integer}, {"s", varchar}}},
			"UNION(i INTEGER, s VARCHAR)",
			`64 00 6B 65 00 01 64 00 05 C8 00 03
			 00 00 00 01 00 64 00 1C FF FF FF FF
			 00 00 01 69 01 00 64 00 0D FF FF FF FF
			 00 00 01 73 01 00 64 00 19 FF FF FF FF
			 FF FF FF FF`},
		{LogicalType{ID: TypeVarchar, Alias: "JSON"}, "JSON",
			"64 00 19 65 00 01 64 00 01 65 00 04 4A 53 4F 4E FF FF FF FF"},
		{LogicalType{ID: TypeVarchar, Collation: "nocase"}, "VARCHAR COLLATE nocase",
			"64 00 19 65 00 01 64 00 03 C8 00 06 6E 6F 63 61 73 65 FF FF FF FF"},
	}
	for _, tt := range tests {
		want := hx(t, tt.want)
		got, err := AppendLogicalType(nil, &tt.t, Q1)
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		assertBytes(t, tt.sql, got, want)
		r := NewReader(want)
		dec, err := DecodeLogicalType(r, Limits{})
		if err != nil || r.Remaining() != 0 {
			t.Errorf("%s: decode: %v (%d left)", tt.sql, err, r.Remaining())
			continue
		}
		if !reflect.DeepEqual(dec, tt.t) {
			t.Errorf("%s: decoded %+v", tt.sql, dec)
		}
		if s := dec.String(); s != tt.sql {
			t.Errorf("String() = %q, want %q", s, tt.sql)
		}
	}
}

func TestTupleAndTimestampTZNS(t *testing.T) {
	tuple := LogicalType{ID: TypeTuple, Fields: []Field{{"", LogicalType{ID: TypeInteger}}}}
	q1, err := AppendLogicalType(nil, &tuple, Q1)
	if err != nil {
		t.Fatal(err)
	}
	assertBytes(t, "TUPLE at V1_5_0", q1, hx(t, "64 00 64 65 00 01 64 00 05 C8 00 01 00 00 00 01 00 64 00 0D FF FF FF FF FF FF FF FF"))
	q3, _ := AppendLogicalType(nil, &tuple, Q3)
	if q3[2] != byte(TypeTuple) {
		t.Errorf("TUPLE at V2_0_0 written as id %d", q3[2])
	}
	// As DuckDB 2.0's typeof(ROW(1)) and typeof(ROW()) print them.
	if tuple.String() != "TUPLE(INTEGER)" {
		t.Errorf("TUPLE renders as %q", tuple.String())
	}
	if s := (LogicalType{ID: TypeTuple}).String(); s != "TUPLE" {
		t.Errorf("empty TUPLE renders as %q", s)
	}
	tz := LogicalType{ID: TypeTimestampTZNS}
	if _, err := AppendLogicalType(nil, &tz, Q1); err == nil {
		t.Error("TIMESTAMP_TZ_NS accepted for Q1")
	}
}

// TestVariantTimestampTZNSBeforeQ3: a VARIANT holding a TIMESTAMPTZ_NS
// (value type id 34, which DuckDB 1.5's VARIANT lacks) is refused for Q1,
// as a TIMESTAMP_TZ_NS column is, and written for Q3.
func TestVariantTimestampTZNSBeforeQ3(t *testing.T) {
	list := func(child LogicalType) LogicalType { return LogicalType{ID: TypeList, Child: &child} }
	fields := []Field{
		{"keys", list(LogicalType{ID: TypeVarchar})},
		{"children", list(LogicalType{ID: TypeStruct, Fields: []Field{{"keys_index", LogicalType{ID: TypeUInteger}}, {"values_index", LogicalType{ID: TypeUInteger}}}})},
		{"values", list(LogicalType{ID: TypeStruct, Fields: []Field{{"type_id", LogicalType{ID: TypeUTinyInt}}, {"byte_offset", LogicalType{ID: TypeUInteger}}}})},
		{"data", LogicalType{ID: TypeBlob}},
	}
	for _, tc := range []struct {
		typeID uint8
		q1     bool
	}{{34, false}, {27, true}} {
		v, err := NewVector(LogicalType{ID: TypeStruct, Fields: fields},
			[]any{[]any{[]any{}, []any{}, []any{[]any{tc.typeID, uint32(0)}}, make([]byte, 8)}, nil})
		if err != nil {
			t.Fatal(err)
		}
		v.Type.ID = TypeVariant
		c := &DataChunk{Rows: 2, Columns: []*Vector{v}}
		_, err = AppendDataChunk(nil, c, Q1)
		if tc.q1 != (err == nil) || err != nil && !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("type id %d for Q1: %v", tc.typeID, err)
		}
		if _, err := AppendDataChunk(nil, c, Q3); err != nil {
			t.Errorf("type id %d for Q3: %v", tc.typeID, err)
		}
	}
}

func TestLogicalTypeRejects(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		kind error
	}{
		{"binder-only ANY", "64 00 03 FF FF", ErrUnsupportedType},
		{"TABLE", "64 00 67 FF FF", ErrUnsupportedType},
		{"unknown id", "64 00 2A FF FF", ErrUnsupportedType},
		{"modifiers field 102", "64 00 19 65 00 01 64 00 01 66 00 00 FF FF FF FF", ErrUnsupportedType},
		{"extension info 103", "64 00 19 65 00 01 64 00 01 67 00 00 FF FF FF FF", ErrUnsupportedType},
		{"LIST without info", "64 00 65 FF FF", ErrMalformed},
		{"DECIMAL width 39", "64 00 15 65 00 01 64 00 02 C8 00 27 FF FF FF FF", ErrMalformed},
		{"INTEGER with list info", "64 00 0D 65 00 01 64 00 04 C8 00 64 00 0D FF FF FF FF FF FF", ErrMalformed},
		{"ENUM count mismatch", "64 00 68 65 00 01 64 00 06 C8 00 03 C9 00 02 01 61 01 62 FF FF FF FF", ErrMalformed},
		{"truncated", "64 00 15 65 00 01 64 00 02 C8", ErrTruncated},
		{"id over 255", "64 00 80 02 FF FF", ErrMalformed},
	}
	for _, tt := range tests {
		_, err := DecodeLogicalType(NewReader(hx(t, tt.hex)), Limits{})
		if !errorsIs(err, tt.kind) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.kind)
		}
	}
}

// chunkExample is the DataChunk of §5.4: INTEGER [1, NULL], VARCHAR ['hi', 'duck'].
func chunkExample() *DataChunk {
	return &DataChunk{Rows: 2, Columns: []*Vector{
		{Type: LogicalType{ID: TypeInteger}, Count: 2, Validity: []byte{0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
			Data: []byte{1, 0, 0, 0, 0x55, 0x55, 0x55, 0x55}},
		{Type: LogicalType{ID: TypeVarchar}, Count: 2, Offsets: []uint32{0, 2, 6}, Bytes: []byte("hiduck")},
	}}
}

func TestDataChunkExample(t *testing.T) { // §5.4
	common := `64 00 02
		65 00 02 64 00 0D FF FF 64 00 19 FF FF
		66 00 02
		  64 00 01 65 00 08 FD FF FF FF FF FF FF FF 66 00 08 01 00 00 00 00 00 00 80 FF FF`
	v2 := hx(t, common+` 64 00 00 6B 00 06 6C 00 08 02 00 00 00 04 00 00 00 6D 00 06 68 69 64 75 63 6B FF FF FF FF`)
	v1 := hx(t, common+` 64 00 00 66 00 02 02 68 69 04 64 75 63 6B FF FF FF FF`)
	c := chunkExample()
	before := append([]byte(nil), c.Columns[0].Data...)
	for _, tt := range []struct {
		g    Generation
		want []byte
	}{{Q1, v1}, {Q2, v1}, {Q3, v2}} {
		got, err := AppendDataChunk(nil, c, tt.g)
		if err != nil {
			t.Fatal(err)
		}
		assertBytes(t, "chunk", got, tt.want)
		dec, err := DecodeDataChunk(NewReader(tt.want), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if dec.Rows != 2 || dec.Columns[0].IsValid(1) || stringAt(t, dec.Columns[1], 1) != "duck" {
			t.Errorf("decoded %+v", dec)
		}
	}
	if !bytes.Equal(c.Columns[0].Data, before) {
		t.Error("encoder modified the caller's vector")
	}
}

func TestMessageExamples(t *testing.T) { // §5.2, §5.5
	one := &DataChunk{Rows: 1, Columns: []*Vector{{Type: LogicalType{ID: TypeInteger}, Count: 1, Data: []byte{42, 0, 0, 0}}}}
	bareChunk := "64 00 01 65 00 01 64 00 0D FF FF 66 00 01 64 00 00 66 00 04 2A 00 00 00 FF FF FF FF"
	noConn := func(t MessageType) Header { return Header{Type: t} }
	tests := []struct {
		name string
		g    Generation
		h    Header
		body Message
		want string
	}{
		{"Q1 PREPARE", Q1, Header{Type: MsgPrepareRequest, ConnectionID: "c0ffee"}, &PrepareRequest{SQL: "SELECT 42"},
			"01 00 03 02 00 06 63 30 66 66 65 65 03 00 " + unsetHex + " FF FF  01 00 09 53 45 4C 45 43 54 20 34 32 FF FF"},
		{"Q2 PREPARE with uuid", Q2, Header{Type: MsgPrepareRequest, ConnectionID: "c0ffee"},
			&PrepareRequest{SQL: "SELECT 42", HasQueryUUID: true, QueryUUID: Hugeint{Upper: 0x0123456789abcdef, Lower: 0xfedcba9876543210}},
			"01 00 03 02 00 06 63 30 66 66 65 65 03 00 " + unsetHex + ` FF FF
			 01 00 09 53 45 4C 45 43 54 20 34 32
			 02 00 EF 9B AF CD F8 AC D1 91 01 90 E4 D0 B2 87 D3 AE EE FE 01 FF FF`},
		{"Q1 CONNECTION_REQUEST", Q1, noConn(MsgConnectionRequest),
			&ConnectionRequest{AuthString: "super_secret", ClientDuckDBVersion: "v1.5.2", ClientPlatform: "linux_amd64", MinVersion: 1, MaxVersion: 1},
			"01 00 01 03 00 " + unsetHex + ` FF FF
			 01 00 0C 73 75 70 65 72 5F 73 65 63 72 65 74 02 00 06 76 31 2E 35 2E 32
			 03 00 0B 6C 69 6E 75 78 5F 61 6D 64 36 34 04 00 01 05 00 01 FF FF`},
		{"Q3 CONNECTION_REQUEST", Q3, noConn(MsgConnectionRequest),
			&ConnectionRequest{AuthString: "super_secret", ClientDuckDBVersion: "v1.5.2", ClientPlatform: "linux_amd64", MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: 60},
			"01 00 01 03 00 " + unsetHex + ` FF FF
			 01 00 0C 73 75 70 65 72 5F 73 65 63 72 65 74 02 00 06 76 31 2E 35 2E 32
			 03 00 0B 6C 69 6E 75 78 5F 61 6D 64 36 34 04 00 03 05 00 03 07 00 3C FF FF`},
		{"Q1 CONNECTION_RESPONSE", Q1, Header{Type: MsgConnectionResponse, ConnectionID: "0123456789ABCDEF0123456789ABCDEF"},
			&ConnectionResponse{ServerDuckDBVersion: "v1.5.2", ServerPlatform: "linux_amd64", QuackVersion: 1},
			"01 00 02 02 00 20 " + hex.EncodeToString([]byte("0123456789ABCDEF0123456789ABCDEF")) + " 03 00 " + unsetHex + ` FF FF
			 01 00 06 76 31 2E 35 2E 32 02 00 0B 6C 69 6E 75 78 5F 61 6D 64 36 34 03 00 01 FF FF`},
		{"Q1 PREPARE_RESPONSE", Q1, noConn(MsgPrepareResponse),
			&PrepareResponse{Types: []LogicalType{{ID: TypeInteger}}, Names: []string{"answer"}, Chunks: []*DataChunk{one}, UUID: Hugeint{1, 2}},
			"01 00 04 03 00 " + unsetHex + ` FF FF
			 01 00 01 64 00 0D FF FF 02 00 01 06 61 6E 73 77 65 72
			 04 00 01 01 2C 01 ` + bareChunk + ` FF FF
			 05 00 01 02 FF FF`},
		{"ERROR_RESPONSE", Q1, noConn(MsgErrorResponse), &ErrorResponse{Message: "Authentication failed"},
			"01 00 64 03 00 " + unsetHex + " FF FF 01 00 15 41 75 74 68 65 6E 74 69 63 61 74 69 6F 6E 20 66 61 69 6C 65 64 FF FF"},
		{"SUCCESS_RESPONSE", Q1, noConn(MsgSuccessResponse), &SuccessResponse{}, "01 00 0A 03 00 " + unsetHex + " FF FF  FF FF"},
		{"Q1 end FETCH_RESPONSE", Q1, noConn(MsgFetchResponse), &FetchResponse{},
			"01 00 08 03 00 " + unsetHex + " FF FF  02 00 " + unsetHex + " FF FF"},
		{"Q3 FETCH_RESPONSE", Q3, noConn(MsgFetchResponse), &FetchResponse{Chunks: []*DataChunk{one}, BatchIndex: Idx(1)},
			"01 00 08 03 00 " + unsetHex + " FF FF  01 00 01 03 00 01 FF FF " + bareChunk},
		{"Q3 terminal FETCH_RESPONSE", Q3, noConn(MsgFetchResponse), &FetchResponse{TotalBatches: Idx(5)},
			"01 00 08 03 00 " + unsetHex + " FF FF  02 00 05 FF FF"},
		{"Q3 SEND_DATA_REQUEST", Q3, Header{Type: MsgSendDataRequest, ConnectionID: "c"},
			&SendDataRequest{StreamID: "s", BatchIndex: Idx(2), Chunks: []*DataChunk{one}},
			"01 00 09 02 00 01 63 03 00 " + unsetHex + " FF FF  01 00 01 73 02 00 01 04 00 02 FF FF " + bareChunk},
		{"Q3 ACKNOWLEDGEMENT", Q3, noConn(MsgAcknowledgement), &Acknowledgement{UUID: Hugeint{0, 7}},
			"01 00 0F 03 00 " + unsetHex + " FF FF  01 00 00 07 FF FF"},
		{"Q3 HEARTBEAT", Q3, noConn(MsgHeartbeatRequest), &HeartbeatRequest{}, "01 00 10 03 00 " + unsetHex + " FF FF  FF FF"},
		{"Q2 FINALIZE", Q2, noConn(MsgFinalize), &FinalizeRequest{QueryUUID: Hugeint{0, 1}, MinBatchWatermark: Idx(3)},
			"01 00 0D 03 00 " + unsetHex + " FF FF  01 00 00 01 02 00 03 FF FF"},
		{"Q2 SEND_DATA_RESPONSE", Q2, noConn(MsgSendDataResponse), &SendDataResponse{},
			"01 00 0E 03 00 " + unsetHex + " FF FF  01 00 " + unsetHex + " FF FF"},
		{"Q1 PROGRESS_RESPONSE", Q1, noConn(MsgProgressResponse), &ProgressResponse{Progress: 0},
			"01 00 0E 03 00 " + unsetHex + " FF FF  01 00 00 00 00 00 00 00 00 00 FF FF"},
	}
	for _, tt := range tests {
		want := hx(t, tt.want)
		got, err := AppendMessage(nil, tt.g, tt.h, tt.body)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		assertBytes(t, tt.name, got, want)
		h, m, err := DecodeMessage(want, tt.g, Limits{})
		if err != nil {
			t.Errorf("%s: decode: %v", tt.name, err)
			continue
		}
		if h != tt.h {
			t.Errorf("%s: header %+v", tt.name, h)
		}
		again, err := AppendMessage(nil, tt.g, h, m)
		if err != nil || !bytes.Equal(again, want) {
			t.Errorf("%s: decode/encode not byte-exact (%v)", tt.name, err)
		}
	}
}

func TestVectorExamples(t *testing.T) { // §7.9
	integer := LogicalType{ID: TypeInteger}
	varchar := LogicalType{ID: TypeVarchar}
	tests := []struct {
		name  string
		t     LogicalType
		count int
		hex   string
		check func(t *testing.T, v *Vector)
		flat  bool // the encoder reproduces the bytes
	}{
		{"constant INTEGER 7", integer, 3, "5A 00 02  64 00 00  66 00 04 07 00 00 00  FF FF",
			func(t *testing.T, v *Vector) {
				assertBytes(t, "data", v.Data, hx(t, "07000000 07000000 07000000"))
			}, false},
		{"sequence 10 step 1", integer, 3, "5A 00 04  5B 00 0A  5C 00 01  FF FF",
			func(t *testing.T, v *Vector) {
				assertBytes(t, "data", v.Data, hx(t, "0A000000 0B000000 0C000000"))
			}, false},
		{"dictionary VARCHAR V2_0_0", varchar, 5, `5A 00 03
			5B 00 14 00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
			5C 00 02
			64 00 00 6B 00 02 6C 00 08 01 00 00 00 01 00 00 00 6D 00 02 61 62 FF FF`,
			func(t *testing.T, v *Vector) {
				if string(v.Bytes) != "abaaa" || v.Offsets[5] != 5 {
					t.Errorf("dictionary decoded to %q %v", v.Bytes, v.Offsets)
				}
			}, false},
		{"BOOLEAN [true, false, NULL]", LogicalType{ID: TypeBoolean}, 3,
			"64 00 01  65 00 08 FB FF FF FF FF FF FF FF  66 00 03 01 00 80  FF FF",
			func(t *testing.T, v *Vector) {
				if !v.IsValid(0) || !v.IsValid(1) || v.IsValid(2) {
					t.Error("validity wrong")
				}
			}, true},
		{"LIST(INTEGER) [[1,2], NULL]", LogicalType{ID: TypeList, Child: &integer}, 2, `
			64 00 01  65 00 08 FD FF FF FF FF FF FF FF
			68 00 02
			69 00 02  64 00 00 65 00 02 FF FF  64 00 00 65 00 00 FF FF
			6A 00  64 00 00 66 00 08 01 00 00 00 02 00 00 00 FF FF
			FF FF`,
			func(t *testing.T, v *Vector) {
				if v.ListSize != 2 || v.Entries[0] != (ListEntry{0, 2}) || v.IsValid(1) {
					t.Errorf("list %+v", v)
				}
			}, true},
		{"INTEGER[2] [[5,6]]", LogicalType{ID: TypeArray, Child: &integer, ArraySize: 2}, 1,
			"64 00 00  67 00 02  68 00 64 00 00 66 00 08 05 00 00 00 06 00 00 00 FF FF  FF FF",
			func(t *testing.T, v *Vector) {
				assertBytes(t, "child", v.Children[0].Data, hx(t, "05000000 06000000"))
			}, true},
		{"STRUCT V2_0_0", LogicalType{ID: TypeStruct, Fields: []Field{{"a", integer}, {"b", varchar}}}, 1, `
			64 00 00
			67 00 02
			  64 00 00 66 00 04 01 00 00 00 FF FF
			  64 00 00 6B 00 01 6C 00 04 01 00 00 00 6D 00 01 78 FF FF
			FF FF`,
			func(t *testing.T, v *Vector) {
				if stringAt(t, v.Children[1], 0) != "x" {
					t.Error("child b wrong")
				}
			}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hx(t, tt.hex)
			d := newDecoder(NewReader(in), Limits{})
			v, err := d.vector(&tt.t, tt.count, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.r.Remaining() != 0 {
				t.Fatalf("%d bytes left", d.r.Remaining())
			}
			tt.check(t, v)
			if !tt.flat {
				return
			}
			e := vectorEncoder{blob: strings.Contains(tt.name, "V2_0_0")}
			if err := e.vector(&tt.t, v, tt.count, 0); err != nil {
				t.Fatal(err)
			}
			assertBytes(t, "re-encoded", e.buf, in)
		})
	}
}

func errorsIs(err, target error) bool { return err != nil && errors.Is(err, target) }
