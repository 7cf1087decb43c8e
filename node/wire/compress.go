package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// prefixWindow bounds the zstd window DecompressPrefix decodes with, and so
// its memory: a frame that needs more cannot be peeked into.
const prefixWindow = 8 << 20

// Compressed frame layout (§3.3): magic DB C2, codec byte, uint64 LE
// uncompressed size, then one zstd frame. It was seen in one quack snapshot
// only, so only the receiving side is implemented.
const (
	frameHeaderLen = 11
	codecZstd      = 0x02
	maxFrameSize   = 1 << 32
)

var (
	zstdOnce    sync.Once
	zstdDecoder *zstd.Decoder
	zstdErr     error
)

// IsCompressed reports whether body is a compressed frame rather than a
// plain message (plain messages start 01 00, so the two cannot collide).
func IsCompressed(body []byte) bool {
	return len(body) > frameHeaderLen && body[0] == 0xDB && body[1] == 0xC2
}

// DeclaredSize returns the size a compressed frame declares for the message
// it carries, read from the frame's header and not checked; 0 when body is
// not a compressed frame. A server reserves memory for that size before it
// decompresses (Decompress then holds the frame to it).
func DeclaredSize(body []byte) uint64 {
	if !IsCompressed(body) {
		return 0
	}
	return binary.LittleEndian.Uint64(body[3:frameHeaderLen])
}

// Decompress returns the message carried by a compressed frame, or body
// itself when it is not compressed. Declared sizes of 0, above 2^32 or above
// maxSize (when maxSize > 0), unknown codecs and zstd frames whose content
// size differs from the declared size are rejected before anything is
// decoded, so the output never exceeds the declared size.
func Decompress(body []byte, maxSize int) ([]byte, error) {
	if !IsCompressed(body) {
		return body, nil
	}
	size, payload, err := checkFrame(body, maxSize)
	if err != nil {
		return nil, err
	}
	zstdOnce.Do(func() {
		// The cap limit makes DecodeAll stop at cap(dst), i.e. the
		// declared size, whatever the frame claims.
		zstdDecoder, zstdErr = zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(maxFrameSize), zstd.WithDecoderConcurrency(0))
	})
	if zstdErr != nil {
		return nil, fmt.Errorf("wire: zstd decoder: %w", zstdErr)
	}
	out, err := zstdDecoder.DecodeAll(payload, make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("wire: compressed frame: %v: %w", err, ErrMalformed)
	}
	if uint64(len(out)) != size {
		return nil, fmt.Errorf("wire: compressed frame holds %d bytes, declared %d: %w", len(out), size, ErrMalformed)
	}
	return out, nil
}

// checkFrame validates a compressed frame's header and returns its declared
// size and its zstd payload.
func checkFrame(body []byte, maxSize int) (uint64, []byte, error) {
	if body[2] != codecZstd {
		return 0, nil, fmt.Errorf("wire: compressed frame with codec %d: %w", body[2], ErrMalformed)
	}
	size := binary.LittleEndian.Uint64(body[3:])
	if size == 0 || size > maxFrameSize {
		return 0, nil, fmt.Errorf("wire: compressed frame declares %d bytes: %w", size, ErrMalformed)
	}
	if maxSize > 0 && size > uint64(maxSize) {
		return 0, nil, fmt.Errorf("wire: compressed frame declares %d bytes (limit %d): %w", size, maxSize, ErrLimit)
	}
	payload := body[frameHeaderLen:]
	var h zstd.Header
	if err := h.Decode(payload); err != nil {
		return 0, nil, fmt.Errorf("wire: compressed frame: %v: %w", err, ErrMalformed)
	}
	if !h.HasFCS || h.FrameContentSize != size {
		return 0, nil, fmt.Errorf("wire: zstd content size does not match the declared %d bytes: %w", size, ErrMalformed)
	}
	return size, payload, nil
}

// DecompressPrefix returns the first n bytes (fewer if the message is
// shorter) of the message a compressed frame carries, or of body itself
// when it is not compressed. It decodes no more of the frame than that,
// in a window of at most 8 MiB, so a server can read a message's header,
// and learn whether its sender holds a session, before it spends memory on
// the whole message: a frame of a few kilobytes can declare hundreds of
// megabytes.
func DecompressPrefix(body []byte, n int) ([]byte, error) {
	if !IsCompressed(body) {
		return body[:min(n, len(body))], nil
	}
	size, payload, err := checkFrame(body, 0)
	if err != nil {
		return nil, err
	}
	d, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(prefixWindow))
	if err != nil {
		return nil, fmt.Errorf("wire: zstd decoder: %w", err)
	}
	defer d.Close()
	out := make([]byte, min(uint64(n), size))
	if _, err := io.ReadFull(d, out); err != nil {
		return nil, fmt.Errorf("wire: compressed frame: %v: %w", err, ErrMalformed)
	}
	return out, nil
}
