package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
)

// ErrorCodeHeader is the HTTP header with which a duckraft node answers
// some ERROR_RESPONSEs: a machine-readable code beside the message, for its
// peers (the codes and what they stand for are node/outcome's). DuckDB's
// own server never sends it, and DuckDB's client ignores it.
const ErrorCodeHeader = "Duckraft-Error"

// MemberHeader is the HTTP header in which a cluster's member sends the
// members' credential with its Quack requests (the sessions a node opens on
// another to route its clients' reads). A server given that credential
// counts such sessions apart from its clients' and admits their requests
// past the limits that keep one client from exhausting it for the others;
// DuckDB's server ignores the header.
const MemberHeader = "Duckraft-Member"

// MessageType is field 1 of the message header (§8.2). A few values mean
// different messages in different generations; the constants carry both
// names.
type MessageType uint8

// MessageType values.
const (
	MsgConnectionRequest  MessageType = 1
	MsgConnectionResponse MessageType = 2
	MsgPrepareRequest     MessageType = 3
	MsgPrepareResponse    MessageType = 4
	MsgFetchRequest       MessageType = 7
	MsgFetchResponse      MessageType = 8
	MsgAppendRequest      MessageType = 9 // Q1
	MsgSendDataRequest    MessageType = 9 // Q2, Q3
	MsgSuccessResponse    MessageType = 10
	MsgDisconnect         MessageType = 11
	MsgCancelRequest      MessageType = 12
	MsgProgressRequest    MessageType = 13 // Q1 (c853cd38 clients)
	MsgFinalize           MessageType = 13 // Q2
	MsgProgressResponse   MessageType = 14 // Q1 (c853cd38 servers)
	MsgSendDataResponse   MessageType = 14 // Q2, Q3
	MsgAcknowledgement    MessageType = 15
	MsgHeartbeatRequest   MessageType = 16 // Q3
	MsgErrorResponse      MessageType = 100
)

var messageNames = map[MessageType]string{
	MsgConnectionRequest:  "CONNECTION_REQUEST",
	MsgConnectionResponse: "CONNECTION_RESPONSE",
	MsgPrepareRequest:     "PREPARE_REQUEST",
	MsgPrepareResponse:    "PREPARE_RESPONSE",
	MsgFetchRequest:       "FETCH_REQUEST",
	MsgFetchResponse:      "FETCH_RESPONSE",
	MsgAppendRequest:      "APPEND_REQUEST/SEND_DATA_REQUEST",
	MsgSuccessResponse:    "SUCCESS_RESPONSE",
	MsgDisconnect:         "DISCONNECT_MESSAGE",
	MsgCancelRequest:      "CANCEL_REQUEST",
	MsgProgressRequest:    "PROGRESS_REQUEST/FINALIZE",
	MsgProgressResponse:   "PROGRESS_RESPONSE/SEND_DATA_RESPONSE",
	MsgAcknowledgement:    "ACKNOWLEDGEMENT",
	MsgHeartbeatRequest:   "HEARTBEAT_REQUEST",
	MsgErrorResponse:      "ERROR_RESPONSE",
}

// String returns the DuckDB name of t; values whose meaning depends on the
// generation carry both names.
func (t MessageType) String() string {
	if s, ok := messageNames[t]; ok {
		return s
	}
	return "MESSAGE_TYPE_" + strconv.Itoa(int(t))
}

// Header is the header object that starts every message (§8.1).
type Header struct {
	Type MessageType
	// ConnectionID is the session id; empty in CONNECTION_REQUEST and in
	// every response but CONNECTION_RESPONSE.
	ConnectionID string
	// ClientQueryID is the client's local query id, for log correlation.
	ClientQueryID OptIdx
}

// Message is the body of a Quack message. The concrete types are the
// pointer types of this package (*PrepareRequest, ...).
type Message interface {
	// Type returns the header type of the message.
	Type() MessageType
}

// ConnectionRequest (1) opens a session.
type ConnectionRequest struct {
	AuthString          string
	ClientDuckDBVersion string
	ClientPlatform      string
	MinVersion          uint64
	MaxVersion          uint64
	// ClientID is field 6; it is written whenever it is set, which only Q3
	// and some late Q1/Q2 peers understand.
	ClientID string
	// HeartbeatTimeoutSeconds is the Q3 lease (field 7).
	HeartbeatTimeoutSeconds uint64
}

// ConnectionResponse (2) accepts a session; the new id travels in the
// header.
type ConnectionResponse struct {
	ServerDuckDBVersion     string
	ServerPlatform          string
	QuackVersion            uint64
	HeartbeatTimeoutSeconds uint64 // Q3 only
}

// PrepareRequest (3) executes SQL.
type PrepareRequest struct {
	SQL       string
	QueryUUID Hugeint
	// HasQueryUUID reports whether field 2 is present. Q2 and Q3 always
	// carry it; in Q1 only c853cd38-era clients do, and the encoder writes
	// it for Q1 only when this is set.
	HasQueryUUID bool
	InlineRows   OptIdx // Q3 only
}

