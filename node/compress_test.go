package node_test

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/duckraft/duckraft/node/wire"
)

// compressed wraps msg in a Quack compressed frame. A single-segment zstd
// frame's window is its whole content.
func compressed(t *testing.T, msg []byte, singleSegment bool) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithSingleSegment(singleSegment))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	b := []byte{0xDB, 0xC2, 0x02}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(msg)))
	return enc.EncodeAll(msg, b)
}

// A compressed request decompresses in full only for a sender that holds a
// session: a frame of a few kilobytes that declares 200 MiB, sent without
// one, used to cost 200 MiB per request before anything was checked.
func TestCompressedBombIsRefusedBeforeDecompressing(t *testing.T) {
	addr, srv := startServer(t, nil)
	bomb := func(typ wire.MessageType, session string, singleSegment bool) []byte {
		msg := wire.AppendHeader(nil, wire.Header{Type: typ, ConnectionID: session})
		return compressed(t, append(msg, make([]byte, 200<<20)...), singleSegment)
	}
	const nobody = "00000000000000000000000000000000"
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"no session", bomb(wire.MsgPrepareRequest, nobody, false), "Invalid connection id"},
		{"connection request", bomb(wire.MsgConnectionRequest, "", false), "limit"},
		// Its header cannot be read within an 8 MiB window: refused unread.
		{"no session, one 200 MiB window", bomb(wire.MsgPrepareRequest, nobody, true), "malformed compressed message"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.body) > 1<<20 {
				t.Fatalf("the bomb is %d bytes compressed; it should be small", len(c.body))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/quack", bytes.NewReader(c.body)))
			runtime.ReadMemStats(&after)
			h, rest, err := wire.DecodeHeader(rec.Body.Bytes())
			if err != nil || h.Type != wire.MsgErrorResponse {
				t.Fatalf("answer %v, %v; want an ERROR_RESPONSE", h.Type, err)
			}
			msg, err := wire.DecodeBody(wire.Q1, h.Type, rest, wire.Limits{})
			if err != nil || !strings.Contains(msg.(*wire.ErrorResponse).Message, c.want) {
				t.Fatalf("answer %v (%v), want one that says %q", msg, err, c.want)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Fatalf("refusing the bomb allocated %d MiB", alloc>>20)
			}
		})
	}
	// A compressed request of an open session is served.
	c := connect(t, addr, wire.Q1)
	prep, err := wire.AppendMessage(nil, wire.Q1, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: c.ID()},
		&wire.PrepareRequest{SQL: "SELECT 42 AS answer"})
	if err != nil {
		t.Fatal(err)
	}
	_, h, msg := post(t, addr, compressed(t, prep, true))
	if h.Type != wire.MsgPrepareResponse {
		t.Fatalf("compressed PREPARE of an open session answered %v: %v", h.Type, msg)
	}
}
