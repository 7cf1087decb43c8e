package routing

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// hostileMember is a Quack server on loopback that completes the handshake
// and then answers PREPARE and FETCH with the bodies its test gives, as a
// member gone bad (or a bug in one) could.
func hostileMember(t *testing.T, g wire.Generation, prepare, fetch func() wire.Message) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		h, _, err := wire.DecodeHeader(body)
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var msg wire.Message
		switch h.Type {
		case wire.MsgConnectionRequest:
			resp := &wire.ConnectionResponse{ServerDuckDBVersion: "v1.5.6", QuackVersion: uint64(g)}
			if g == wire.Q3 {
				resp.HeartbeatTimeoutSeconds = 60
			}
			msg = resp
		case wire.MsgPrepareRequest:
			msg = prepare()
		case wire.MsgFetchRequest:
			msg = fetch()
		default:
			msg = &wire.SuccessResponse{}
		}
		out, err := wire.AppendMessage(nil, g, wire.Header{Type: msg.Type(), ConnectionID: "hostile"}, msg)
		if err != nil {
			t.Errorf("encode %T: %v", msg, err)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.duckdb")
		w.Write(out)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestRemoteBadFramingIsAnError sends a router's remote session chunks
// that are cut short, lie about their lengths, or do not match the
// result's types: each read ends in an error, never a panic, a hang or an
// allocation of what a length claims.
func TestRemoteBadFramingIsAnError(t *testing.T) {
	types := []wire.LogicalType{{ID: wire.TypeInteger}, {ID: wire.TypeVarchar}}
	good := func(g wire.Generation) []byte {
		iv, _ := wire.NewVector(types[0], []any{int32(1), int32(2)})
		sv, _ := wire.NewVector(types[1], []any{"a", "bc"})
		enc, err := wire.AppendDataChunk(nil, &wire.DataChunk{Rows: 2, Columns: []*wire.Vector{iv, sv}}, g)
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}
	// Each bad chunk still starts and ends as a DataChunk object, so the
	// member's encoder sends it; the damage is inside.
	bad := map[string]func(g wire.Generation) []byte{
		"truncated": func(g wire.Generation) []byte {
			b := good(g)
			return append(b[:len(b)/2:len(b)/2], 0xFF, 0xFF)
		},
		"huge string length": func(g wire.Generation) []byte {
			b := good(g)
			if g == wire.Q3 {
				// The blob layout's uint32 lengths 1 and 2: the second
				// claims 256 MiB.
				i := bytes.Index(b, []byte{0x6C, 0x00, 0x08, 1, 0, 0, 0, 2, 0, 0, 0})
				copy(b[i+7:], []byte{0, 0, 0, 0x10})
				return b
			}
			// The list layout's length byte of "bc" claims 0x7F bytes.
			i := bytes.Index(b, []byte{2, 'b', 'c'})
			b[i] = 0x7F
			return b
		},
		"other types": func(g wire.Generation) []byte {
			v, _ := wire.NewVector(wire.LogicalType{ID: wire.TypeBigInt}, []any{int64(1)})
			w, _ := wire.NewVector(types[1], []any{"x"})
			enc, _ := wire.AppendDataChunk(nil, &wire.DataChunk{Rows: 1, Columns: []*wire.Vector{v, w}}, g)
			return enc
		},
		"million rows claimed": func(g wire.Generation) []byte {
			b := good(g)
			// Field 100's row count, a uvarint right after 64 00: 2 becomes
			// a 3-byte 1<<20.
			return append([]byte{0x64, 0x00, 0x80, 0x80, 0x40}, b[3:]...)
		},
	}
	names := []string{"i", "s"}
	for _, g := range []wire.Generation{wire.Q1, wire.Q3} {
		for name, mk := range bad {
			for _, where := range []string{"prepare", "fetch"} {
				t.Run(name+"/"+where+"/Q"+string(rune('0'+g)), func(t *testing.T) {
					prepare := func() wire.Message {
						if where == "prepare" {
							return &wire.PrepareResponse{Types: types, Names: names, Encoded: [][]byte{mk(g)}}
						}
						return &wire.PrepareResponse{Types: types, Names: names, NeedsMoreFetch: true, Encoded: [][]byte{good(g)}}
					}
					fetch := func() wire.Message {
						return &wire.FetchResponse{Encoded: [][]byte{mk(g)}, BatchIndex: wire.Idx(1)}
					}
					addr := hostileMember(t, g, prepare, fetch)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					sess, err := NewQuackRemote("token", "", nil).Connect(ctx, addr, g)
					if err != nil {
						t.Fatal(err)
					}
					defer sess.Close()
					rows, err := sess.Query(ctx, "SELECT * FROM t", nodeapi.Read{})
					if where == "prepare" {
						if err == nil {
							rows.Close()
							t.Fatal("a bad chunk in the PREPARE answer was accepted")
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					defer rows.Close()
					er := rows.(node.EncodedRows)
					for i := 0; ; i++ {
						enc, _, _, err := er.NextEncoded(g)
						if err != nil {
							return
						}
						if enc == nil || i > 10 {
							t.Fatal("a bad chunk in a FETCH answer was forwarded")
						}
					}
				})
			}
		}
	}
}