// PrepareResponse (4) carries the result shape and its leading chunks.
type PrepareResponse struct {
	Types          []LogicalType
	Names          []string
	NeedsMoreFetch bool
	Chunks         []*DataChunk
	// Encoded, when non-nil, replaces Chunks on encoding: each element is
	// one DataChunk object exactly as AppendDataChunk produced it.
	Encoded [][]byte
	UUID    Hugeint
}

// FetchRequest (7) asks for the next batch of a result.
type FetchRequest struct {
	UUID       Hugeint
	BatchIndex uint64 // Q2 (late) and Q3
	AckIndex   uint64 // Q2 (late) and Q3
}

// FetchResponse (8) carries one batch. In Q1/Q2 no chunks means the end of
// the result; in Q3 the terminal response sets TotalBatches instead.
type FetchResponse struct {
	Chunks []*DataChunk
	// Encoded, when non-nil, replaces Chunks on encoding (see
	// PrepareResponse.Encoded).
	Encoded      [][]byte
	BatchIndex   OptIdx
	TotalBatches OptIdx // Q3 only
}

// AppendRequest (9, Q1 only) appends one chunk to a table.
type AppendRequest struct {
	Schema string
	Table  string
	Chunk  *DataChunk
}

// SendDataRequest (9, Q2 and Q3) streams chunks to the server. The two
// generations have different bodies; the fields of the other generation
// must be zero when encoding.
type SendDataRequest struct {
	// Q2 fields.
	Schema         string
	Table          string
	QueryUUID      Hugeint
	SequenceIndex  uint64
	IsLastInBatch  bool
	BatchWatermark OptIdx
	DeadRangeEnd   OptIdx
	// Q3 fields.
	StreamID     string
	TotalBatches OptIdx
	// Both.
	BatchIndex OptIdx
	Chunks     []*DataChunk
	// Encoded, when non-nil, replaces Chunks on encoding (see
	// PrepareResponse.Encoded).
	Encoded [][]byte
}

// SendDataResponse (14, Q2 and Q3) answers a SendDataRequest.
type SendDataResponse struct {
	AcceptBudget OptIdx
	RowCount     OptIdx // Q3 only
}

// FinalizeRequest (13, Q2 only) closes a SEND_DATA stream.
type FinalizeRequest struct {
	QueryUUID         Hugeint
	MinBatchWatermark OptIdx
}

// CancelRequest (12) interrupts the session's query; UUID 0 matches any.
type CancelRequest struct {
	UUID Hugeint
}

// Acknowledgement (15) releases a retained result. Only Q3 carries the
// uuid; earlier variants have no fields.
type Acknowledgement struct {
	UUID Hugeint
}

// ProgressResponse (14, Q1 c853cd38 only) reports query progress in percent.
type ProgressResponse struct {
	Progress float64
}

// ErrorResponse (100) carries the raw DuckDB error message (without the
// "<Type> Error: " prefix). From Q3 on it also names the exception type
// (Exception::ExceptionTypeToString: "Catalog", "Constraint", …), which a
// DuckDB 2.0 client raises again, extra information and whether the
// server's database must be invalidated; a Q1 body has the message only.
type ErrorResponse struct {
	Message        string
	ExceptionType  string
	ExtraInfo      map[string]string
	MustInvalidate bool
}

// SuccessResponse (10) has no fields.
type SuccessResponse struct{}

// DisconnectMessage (11) has no fields.
type DisconnectMessage struct{}

// HeartbeatRequest (16, Q3 only) has no fields.
type HeartbeatRequest struct{}

// ProgressRequest (13, Q1 c853cd38 only) has no fields.
type ProgressRequest struct{}

// Type implements Message.
func (*ConnectionRequest) Type() MessageType { return MsgConnectionRequest }

// Type implements Message.
func (*ConnectionResponse) Type() MessageType { return MsgConnectionResponse }

// Type implements Message.
func (*PrepareRequest) Type() MessageType { return MsgPrepareRequest }

// Type implements Message.
func (*PrepareResponse) Type() MessageType { return MsgPrepareResponse }

// Type implements Message.
func (*FetchRequest) Type() MessageType { return MsgFetchRequest }

// Type implements Message.
func (*FetchResponse) Type() MessageType { return MsgFetchResponse }

// Type implements Message.
func (*AppendRequest) Type() MessageType { return MsgAppendRequest }

// Type implements Message.
func (*SendDataRequest) Type() MessageType { return MsgSendDataRequest }

// Type implements Message.
func (*SendDataResponse) Type() MessageType { return MsgSendDataResponse }

// Type implements Message.
func (*FinalizeRequest) Type() MessageType { return MsgFinalize }

// Type implements Message.
func (*CancelRequest) Type() MessageType { return MsgCancelRequest }

