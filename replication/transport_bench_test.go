package replication

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkTransport measures one AppendEntries round trip carrying a
// 200-byte entry between two transports on loopback, answered at once: what
// the transport adds to a write, without fsync or DuckDB. "tcp" is
// hashicorp/raft's plain TCP transport, "tls" the member transport
// duckraft uses (mutual TLS and the term guard).
func BenchmarkTransport(b *testing.B) {
	for _, tc := range []struct {
		name string
		open func(b *testing.B) raft.Transport
	}{
		{"tcp", func(b *testing.B) raft.Transport {
			tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			return tr
		}},
		{"tls", func(b *testing.B) raft.Transport {
			layer, err := newTLSStreamLayer("127.0.0.1:0", nil, memberTLS(b, "n"), handshakeTimeout, testLogger())
			if err != nil {
				b.Fatal(err)
			}
			nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 2, Timeout: 5 * time.Second})
			return newRPCGuard(nt, func() uint64 { return 1 }, nil, testLogger())
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			server, client := tc.open(b), tc.open(b)
			defer server.(raft.WithClose).Close()
			defer client.(raft.WithClose).Close()
			go func() {
				for rpc := range server.Consumer() {
					rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
				}
			}()
			req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("c"), Addr: []byte(client.LocalAddr())},
				Term: 1, PrevLogEntry: 1, PrevLogTerm: 1, LeaderCommitIndex: 1,
				Entries: []*raft.Log{{Index: 2, Term: 1, Type: raft.LogCommand, Data: make([]byte, 200)}}}
			var resp raft.AppendEntriesResponse
			b.ResetTimer()
			for range b.N {
				if err := client.AppendEntries("s", server.LocalAddr(), req, &resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
