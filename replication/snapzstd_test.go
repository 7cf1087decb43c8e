package replication

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
)

// goldenWrites are the writes behind testdata/snapshot-before-zstd.bin, a
// snapshot that Persist wrote at 487317b, before chunks were compressed:
// one entry each, so the snapshot's applied index is len(goldenWrites).
var goldenWrites = []string{
	"CREATE SEQUENCE seq START 7",
	"CREATE TABLE t(id INTEGER PRIMARY KEY, s VARCHAR, tags VARCHAR[], price DECIMAL(15,2), ts TIMESTAMP, n BIGINT DEFAULT nextval('seq'))",
	"INSERT INTO t(id, s, tags, price, ts) SELECT i, repeat('ab', i % 40) || i, ['x' || (i % 3)], i * 1.25, TIMESTAMP '2024-01-01' + INTERVAL (i) MINUTE FROM range(400) r(i)",
	"CREATE VIEW v AS SELECT count(*) AS n, sum(n) AS total FROM t",
	"CREATE INDEX t_s ON t(s)",
}

// TestSnapshotBeforeZstdRestores: a snapshot written before chunks were
// compressed (plain chunk frames only) restores after the change into the
// state its writes make: the same state hash as a node that applied them.
func TestSnapshotBeforeZstdRestores(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-before-zstd.bin")
	if err != nil {
		t.Fatal(err)
	}
	kinds := frameKinds(t, old)
	if kinds[frameZstd] != 0 || kinds[frameChunk] == 0 {
		t.Fatalf("the golden snapshot is not of the old format: frames by kind %v", kinds)
	}
	want := openFSM(t, openDB(t, t.TempDir()))
	defer want.close()
	applyEach(t, want, 1, goldenWrites...)

	g := openFSM(t, openDB(t, t.TempDir()))
	defer g.close()
	if err := g.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if g.Applied() != uint64(len(goldenWrites)) {
		t.Fatalf("restored applied = %d, want %d", g.Applied(), len(goldenWrites))
	}
	if got, w := fsmHash(t, g), fsmHash(t, want); got != w {
		t.Fatalf("restored state hash %v, a node that applied the writes has %v", got, w)
	}
	if got := queryInt(t, g.db, "SELECT total::BIGINT FROM v"); got != 400*7+400*399/2 {
		t.Errorf("sum of the sequence's values = %d", got)
	}
}

// frameKinds counts a snapshot's frames by kind, as written.
func frameKinds(t *testing.T, snap []byte) map[byte]int {
	t.Helper()
	r := &frameReader{r: bufio.NewReader(bytes.NewReader(snap[len(snapshotMagic):]))}
	out := map[byte]int{}
	for {
		kind, _, err := r.nextRaw()
		if err != nil {
			t.Fatalf("frame %d: %v", r.frames, err)
		}
		out[kind]++
		if kind == frameEnd {
			return out
		}
	}
}

// TestSnapshotSizeFollowsDatabase: a snapshot is about the size of the
// DuckDB file it copies, not the size of its rows Quack-encoded, which is
// several times more for TPC-H's lineitem and far more for the long
// repeated strings the divergence hunter grew; the restored copy hashes
// equal.
func TestSnapshotSizeFollowsDatabase(t *testing.T) {
	tests := []struct {
		name  string
		setup []string
		// ratio bounds the snapshot's size over the checkpointed file's.
		ratio float64
	}{
		{"lineitem", []string{
			"CALL dbgen(sf = 0.02)",
			"DROP TABLE customer", "DROP TABLE nation", "DROP TABLE orders", "DROP TABLE part",
			"DROP TABLE partsupp", "DROP TABLE region", "DROP TABLE supplier",
		}, 1.5},
		// A row's string grown by concatenating its own value: DuckDB
		// stores it in a few blocks, Quack sends every byte.
		{"repeated strings", []string{
			"CREATE TABLE t(id INTEGER, s VARCHAR)",
			"INSERT INTO t SELECT i, repeat('r1,' || i, 5000) FROM range(2000) r(i)",
		}, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			f := openFSM(t, openDB(t, dir))
			defer f.close()
			ctx := context.Background()
			for _, q := range tt.setup {
				if _, err := f.conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if _, err := f.conn.Exec(ctx, "CHECKPOINT"); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(filepath.Join(dir, "duck.db"))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Release()
			var sink memSink
			start := time.Now()
			if err := snap.Persist(&sink); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			t.Logf("database file %d bytes, snapshot %d bytes (%.2fx), Persist %v", st.Size(), sink.Len(),
				float64(sink.Len())/float64(st.Size()), took)
			if limit := tt.ratio * float64(st.Size()); float64(sink.Len()) > limit {
				t.Errorf("snapshot of %d bytes for a database file of %d: more than %.1f times", sink.Len(), st.Size(), tt.ratio)
			}
			g := openFSM(t, openDB(t, t.TempDir()))
			defer g.close()
			if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
				t.Fatal(err)
			}
			if got, want := fsmHash(t, g), fsmHash(t, f); got != want {
				t.Fatalf("restored state hash %v, source %v", got, want)
			}
		})
	}
}