// Type implements Message.
func (*Acknowledgement) Type() MessageType { return MsgAcknowledgement }

// Type implements Message.
func (*ProgressResponse) Type() MessageType { return MsgProgressResponse }

// Type implements Message.
func (*ErrorResponse) Type() MessageType { return MsgErrorResponse }

// Type implements Message.
func (*SuccessResponse) Type() MessageType { return MsgSuccessResponse }

// Type implements Message.
func (*DisconnectMessage) Type() MessageType { return MsgDisconnect }

// Type implements Message.
func (*HeartbeatRequest) Type() MessageType { return MsgHeartbeatRequest }

// Type implements Message.
func (*ProgressRequest) Type() MessageType { return MsgProgressRequest }

// newBody returns an empty body for message type t of generation g, or nil
// when g does not define t.
func newBody(g Generation, t MessageType) Message {
	switch t {
	case MsgConnectionRequest:
		return &ConnectionRequest{}
	case MsgConnectionResponse:
		return &ConnectionResponse{}
	case MsgPrepareRequest:
		return &PrepareRequest{}
	case MsgPrepareResponse:
		return &PrepareResponse{}
	case MsgFetchRequest:
		return &FetchRequest{}
	case MsgFetchResponse:
		return &FetchResponse{}
	case MsgAppendRequest:
		if g == Q1 {
			return &AppendRequest{}
		}
		return &SendDataRequest{}
	case MsgSuccessResponse:
		return &SuccessResponse{}
	case MsgDisconnect:
		return &DisconnectMessage{}
	case MsgCancelRequest:
		return &CancelRequest{}
	case MsgProgressRequest:
		switch g {
		case Q1:
			return &ProgressRequest{}
		case Q2:
			return &FinalizeRequest{}
		}
	case MsgProgressResponse:
		if g == Q1 {
			return &ProgressResponse{}
		}
		return &SendDataResponse{}
	case MsgAcknowledgement:
		return &Acknowledgement{}
	case MsgHeartbeatRequest:
		if g == Q3 {
			return &HeartbeatRequest{}
		}
	case MsgErrorResponse:
		return &ErrorResponse{}
	}
	return nil
}

// AppendHeader appends h as a header object.
func AppendHeader(dst []byte, h Header) []byte {
	b := appendField(dst, 1)
	b = appendUvarint(b, uint64(h.Type))
	if h.ConnectionID != "" {
		b = appendField(b, 2)
		b = appendString(b, h.ConnectionID)
	}
	b = appendField(b, 3)
	b = appendOptIdx(b, h.ClientQueryID)
	return appendEnd(b)
}

// AppendMessage appends a whole message of generation g: the header, the
// body and, for Q3 FETCH_RESPONSE and SEND_DATA_REQUEST, the trailing chunk
// blob. A zero h.Type is taken from body; any other value must match it.
// On error dst is returned unchanged.
func AppendMessage(dst []byte, g Generation, h Header, body Message) ([]byte, error) {
	return appendMessage(dst, g, h, body, nil)
}

// MessageParts is AppendMessage for a message whose chunks are pre-encoded
// (the Encoded field of a result or SEND_DATA message): the chunks are not
// copied but returned in place, between the parts encoded into dst, and the
// parts in order are the message. A server writes them one after the other
// instead of copying megabytes of chunks into one buffer first.
func MessageParts(dst []byte, g Generation, h Header, body Message) ([][]byte, error) {
	var sp splices
	b, err := appendMessage(dst, g, h, body, &sp)
	if err != nil {
		return nil, err
	}
	parts := make([][]byte, 0, 2*len(sp)+1)
	prev := len(dst)
	for _, s := range sp {
		if s.at > prev {
			parts = append(parts, b[prev:s.at])
		}
		parts = append(parts, s.chunk)
		prev = s.at
	}
	if len(b) > prev {
		parts = append(parts, b[prev:])
	}
	return parts, nil
}

// splices records, while a message is encoded for MessageParts, where each
// pre-encoded chunk belongs: at is its offset in the encoded rest.
type splices []splice

type splice struct {
	at    int
	chunk []byte
}

// appendChunk appends pre-encoded chunk c to b, or, with sp, notes where it
// belongs.
func (sp *splices) appendChunk(b, c []byte) []byte {
	if sp == nil {
		return append(b, c...)
	}
	*sp = append(*sp, splice{at: len(b), chunk: c})
	return b
}

func appendMessage(dst []byte, g Generation, h Header, body Message, sp *splices) ([]byte, error) {
	if err := checkGeneration(g); err != nil {
		return dst, err
	}
	if body == nil {
		return dst, fmt.Errorf("wire: nil message body: %w", ErrInvalid)
	}
	t := body.Type()
	if h.Type == 0 {
		h.Type = t
	} else if h.Type != t {
		return dst, fmt.Errorf("wire: header type %s for a %s body: %w", h.Type, t, ErrInvalid)
	}
	if want := newBody(g, t); want == nil || reflect.TypeOf(want) != reflect.TypeOf(body) {
		return dst, fmt.Errorf("wire: %T in generation Q%d: %w", body, g, ErrUnsupportedMessage)
	}
	b, err := appendBody(AppendHeader(dst, h), g, body, sp)
	if err != nil {
		return dst, fmt.Errorf("wire: %s: %w", t, err)
	}
	return b, nil
}

