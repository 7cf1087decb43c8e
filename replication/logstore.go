package replication

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"go.etcd.io/bbolt"
)

// The log stores a Store can keep raft's log and stable state in
// (Config.LogStore).
const (
	// LogStoreBoltDB is raft-boltdb/v2, in Dir/raft.db: one bbolt file,
	// two fsyncs per append (pages, then meta page). The default.
	LogStoreBoltDB = "boltdb"
	// LogStoreWAL is hashicorp/raft-wal, in Dir/wal/: append-only segment
	// files, one fsync per append, and a small bbolt file for the stable
	// state and the segment list.
	LogStoreWAL = "wal"
)

// ErrEntryTooLarge is returned by Submit for a command larger than the log
// store can hold in one entry.
var ErrEntryTooLarge = errors.New("replication: command too large for one log entry")

// walMaxEntry is the largest command a raft-wal store accepts. raft-wal
// writes an entry of any size but refuses to read one over
// segment.MaxEntrySize (64 MiB) back ("WAL is corrupt"), so a larger entry
// would be acknowledged and then be unreadable for replay, replication and
// catch-up (TestWALCannotReadHugeEntries). The margin
// covers raft-wal's encoding of the entry around the command (index,
// term, type, times: under 100 bytes).
const walMaxEntry = segment.MaxEntrySize - 4<<10

// LogStoreMismatchError is returned by Open when Dir holds the raft state
// of another log store than Config.LogStore: starting would begin an empty
// log beside the real one and lose this node's entries and vote.
type LogStoreMismatchError struct {
	// Dir is the raft directory; Found the store whose files are in it
	// (Path names one); Want the store asked for.
	Dir, Path, Found, Want string
}

func (e *LogStoreMismatchError) Error() string {
	return fmt.Sprintf("replication: %s holds the raft state of log store %q (%s), not of %q", e.Dir, e.Found, e.Path, e.Want)
}

// raftStore is raft's log and stable store in one, as both libraries
// provide it.
type raftStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// storeFiles names the file that shows a log store's state is in dir.
func storeFiles(dir string) map[string]string {
	return map[string]string{
		LogStoreBoltDB: filepath.Join(dir, "raft.db"),
		LogStoreWAL:    filepath.Join(dir, "wal", metadb.FileName),
	}
}

// openRaftStore opens (or creates) the log store kind in dir, after
// checking that dir holds no other store's state.
func openRaftStore(kind, dir string, hlog hclog.Logger) (raftStore, error) {
	files := storeFiles(dir)
	if _, ok := files[kind]; !ok {
		return nil, fmt.Errorf("replication: unknown log store %q (want %q or %q)", kind, LogStoreBoltDB, LogStoreWAL)
	}
	for other, path := range files {
		if other == kind {
			continue
		}
		if _, err := os.Stat(path); err == nil {
			return nil, &LogStoreMismatchError{Dir: dir, Path: path, Found: other, Want: kind}
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("look for %s state: %w", other, err)
		}
	}
	switch kind {
	case LogStoreWAL:
		wdir := filepath.Join(dir, "wal")
		if err := os.MkdirAll(wdir, 0o750); err != nil {
			return nil, fmt.Errorf("open raft-wal: %w", err)
		}
		// raft-wal fsyncs the segment file on every StoreLogs before
		// returning (segment.Writer.Append → sync), and commits its
		// bbolt stable state with bbolt's default fsync; it has no
		// option to skip either, so acknowledged still means durable.
		meta := &metadb.BoltMetaDB{}
		w, err := raftwal.Open(wdir, raftwal.WithLogger(hlog.Named("wal")), raftwal.WithMetaStore(meta))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("open raft-wal in %s: %w", wdir, err), meta.Close())
		}
		return &walStore{WAL: w, meta: meta}, nil
	default:
		// bbolt's freelist is not synced but rebuilt at open, as etcd
		// does, so a commit writes fewer pages; every commit still
		// fsyncs.
		b, err := raftboltdb.New(raftboltdb.Options{Path: files[LogStoreBoltDB],
			BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}})
		if err != nil {
			return nil, fmt.Errorf("open raft-boltdb: %w", err)
		}
		return b, nil
	}
}

// walStore is a raft-wal store that closes its meta store too:
// raftwal.WAL.Close leaves the bbolt file of the stable state open and
// locked, and reopening the directory in the same process (a Store closed
// and opened again) would wait on that lock for ever.
type walStore struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

// GetLog refuses entries before the first index. raft-wal truncates the
// head of its tail segment only in its metadata and reads the tail segment
// first, so until the segment rotates (64 MiB) it still returns entries a
// snapshot compacted away: the leader then replicates a late joiner from
// index 1 instead of sending it the snapshot, and FirstIndex and GetLog
// disagree where rpcGuard and needRestore rely on them agreeing.
func (w *walStore) GetLog(index uint64, log *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, log)
}

func (w *walStore) Close() error {
	return errors.Join(w.WAL.Close(), w.meta.Close())
}
