package ducklake

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync/atomic"
)

// Lake is one DuckLake client attached to a catalog: a DuckLakeCatalog with
// its metadata connection, in the mode its quack extension would send.
type Lake struct {
	meta  *metaConn
	data  *Data
	retry RetryConfig
	// snap is the snapshot of the open DuckLake transaction, read at its
	// first use (DuckLakeTransaction::GetSnapshot); nil outside one.
	snap *snapshot
}

// NewLake makes a client of the catalog on b, writing data under data.
// sent, if set, counts the texts the client sends.
func NewLake(b Backend, mode Mode, data *Data, retry RetryConfig, sent *atomic.Int64) *Lake {
	return &Lake{meta: &metaConn{b: b, mode: mode, sent: sent}, data: data, retry: retry}
}

// Backend returns the catalog server the client sends to.
func (l *Lake) Backend() Backend { return l.meta.b }

// ErrNoLake is Attach's answer when the catalog holds no DuckLake and
// create is false.
var ErrNoLake = errors.New("the catalog holds no DuckLake")

// Attach is ATTACH 'ducklake:quack:…' (DuckLakeInitializer::Initialize):
// the secrets probe, the information_schema probe, then either the
// catalog's creation in one text (create) or LoadDuckLake, then the probe
// for a server-side ducklake_commit, all in the attach's transaction. It
// reports whether the server offered ducklake_commit.
func (l *Lake) Attach(ctx context.Context, create bool) (serverCommit bool, err error) {
	defer func() {
		if err != nil {
			l.meta.rollback(ctx)
		}
	}()
	// DuckLake ignores this probe's answer: a server that refuses to
	// list secrets (duckraft's DuckDB has no file system access) only
	// costs the reset after an error.
	if _, err := l.meta.query(ctx, probeSecretsSQL); err != nil && !answered(err) {
		return false, fmt.Errorf("attach: %w", err)
	}
	rows, err := l.meta.query(ctx, catalogOnly(metadataExistsSQL))
	if err != nil {
		return false, fmt.Errorf("Failed to probe DuckLake metadata: %w", err)
	}
	if len(rows) == 1 && mustInt(rows[0][0]) > 0 {
		if _, err := l.meta.query(ctx, catalogOnly(loadDuckLakeSQL)); err != nil {
			return false, fmt.Errorf("Failed to load existing DuckLake: %w", err)
		}
	} else {
		if !create {
			return false, ErrNoLake
		}
		if _, err := l.meta.query(ctx, catalogOnly(initializeSQL(l.data.Path, newUUID()))); err != nil {
			return false, fmt.Errorf("Failed to initialize DuckLake: %w", err)
		}
	}
	rows, err = l.meta.query(ctx, probeCommitFunctionSQL)
	if err == nil {
		serverCommit = len(rows) > 0
	}
	if err := l.meta.commit(ctx); err != nil {
		return false, fmt.Errorf("attach: commit: %w", err)
	}
	return serverCommit, nil
}

// snapshot returns the open transaction's snapshot, reading the newest one
// at first use.
func (l *Lake) snapshot(ctx context.Context) (*snapshot, error) {
	if l.snap != nil {
		return l.snap, nil
	}
	rows, err := l.meta.query(ctx, catalogOnly(latestSnapshotSQL))
	if err != nil {
		return nil, fmt.Errorf("Failed to query most recent snapshot for DuckLake: %w", err)
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("%d newest snapshots in DuckLake", len(rows))
	}
	r := rows[0]
	l.snap = &snapshot{mustInt(r[0]), mustInt(r[1]), mustInt(r[2]), mustInt(r[3])}
	return l.snap, nil
}

// stats reads the global table statistics.
func (l *Lake) stats(ctx context.Context) (map[int64]tableStats, error) {
	rows, err := l.meta.query(ctx, catalogOnly(globalTableStatsSQL))
	if err != nil {
		return nil, fmt.Errorf("Failed to get global table stats: %w", err)
	}
	return parseStats(rows, 0), nil
}

// end ends a DuckLake transaction that wrote nothing (a read, or an
// operation that found nothing to do).
func (l *Lake) end(ctx context.Context) error {
	l.snap = nil
	return l.meta.commit(ctx)
}

// abort ends a DuckLake transaction after an error.
func (l *Lake) abort(ctx context.Context) {
	l.snap = nil
	l.meta.rollback(ctx)
}

// catalogTable is a table of the catalog at a snapshot.
type catalogTable struct {
	ID      int64
	Inlined []string
}

// tablesAt loads the catalog at snap (BuildCatalogForSnapshot): the
// schemas, then the tables with their columns.
func (l *Lake) tablesAt(ctx context.Context, snap snapshot) (map[string]catalogTable, error) {
	if _, err := l.meta.query(ctx, subst(schemasAtSQL, snap, "")); err != nil {
		return nil, fmt.Errorf("Failed to get schema information from DuckLake: %w", err)
	}
	rows, err := l.meta.query(ctx, subst(tablesAtSQL, snap, ""))
	if err != nil {
		return nil, fmt.Errorf("Failed to get table information from DuckLake: %w", err)
	}
	out := map[string]catalogTable{}
	for _, r := range rows {
		name := asString(r[3])
		if _, ok := out[name]; ok {
			continue
		}
		t := catalogTable{ID: mustInt(r[1])}
		if list, ok := r[5].([]any); ok {
			for _, e := range list {
				if s, ok := structField(e, "name"); ok {
					t.Inlined = append(t.Inlined, asString(s))
				}
			}
		}
		out[name] = t
	}
	return out, nil
}

// newUUID returns a random UUID in its text form.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