func appendBody(b []byte, g Generation, body Message, sp *splices) ([]byte, error) {
	var err error
	switch m := body.(type) {
	case *ConnectionRequest:
		if m.HeartbeatTimeoutSeconds != 0 && g < Q3 {
			return b, errorf(ErrInvalid, "heartbeat timeout before Q3")
		}
		b = defString(b, 1, m.AuthString)
		b = defString(b, 2, m.ClientDuckDBVersion)
		b = defString(b, 3, m.ClientPlatform)
		b = defUvarint(b, 4, m.MinVersion)
		b = defUvarint(b, 5, m.MaxVersion)
		b = defString(b, 6, m.ClientID)
		b = defUvarint(b, 7, m.HeartbeatTimeoutSeconds)
	case *ConnectionResponse:
		if m.HeartbeatTimeoutSeconds != 0 && g < Q3 {
			return b, errorf(ErrInvalid, "heartbeat timeout before Q3")
		}
		b = defString(b, 1, m.ServerDuckDBVersion)
		b = defString(b, 2, m.ServerPlatform)
		b = defUvarint(b, 3, m.QuackVersion)
		b = defUvarint(b, 4, m.HeartbeatTimeoutSeconds)
	case *PrepareRequest:
		if m.InlineRows.Valid && g < Q3 {
			return b, errorf(ErrInvalid, "inline_rows before Q3")
		}
		b = defString(b, 1, m.SQL)
		if g > Q1 || m.HasQueryUUID {
			b = appendField(b, 2)
			b = appendHugeint(b, m.QueryUUID)
		} else if m.QueryUUID != (Hugeint{}) {
			return b, errorf(ErrInvalid, "query uuid in Q1 without HasQueryUUID")
		}
		b = defOptIdx(b, 3, m.InlineRows)
	case *PrepareResponse:
		if len(m.Types) > 0 {
			b = appendField(b, 1)
			b = appendUvarint(b, uint64(len(m.Types)))
			for i := range m.Types {
				if b, err = appendType(b, &m.Types[i], g, 0); err != nil {
					return b, err
				}
			}
		}
		if len(m.Names) > 0 {
			b = appendField(b, 2)
			b = appendUvarint(b, uint64(len(m.Names)))
			for _, n := range m.Names {
				b = appendString(b, n)
			}
		}
		if m.NeedsMoreFetch {
			b = appendField(b, 3)
			b = appendBool(b, true)
		}
		if b, err = appendWrappedChunks(b, 4, m.Chunks, m.Encoded, g, sp); err != nil {
			return b, err
		}
		b = appendField(b, 5)
		b = appendHugeint(b, m.UUID)
	case *FetchRequest:
		if g == Q1 && (m.BatchIndex != 0 || m.AckIndex != 0) {
			return b, errorf(ErrInvalid, "batch or ack index in Q1")
		}
		b = appendField(b, 1)
		b = appendHugeint(b, m.UUID)
		b = defUvarint(b, 2, m.BatchIndex)
		b = defUvarint(b, 3, m.AckIndex)
	case *FetchResponse:
		if g < Q3 {
			if m.TotalBatches.Valid {
				return b, errorf(ErrInvalid, "total_batches before Q3")
			}
			if b, err = appendWrappedChunks(b, 1, m.Chunks, m.Encoded, g, sp); err != nil {
				return b, err
			}
			b = appendField(b, 2)
			b = appendOptIdx(b, m.BatchIndex)
			break
		}
		b = defUvarint(b, 1, uint64(chunkCount(m.Chunks, m.Encoded)))
		b = defOptIdx(b, 2, m.TotalBatches)
		b = defOptIdx(b, 3, m.BatchIndex)
		return appendBlobChunks(appendEnd(b), m.Chunks, m.Encoded, g, sp)
	case *AppendRequest:
		b = defString(b, 1, m.Schema)
		b = defString(b, 2, m.Table)
		if m.Chunk != nil {
			b = append(appendField(b, 3), 1, 0x2C, 0x01)
			if b, err = AppendDataChunk(b, m.Chunk, g); err != nil {
				return b, err
			}
			b = appendEnd(b)
		}
	case *SendDataRequest:
		return appendSendData(b, g, m, sp)
	case *SendDataResponse:
		if m.RowCount.Valid && g < Q3 {
			return b, errorf(ErrInvalid, "row_count before Q3")
		}
		b = appendField(b, 1)
		b = appendOptIdx(b, m.AcceptBudget)
		b = defOptIdx(b, 2, m.RowCount)
	case *FinalizeRequest:
		b = appendField(b, 1)
		b = appendHugeint(b, m.QueryUUID)
		b = defOptIdx(b, 2, m.MinBatchWatermark)
	case *CancelRequest:
		b = appendField(b, 1)
		b = appendHugeint(b, m.UUID)
	case *Acknowledgement:
		if g < Q3 {
			if m.UUID != (Hugeint{}) {
				return b, errorf(ErrInvalid, "acknowledgement uuid before Q3")
			}
			break
		}
		if m.UUID != (Hugeint{}) {
			b = appendField(b, 1)
			b = appendHugeint(b, m.UUID)
		}
	case *ProgressResponse:
		b = appendField(b, 1)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Progress))
	case *ErrorResponse:
		b = defString(b, 1, m.Message)
		if g != Q3 {
			break
		}
		b = defString(b, 2, m.ExceptionType)
		if len(m.ExtraInfo) > 0 {
			keys := make([]string, 0, len(m.ExtraInfo))
			for k := range m.ExtraInfo {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			b = appendField(b, 3)
			b = binary.AppendUvarint(b, uint64(len(keys)))
			for _, k := range keys {
				b = defString(b, 0, k)
				b = defString(b, 1, m.ExtraInfo[k])
				b = appendEnd(b)
			}
		}
		if m.MustInvalidate {
			b = appendField(b, 4)
			b = append(b, 1)
		}
	case *SuccessResponse, *DisconnectMessage, *HeartbeatRequest, *ProgressRequest:
	default:
		return b, errorf(ErrUnsupportedMessage, "body %T", body)
	}
	return appendEnd(b), nil
}

