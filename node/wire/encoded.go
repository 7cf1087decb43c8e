package wire

import "fmt"

// DecodeBodyEncoded is DecodeBody for a node that forwards a result's
// chunks rather than reading them (a router passing another node's answer
// to its own client): the DataChunks of a PREPARE_RESPONSE or
// FETCH_RESPONSE are checked but not decoded, and are left in the
// message's Encoded field, each exactly the bytes of one DataChunk object
// as received (a subslice of r's input); Chunks stays nil. Other message
// types decode as with DecodeBody.
//
// The check is the decoder's own walk through every field, vector and
// string, with the same limits, minus materialising values: lengths,
// counts, list entries, dictionary indices and string layouts are
// checked, so a chunk passed on is one the decoder would accept. Beyond
// that, each chunk must carry the result's column types byte for byte (the
// PREPARE_RESPONSE's own, or types for a FETCH_RESPONSE, whose body has
// none) and strings in generation g's layout, so that a client of g reads
// the forwarded bytes exactly as they were meant. Values inside are not
// checked (a DuckDB client checks its own), nor are NULL slots normalised.
func DecodeBodyEncoded(g Generation, t MessageType, r *Reader, lim Limits, types []LogicalType) (Message, error) {
	if t != MsgPrepareResponse && t != MsgFetchResponse {
		return DecodeBody(g, t, r, lim)
	}
	if err := checkGeneration(g); err != nil {
		return nil, err
	}
	m := newBody(g, t)
	if m == nil {
		return nil, fmt.Errorf("wire: message type %d in generation Q%d: %w", t, g, ErrUnsupportedMessage)
	}
	d := newDecoder(r, lim)
	d.scan, d.gen = true, g
	if t == MsgFetchResponse {
		if err := d.expectTypes(types); err != nil {
			return nil, err
		}
	}
	if err := d.body(g, m); err != nil {
		return nil, err
	}
	if r.Remaining() != 0 {
		return nil, r.errorf(r.off, ErrMalformed, "%d bytes after the %s body", r.Remaining(), t)
	}
	encoded := d.encoded
	if encoded == nil {
		encoded = [][]byte{}
	}
	switch m := m.(type) {
	case *PrepareResponse:
		m.Chunks, m.Encoded = nil, encoded
	case *FetchResponse:
		m.Chunks, m.Encoded = nil, encoded
	}
	return m, nil
}

// expectTypes sets, in scan mode, the column types every chunk must carry.
func (d *decoder) expectTypes(types []LogicalType) error {
	if !d.scan || types == nil {
		return nil
	}
	want := appendUvarint(nil, uint64(len(types)))
	for i := range types {
		var err error
		if want, err = appendType(want, &types[i], d.gen, 0); err != nil {
			return fmt.Errorf("wire: result column %d: %w", i, err)
		}
	}
	d.want, d.wantTypes = want, types
	return nil
}

// EncodedChunkRows returns the row count of an encoded DataChunk object.
func EncodedChunkRows(c []byte) (int, error) {
	r := NewReader(c)
	if err := r.ExpectField(100); err != nil {
		return 0, err
	}
	n, err := r.ReadUint32()
	return int(n), err
}