// snapshotBytes writes a snapshot of the given frames, compressing those
// compressedFrame would.
func snapshotBytes(t testing.TB, frames ...rawFrame) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(snapshotMagic)
	w := &frameWriter{w: bufio.NewWriter(&b), compress: true}
	for _, f := range frames {
		var err error
		if f.kind == frameChunk {
			err = w.compressedFrame(f.kind, f.payload)
		} else {
			err = w.frame(f.kind, f.payload)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type rawFrame struct {
	kind    byte
	payload []byte
}

// rawFrameBytes is one frame as frameWriter writes it, with its checksum.
func rawFrameBytes(kind byte, payload []byte) []byte {
	hdr := binary.AppendUvarint([]byte{kind}, uint64(len(payload)))
	crc := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, payload)
	return binary.LittleEndian.AppendUint32(append(hdr, payload...), crc)
}

// zstdPayload is a frameZstd payload wrapping kind with raw, compressed.
func zstdPayload(t testing.TB, kind byte, declared int, raw []byte) []byte {
	t.Helper()
	enc, err := snapshotEncoder()
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(raw, binary.AppendUvarint([]byte{kind}, uint64(declared)))
}

// readFrames reads a snapshot's frames, decompressed, to its end frame or
// its first error.
func readFrames(snap []byte, limit int) ([]rawFrame, error) {
	br := bufio.NewReader(bytes.NewReader(snap))
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return nil, ErrSnapshotCorrupt
	}
	r := &frameReader{r: br, max: limit}
	var out []rawFrame
	for {
		kind, payload, err := r.next()
		if err != nil {
			return out, err
		}
		out = append(out, rawFrame{kind, append([]byte(nil), payload...)})
		if kind == frameEnd {
			return out, nil
		}
	}
}

// TestCompressedFrames: chunks large enough and compressible are written
// compressed and read back as the chunks they were; small or
// incompressible ones stay plain.
func TestCompressedFrames(t *testing.T) {
	compressible := bytes.Repeat([]byte("lineitem,"), 4000)
	random := make([]byte, 4000)
	rand.NewChaCha8([32]byte{1}).Read(random)
	frames := []rawFrame{
		{frameHeader, binary.AppendUvarint(nil, 9)},
		{frameChunk, compressible},
		{frameChunk, []byte("small")},
		{frameChunk, random},
	}
	snap := snapshotBytes(t, append(frames, rawFrame{frameEnd, binary.AppendUvarint(nil, uint64(len(frames)))})...)
	kinds := frameKinds(t, snap)
	if kinds[frameZstd] != 1 {
		t.Errorf("%d compressed frames, want 1 (the compressible chunk): %v", kinds[frameZstd], kinds)
	}
	got, err := readFrames(snap, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		if got[i].kind != f.kind || !bytes.Equal(got[i].payload, f.payload) {
			t.Errorf("frame %d: kind %q, %d bytes; wrote kind %q, %d bytes", i, got[i].kind, len(got[i].payload), f.kind, len(f.payload))
		}
	}
}