func appendSendData(b []byte, g Generation, m *SendDataRequest, sp *splices) ([]byte, error) {
	var err error
	if g == Q2 {
		if m.StreamID != "" || m.TotalBatches.Valid {
			return b, errorf(ErrInvalid, "Q3 fields in a Q2 SEND_DATA_REQUEST")
		}
		b = defString(b, 1, m.Schema)
		b = defString(b, 2, m.Table)
		if b, err = appendWrappedChunks(b, 3, m.Chunks, m.Encoded, g, sp); err != nil {
			return b, err
		}
		b = appendField(b, 4)
		b = appendHugeint(b, m.QueryUUID)
		b = appendField(b, 5)
		b = appendOptIdx(b, m.BatchIndex)
		b = defUvarint(b, 6, m.SequenceIndex)
		if m.IsLastInBatch {
			b = appendField(b, 7)
			b = appendBool(b, true)
		}
		b = defOptIdx(b, 8, m.BatchWatermark)
		b = defOptIdx(b, 9, m.DeadRangeEnd)
		return appendEnd(b), nil
	}
	if m.Schema != "" || m.Table != "" || m.QueryUUID != (Hugeint{}) || m.SequenceIndex != 0 ||
		m.IsLastInBatch || m.BatchWatermark.Valid || m.DeadRangeEnd.Valid {
		return b, errorf(ErrInvalid, "Q2 fields in a Q3 SEND_DATA_REQUEST")
	}
	b = defString(b, 1, m.StreamID)
	b = defUvarint(b, 2, uint64(chunkCount(m.Chunks, m.Encoded)))
	b = defOptIdx(b, 3, m.TotalBatches)
	b = defOptIdx(b, 4, m.BatchIndex)
	return appendBlobChunks(appendEnd(b), m.Chunks, m.Encoded, g, sp)
}

func defString(b []byte, id uint16, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(appendField(b, id), s)
}

func defUvarint(b []byte, id uint16, v uint64) []byte {
	if v == 0 {
		return b
	}
	return appendUvarint(appendField(b, id), v)
}

func defOptIdx(b []byte, id uint16, o OptIdx) []byte {
	if !o.Valid {
		return b
	}
	return appendOptIdx(appendField(b, id), o)
}

func chunkCount(chunks []*DataChunk, encoded [][]byte) int {
	if encoded != nil {
		return len(encoded)
	}
	return len(chunks)
}

// checkEncoded sanity-checks a pre-encoded DataChunk object.
func checkEncoded(c []byte) error {
	if len(c) < 11 || c[0] != 0x64 || c[1] != 0x00 || c[len(c)-2] != 0xFF || c[len(c)-1] != 0xFF {
		return errorf(ErrInvalid, "pre-encoded chunk is not a DataChunk object")
	}
	return nil
}

