package replication

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
)

// frameZstd is a frame of another kind, compressed: its payload is the
// inner kind, the uvarint length of the inner payload, and one zstd frame
// that declares that length as its content size. Snapshots compress their
// row chunks this way: a chunk is Quack-encoded, uncompressed, and a
// database of repeated or long strings, which DuckDB stores compressed,
// streamed as several times its file's size (replication/DESIGN.md,
// "Snapshots without stopping writes"). Snapshots written before it hold
// no such frame and restore as before; builds before it refuse it as an
// unknown kind.
const frameZstd = 'Z'

// minCompressed is the smallest payload worth compressing: below it the
// zstd frame's overhead eats the gain.
const minCompressed = 256

var (
	snapEncoderOnce sync.Once
	snapEncoder     *zstd.Encoder
	snapEncoderErr  error
	snapDecoderOnce sync.Once
	snapDecoder     *zstd.Decoder
	snapDecoderErr  error
)

// snapshotEncoder is shared by every snapshot: EncodeAll is safe for
// concurrent use and keeps no state between calls. The fastest level
// already takes a Quack chunk to about DuckDB's own size (measured in
// DESIGN.md), and Persist runs beside the applier on a 2-core machine.
func snapshotEncoder() (*zstd.Encoder, error) {
	snapEncoderOnce.Do(func() {
		snapEncoder, snapEncoderErr = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1))
	})
	return snapEncoder, snapEncoderErr
}

// snapshotDecoder decodes whole frames into a buffer of their declared
// size and stops there (the cap limit), whatever the zstd frame claims.
func snapshotDecoder() (*zstd.Decoder, error) {
	snapDecoderOnce.Do(func() {
		snapDecoder, snapDecoderErr = zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(maxFrame), zstd.WithDecoderConcurrency(2))
	})
	return snapDecoder, snapDecoderErr
}

// compressedFrame writes payload as a frameZstd frame wrapping kind, or as
// a plain kind frame when the writer does not compress, the payload is
// small, or compressing does not shrink it.
func (w *frameWriter) compressedFrame(kind byte, payload []byte) error {
	if !w.compress || len(payload) < minCompressed {
		return w.frame(kind, payload)
	}
	enc, err := snapshotEncoder()
	if err != nil {
		return fmt.Errorf("snapshot: zstd encoder: %w", err)
	}
	w.zbuf = binary.AppendUvarint(append(w.zbuf[:0], kind), uint64(len(payload)))
	w.zbuf = enc.EncodeAll(payload, w.zbuf)
	if len(w.zbuf) >= len(payload) {
		return w.frame(kind, payload)
	}
	return w.frame(frameZstd, w.zbuf)
}

// decompress returns the kind and payload a frameZstd frame wraps. The
// payload is valid until the next call.
func (r *frameReader) decompress(payload []byte) (byte, []byte, error) {
	rd := byteReader{b: payload}
	kind := byte(0)
	if len(payload) > 0 {
		kind, rd.b = payload[0], payload[1:]
	}
	size := rd.uvarint()
	switch {
	case len(payload) == 0 || rd.err != nil:
		return 0, nil, fmt.Errorf("%w: frame %d: compressed frame header truncated", ErrSnapshotCorrupt, r.frames-1)
	case kind == frameZstd:
		return 0, nil, fmt.Errorf("%w: frame %d: compressed frame inside a compressed frame", ErrSnapshotCorrupt, r.frames-1)
	case size == 0 || size > uint64(r.limit()):
		return 0, nil, fmt.Errorf("%w: frame %d: compressed frame declares %d bytes", ErrSnapshotCorrupt, r.frames-1, size)
	}
	var h zstd.Header
	if err := h.Decode(rd.b); err != nil {
		return 0, nil, fmt.Errorf("%w: frame %d: zstd header: %w", ErrSnapshotCorrupt, r.frames-1, err)
	}
	if !h.HasFCS || h.FrameContentSize != size {
		return 0, nil, fmt.Errorf("%w: frame %d: zstd content size does not match the declared %d bytes", ErrSnapshotCorrupt, r.frames-1, size)
	}
	dec, err := snapshotDecoder()
	if err != nil {
		return 0, nil, fmt.Errorf("snapshot: zstd decoder: %w", err)
	}
	if uint64(cap(r.raw)) < size {
		r.raw = make([]byte, 0, size)
	}
	out, err := dec.DecodeAll(rd.b, r.raw[:0:size])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: frame %d: zstd: %w", ErrSnapshotCorrupt, r.frames-1, err)
	}
	if uint64(len(out)) != size {
		return 0, nil, fmt.Errorf("%w: frame %d: compressed frame holds %d bytes, declared %d", ErrSnapshotCorrupt, r.frames-1, len(out), size)
	}
	return kind, out, nil
}

// everyServerReads reports whether every server of a Raft configuration
// reads compressed snapshot frames (reads): a snapshot may be sent to any
// of them. An empty configuration, not yet known, compresses nothing.
func everyServerReads(servers []raft.Server, reads func(id string) bool) bool {
	for _, srv := range servers {
		if !reads(string(srv.ID)) {
			return false
		}
	}
	return len(servers) > 0
}