// TestCorruptCompressedFrame: a compressed frame whose checksum holds but
// whose contents are wrong, or a snapshot cut inside one, is reported as a
// corrupt snapshot.
func TestCorruptCompressedFrame(t *testing.T) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	good := zstdPayload(t, frameChunk, len(chunk), chunk)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-6] ^= 0x55
	withTrailer := append(append([]byte(nil), good...), 1, 2, 3)
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"kind only", []byte{frameChunk}},
		{"nested", zstdPayload(t, frameZstd, len(chunk), chunk)},
		{"declares nothing", zstdPayload(t, frameChunk, 0, chunk)},
		{"declares less", zstdPayload(t, frameChunk, len(chunk)-1, chunk)},
		{"declares more", zstdPayload(t, frameChunk, len(chunk)+1, chunk)},
		{"declares past the limit", zstdPayload(t, frameChunk, 1<<21, chunk)},
		{"not zstd", append([]byte{frameChunk, 10}, "not a zstd frame"...)},
		{"zstd cut short", good[:len(good)/2]},
		{"zstd damaged", flipped},
		{"bytes after the zstd frame", withTrailer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := append([]byte(snapshotMagic), rawFrameBytes(frameZstd, tt.payload)...)
			snap = append(snap, rawFrameBytes(frameEnd, binary.AppendUvarint(nil, 1))...)
			if _, err := readFrames(snap, 1<<20); !errors.Is(err, ErrSnapshotCorrupt) {
				t.Fatalf("err = %v, want ErrSnapshotCorrupt", err)
			}
		})
	}
	// A snapshot cut anywhere inside a compressed frame.
	whole := append([]byte(snapshotMagic), rawFrameBytes(frameZstd, good)...)
	for _, n := range []int{len(snapshotMagic) + 1, len(snapshotMagic) + 3, len(whole) / 2, len(whole) - 1, len(whole)} {
		if _, err := readFrames(whole[:n], 0); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("cut at %d of %d bytes: err = %v, want ErrSnapshotCorrupt", n, len(whole), err)
		}
	}
}

// FuzzSnapshotFrames: whatever the bytes after the magic, reading frames
// ends in frames or an error, never a panic, and no payload exceeds the
// reader's limit.
func FuzzSnapshotFrames(f *testing.F) {
	chunk := bytes.Repeat([]byte("row data "), 300)
	f.Add(snapshotBytes(f, rawFrame{frameHeader, []byte{5}}, rawFrame{frameTable, []byte("\x04main\x01t")},
		rawFrame{frameChunk, chunk}, rawFrame{frameEnd, []byte{3}})[len(snapshotMagic):])
	f.Add(rawFrameBytes(frameZstd, zstdPayload(f, frameChunk, len(chunk), chunk)))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := readFrames(append([]byte(snapshotMagic), data...), limit)
		if err != nil && !errors.Is(err, ErrSnapshotCorrupt) {
			t.Fatalf("err = %v, want ErrSnapshotCorrupt", err)
		}
		for _, fr := range frames {
			if len(fr.payload) > limit {
				t.Fatalf("a frame of %d bytes, limit %d", len(fr.payload), limit)
			}
		}
	})
}

// FuzzCompressedFrame reaches the decompression with any payload: the
// frame around it is well formed and its checksum holds.
func FuzzCompressedFrame(f *testing.F) {
	chunk := bytes.Repeat([]byte("abc"), 500)
	f.Add(zstdPayload(f, frameChunk, len(chunk), chunk))
	f.Add(zstdPayload(f, frameSQL, 3, []byte("abc")))
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc.EncodeAll(make([]byte, 1<<16), []byte{frameChunk, 0x80, 0x80, 0x04}))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, payload []byte) {
		snap := append([]byte(snapshotMagic), rawFrameBytes(frameZstd, payload)...)
		frames, err := readFrames(snap, limit)
		switch {
		case err != nil && !errors.Is(err, ErrSnapshotCorrupt):
			t.Fatalf("err = %v, want ErrSnapshotCorrupt", err)
		case err == nil && frames[len(frames)-1].kind != frameEnd:
			t.Fatal("a snapshot without its end frame read whole")
		case len(frames) == 1 && len(frames[0].payload) > limit:
			t.Fatalf("a frame of %d bytes, limit %d", len(frames[0].payload), limit)
		}
	})
}