// appendWrappedChunks writes a "def" list field of DataChunkWrapper
// pointers: each element is 01, field 300, the chunk, FF FF.
func appendWrappedChunks(b []byte, id uint16, chunks []*DataChunk, encoded [][]byte, g Generation, sp *splices) ([]byte, error) {
	n := chunkCount(chunks, encoded)
	if n == 0 {
		return b, nil
	}
	b = appendField(b, id)
	b = appendUvarint(b, uint64(n))
	for i := 0; i < n; i++ {
		b = append(b, 1, 0x2C, 0x01)
		if encoded != nil {
			if err := checkEncoded(encoded[i]); err != nil {
				return b, err
			}
			b = sp.appendChunk(b, encoded[i])
		} else {
			var err error
			if b, err = AppendDataChunk(b, chunks[i], g); err != nil {
				return b, err
			}
		}
		b = appendEnd(b)
	}
	return b, nil
}

// appendBlobChunks writes the Q3 trailing blob: bare DataChunk objects.
func appendBlobChunks(b []byte, chunks []*DataChunk, encoded [][]byte, g Generation, sp *splices) ([]byte, error) {
	if encoded != nil {
		for _, c := range encoded {
			if err := checkEncoded(c); err != nil {
				return b, err
			}
			b = sp.appendChunk(b, c)
		}
		return b, nil
	}
	for _, c := range chunks {
		var err error
		if b, err = AppendDataChunk(b, c, g); err != nil {
			return b, err
		}
	}
	return b, nil
}

// DecodeHeader reads the header object at the start of b and returns a
// Reader positioned at the body.
func DecodeHeader(b []byte) (Header, *Reader, error) {
	r := NewReader(b)
	var h Header
	if err := r.ExpectField(1); err != nil {
		return h, nil, err
	}
	t, err := r.ReadUint8()
	if err != nil {
		return h, nil, err
	}
	h.Type = MessageType(t)
	if r.OptionalField(2) {
		if h.ConnectionID, err = r.ReadString(); err != nil {
			return h, nil, err
		}
	}
	if err := r.ExpectField(3); err != nil {
		return h, nil, err
	}
	if h.ClientQueryID, err = r.ReadOptIdx(); err != nil {
		return h, nil, err
	}
	if err := r.ExpectEnd(); err != nil {
		return h, nil, err
	}
	return h, r, nil
}

// DecodeMessage decodes a whole message of generation g.
func DecodeMessage(b []byte, g Generation, lim Limits) (Header, Message, error) {
	h, r, err := DecodeHeader(b)
	if err != nil {
		return h, nil, err
	}
	m, err := DecodeBody(g, h.Type, r, lim)
	return h, m, err
}

// DecodeBody decodes the body of a message of type t in generation g, and
// for Q3 FETCH_RESPONSE and SEND_DATA_REQUEST the trailing chunk blob. The
// body must use up r, except for ERROR_RESPONSE, whose bytes after field 1
// are ignored because later generations add fields there (§8.11). Types g
// does not define yield ErrUnsupportedMessage. Decoded chunks alias r's
// input (see DecodeDataChunk).
func DecodeBody(g Generation, t MessageType, r *Reader, lim Limits) (Message, error) {
	if err := checkGeneration(g); err != nil {
		return nil, err
	}
	m := newBody(g, t)
	if m == nil {
		return nil, fmt.Errorf("wire: message type %d in generation Q%d: %w", t, g, ErrUnsupportedMessage)
	}
	d := newDecoder(r, lim)
	if err := d.body(g, m); err != nil {
		return nil, err
	}
	if r.Remaining() != 0 {
		return nil, r.errorf(r.off, ErrMalformed, "%d bytes after the %s body", r.Remaining(), t)
	}
	return m, nil
}

func (d *decoder) body(g Generation, m Message) error {
	r := d.r
	var err error
	switch m := m.(type) {
	case *ConnectionRequest:
		err = d.fields(
			optString(1, &m.AuthString),
			optString(2, &m.ClientDuckDBVersion),
			optString(3, &m.ClientPlatform),
			optUvarint(4, &m.MinVersion),
			optUvarint(5, &m.MaxVersion),
			optString(6, &m.ClientID),
			onlyIf(g >= Q3, optUvarint(7, &m.HeartbeatTimeoutSeconds)),
		)
	case *ConnectionResponse:
		err = d.fields(
			optString(1, &m.ServerDuckDBVersion),
			optString(2, &m.ServerPlatform),
			optUvarint(3, &m.QuackVersion),
			onlyIf(g >= Q3, optUvarint(4, &m.HeartbeatTimeoutSeconds)),
		)
	case *PrepareRequest:
		// c853cd38-era Q1 clients add field 2; v1.5.4 clients do not.
		uuid := func(d *decoder) (err error) {
			if g == Q1 && !r.OptionalField(2) {
				return nil
			} else if g > Q1 {
				if err := r.ExpectField(2); err != nil {
					return err
				}
			}
			m.HasQueryUUID = true
			m.QueryUUID, err = r.ReadHugeint()
			return err
		}
		err = d.fields(
			optString(1, &m.SQL),
			uuid,
			onlyIf(g >= Q3, optOptIdx(3, &m.InlineRows)),
		)
	case *PrepareResponse:
		err = d.fields(
			func(d *decoder) error { return d.typeList(1, &m.Types) },
			func(d *decoder) error { return d.stringList(2, &m.Names) },
			optBool(3, &m.NeedsMoreFetch),
			func(d *decoder) error {
				if err := d.expectTypes(m.Types); err != nil {
					return err
				}
				return d.wrappedChunks(4, &m.Chunks)
			},
			hugeint(5, &m.UUID),
		)
	case *FetchRequest:
		err = d.fields(
			hugeint(1, &m.UUID),
			onlyIf(g >= Q2, optUvarint(2, &m.BatchIndex)),
			onlyIf(g >= Q2, optUvarint(3, &m.AckIndex)),
		)
	case *FetchResponse:
		if g < Q3 {
			err = d.fields(
				func(d *decoder) error { return d.wrappedChunks(1, &m.Chunks) },
				optIdx(2, &m.BatchIndex),
			)
			break
		}
		var n uint64
		err = d.fields(
			optUvarint(1, &n),
			optOptIdx(2, &m.TotalBatches),
			optOptIdx(3, &m.BatchIndex),
		)
		if err == nil {
			m.Chunks, err = d.blobChunks(n)
		}
	case *AppendRequest:
		err = d.fields(
			optString(1, &m.Schema),
			optString(2, &m.Table),
			func(d *decoder) error { return d.wrappedChunk(3, &m.Chunk) },
		)
	case *SendDataRequest:
		if g == Q2 {
			err = d.fields(
				optString(1, &m.Schema),
				optString(2, &m.Table),
				func(d *decoder) error { return d.wrappedChunks(3, &m.Chunks) },
				hugeint(4, &m.QueryUUID),
				optIdx(5, &m.BatchIndex),
				optUvarint(6, &m.SequenceIndex),
				optBool(7, &m.IsLastInBatch),
				optOptIdx(8, &m.BatchWatermark),
				optOptIdx(9, &m.DeadRangeEnd),
			)
			break
		}
		var n uint64
		err = d.fields(
			optString(1, &m.StreamID),
			optUvarint(2, &n),
			optOptIdx(3, &m.TotalBatches),
			optOptIdx(4, &m.BatchIndex),
		)
		if err == nil {
			m.Chunks, err = d.blobChunks(n)
		}
	case *SendDataResponse:
		err = d.fields(
			optIdx(1, &m.AcceptBudget),
			onlyIf(g >= Q3, optOptIdx(2, &m.RowCount)),
		)
	case *FinalizeRequest:
		err = d.fields(hugeint(1, &m.QueryUUID), optOptIdx(2, &m.MinBatchWatermark))
	case *CancelRequest:
		err = d.fields(hugeint(1, &m.UUID))
	case *Acknowledgement:
		err = d.fields(onlyIf(g >= Q3, func(d *decoder) (err error) {
			if r.OptionalField(1) {
				m.UUID, err = r.ReadHugeint()
			}
			return err
		}))
	case *ProgressResponse:
		err = d.fields(func(d *decoder) (err error) {
			if err := r.ExpectField(1); err != nil {
				return err
			}
			m.Progress, err = r.ReadFloat64()
			return err
		})
	case *ErrorResponse:
		if r.OptionalField(1) {
			if m.Message, err = r.ReadString(); err != nil {
				return err
			}
		}
		if g == Q3 {
			if err := decodeErrorDetails(r, m); err != nil {
				return err
			}
		}
		// Fields a later server adds are ignored: the message is what
		// matters, and an error must not be lost to a decode error.
		r.Skip()
	default: // messages without fields
		err = r.ExpectEnd()
	}
	return err
}

// decodeErrorDetails reads the Q3 fields of an ERROR_RESPONSE after the
// message: exception type, extra information (a list of key/value
// objects) and the must-invalidate flag.
func decodeErrorDetails(r *Reader, m *ErrorResponse) (err error) {
	if r.OptionalField(2) {
		if m.ExceptionType, err = r.ReadString(); err != nil {
			return err
		}
	}
	if r.OptionalField(3) {
		n, err := r.ReadCount(2)
		if err != nil {
			return err
		}
		m.ExtraInfo = make(map[string]string, n)
		for range n {
			var k, v string
			if r.OptionalField(0) {
				if k, err = r.ReadString(); err != nil {
					return err
				}
			}
			if r.OptionalField(1) {
				if v, err = r.ReadString(); err != nil {
					return err
				}
			}
			if err := r.ExpectEnd(); err != nil {
				return err
			}
			m.ExtraInfo[k] = v
		}
	}
	if r.OptionalField(4) {
		if m.MustInvalidate, err = r.ReadBool(); err != nil {
			return err
		}
	}
	return nil
}

// fieldFunc decodes one schema field (or nothing, for an omitted "def"
// field).
type fieldFunc func(d *decoder) error