// BenchmarkSnapshotPersist measures Persist into raft's file snapshot
// store, written and synced as a node writes it, with chunks plain (as
// before frameZstd) and compressed, on the TPC-H database one call of
// dbgen writes: the divergence hunter's grown database was sf = 1
// (DUCKRAFT_SNAPSHOT_SF; default 0.1).
func BenchmarkSnapshotPersist(b *testing.B) {
	sf := "0.1"
	if v := os.Getenv("DUCKRAFT_SNAPSHOT_SF"); v != "" {
		sf = v
	}
	dir := b.TempDir()
	f := openFSM(b, openDB(b, dir))
	defer f.close()
	ctx := context.Background()
	for _, q := range []string{"CALL dbgen(sf = " + sf + ")", "CHECKPOINT"} {
		if _, err := f.conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "duck.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("TPC-H sf %s: %d rows, database file %d MB", sf, queryInt(b, f.db, "SELECT sum(estimated_size)::BIGINT FROM duckdb_tables() WHERE schema_name = 'main'"), st.Size()>>20)
	for _, compress := range []bool{false, true} {
		name := "plain"
		if compress {
			name = "zstd"
		}
		b.Run(name, func(b *testing.B) {
			store, err := raft.NewFileSnapshotStore(b.TempDir(), 1, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			var size int64
			for b.Loop() {
				snap, err := f.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				sink, err := store.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				counted := &countingWriter{w: sink}
				w := &frameWriter{w: bufio.NewWriterSize(counted, 1<<20), compress: compress}
				err = snap.(*fsmSnapshot).write(w)
				if err == nil {
					err = w.w.Flush()
				}
				if err == nil {
					err = sink.Close()
				}
				snap.Release()
				if err != nil {
					b.Fatal(err)
				}
				size = counted.n
			}
			b.ReportMetric(float64(size)/(1<<20), "MB")
			b.ReportMetric(float64(size)/float64(st.Size()), "x-file")
		})
	}
}

// TestSnapshotCompressesOnlyWhereEveryServerReads: while a server of the
// configuration cannot read compressed frames (an older build, as gossip
// says), Persist writes plain frames only, which every build restores;
// once all can, it compresses.
func TestSnapshotCompressesOnlyWhereEveryServerReads(t *testing.T) {
	newer := map[string]bool{"n1": true, "n2": true}
	servers := []raft.Server{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	reads := func(id string) bool { return newer[id] }
	if everyServerReads(servers, reads) {
		t.Fatal("n3 reads no compressed frames, yet the configuration is said to")
	}
	if everyServerReads(nil, reads) {
		t.Fatal("an unknown configuration is said to read compressed frames")
	}
	newer["n3"] = true
	if !everyServerReads(servers, reads) {
		t.Fatal("every server reads compressed frames, yet the configuration is said not to")
	}

	f := openFSM(t, openDB(t, t.TempDir()))
	defer f.close()
	applyEach(t, f, 1, goldenWrites...)
	for _, tt := range []struct {
		name     string
		compress bool
	}{{"an older server", false}, {"every server newer", true}} {
		t.Run(tt.name, func(t *testing.T) {
			f.compress = func() bool { return tt.compress }
			snap, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Release()
			var sink memSink
			if err := snap.Persist(&sink); err != nil {
				t.Fatal(err)
			}
			kinds := frameKinds(t, sink.Bytes())
			if got := kinds[frameZstd] > 0; got != tt.compress {
				t.Fatalf("compressed frames written: %v, want %v (frames by kind %v)", got, tt.compress, kinds)
			}
			g := openFSM(t, openDB(t, t.TempDir()))
			defer g.close()
			if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
				t.Fatal(err)
			}
			if got, want := fsmHash(t, g), fsmHash(t, f); got != want {
				t.Fatalf("restored state hash %v, want %v", got, want)
			}
		})
	}
}