// fields runs the field decoders in schema order, then expects the end of
// the object.
func (d *decoder) fields(fs ...fieldFunc) error {
	for _, f := range fs {
		if err := f(d); err != nil {
			return err
		}
	}
	return d.r.ExpectEnd()
}

func onlyIf(ok bool, f fieldFunc) fieldFunc {
	if ok {
		return f
	}
	return func(*decoder) error { return nil }
}

func optString(id uint16, p *string) fieldFunc {
	return func(d *decoder) (err error) {
		if d.r.OptionalField(id) {
			*p, err = d.r.ReadString()
		}
		return err
	}
}

func optUvarint(id uint16, p *uint64) fieldFunc {
	return func(d *decoder) (err error) {
		if d.r.OptionalField(id) {
			*p, err = d.r.ReadUvarint()
		}
		return err
	}
}

func optBool(id uint16, p *bool) fieldFunc {
	return func(d *decoder) (err error) {
		if d.r.OptionalField(id) {
			*p, err = d.r.ReadBool()
		}
		return err
	}
}

func optOptIdx(id uint16, p *OptIdx) fieldFunc {
	return func(d *decoder) (err error) {
		if d.r.OptionalField(id) {
			*p, err = d.r.ReadOptIdx()
		}
		return err
	}
}

func optIdx(id uint16, p *OptIdx) fieldFunc {
	return func(d *decoder) (err error) {
		if err := d.r.ExpectField(id); err != nil {
			return err
		}
		*p, err = d.r.ReadOptIdx()
		return err
	}
}

func hugeint(id uint16, p *Hugeint) fieldFunc {
	return func(d *decoder) (err error) {
		if err := d.r.ExpectField(id); err != nil {
			return err
		}
		*p, err = d.r.ReadHugeint()
		return err
	}
}

func (d *decoder) typeList(id uint16, p *[]LogicalType) error {
	r := d.r
	if !r.OptionalField(id) {
		return nil
	}
	n, err := r.ReadCount(5)
	if err != nil {
		return err
	}
	ts := make([]LogicalType, n)
	for i := range ts {
		if err := decodeType(r, &ts[i], d.lim.MaxDepth); err != nil {
			return err
		}
	}
	*p = ts
	return nil
}

func (d *decoder) stringList(id uint16, p *[]string) error {
	r := d.r
	if !r.OptionalField(id) {
		return nil
	}
	n, err := r.ReadCount(1)
	if err != nil {
		return err
	}
	ss := make([]string, n)
	for i := range ss {
		if ss[i], err = r.ReadString(); err != nil {
			return err
		}
	}
	*p = ss
	return nil
}

// wrappedChunks reads a "def" list of DataChunkWrapper pointers.
func (d *decoder) wrappedChunks(id uint16, p *[]*DataChunk) error {
	r := d.r
	if !r.OptionalField(id) {
		return nil
	}
	// The smallest element is 01 2C 01, an 11-byte chunk and FF FF.
	n, err := r.ReadCount(16)
	if err != nil {
		return err
	}
	chunks := make([]*DataChunk, n)
	for i := range chunks {
		if chunks[i], err = d.wrapper(); err != nil {
			return err
		}
		if chunks[i] == nil {
			return r.errorf(r.off-1, ErrMalformed, "null DataChunkWrapper in a chunk list")
		}
	}
	*p = chunks
	return nil
}

// wrappedChunk reads a "def" nullable pointer to a DataChunkWrapper.
func (d *decoder) wrappedChunk(id uint16, p **DataChunk) (err error) {
	if d.r.OptionalField(id) {
		*p, err = d.wrapper()
	}
	return err
}

// wrapper reads a nullable pointer to a DataChunkWrapper object; a null
// pointer yields nil.
func (d *decoder) wrapper() (*DataChunk, error) {
	r := d.r
	present, err := r.ReadPresent()
	if err != nil || !present {
		return nil, err
	}
	if err := r.ExpectField(300); err != nil {
		return nil, err
	}
	start := r.off
	c, err := d.chunk()
	if err != nil {
		return nil, err
	}
	if d.scan {
		d.encoded = append(d.encoded, r.buf[start:r.off])
	}
	return c, r.ExpectEnd()
}

// blobChunks reads the n bare DataChunk objects of a Q3 trailing blob.
func (d *decoder) blobChunks(n uint64) ([]*DataChunk, error) {
	r := d.r
	if n > uint64(r.Remaining()/11) { // 11 bytes is the smallest DataChunk
		return nil, r.errorf(r.off, ErrTruncated, "%d chunks with %d bytes remaining", n, r.Remaining())
	}
	if n == 0 {
		return nil, nil
	}
	chunks := make([]*DataChunk, n)
	for i := range chunks {
		start := r.off
		var err error
		if chunks[i], err = d.chunk(); err != nil {
			return nil, err
		}
		if d.scan {
			d.encoded = append(d.encoded, r.buf[start:r.off])
		}
	}
	return chunks, nil
}
