package ducklake

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
)

// Data is a lake's DATA_PATH and the DuckDB in this process that writes
// and reads its Parquet files, as the client's own DuckDB does: only the
// catalog rows go to the catalog server.
type Data struct {
	Path string
	db   *engine.DB
}

// OpenData opens the DuckDB that reads and writes the files under path.
func OpenData(path string) (*Data, error) {
	db, err := engine.Open("", engine.Options{AllowExternalAccess: true, Threads: 1})
	if err != nil {
		return nil, fmt.Errorf("open the data engine: %w", err)
	}
	return &Data{Path: path, db: db}, nil
}

// Close closes the engine.
func (d *Data) Close() error { return d.db.Close() }

// payload is the payload column of row id.
func payload(id int64) string { return fmt.Sprintf("p%d", id) }

// snapshotColumn names the column of a merged file that holds the
// snapshot each row was committed in, so that a reader at an older
// snapshot sees only the rows committed by then (DuckLake's partial files,
// partial_max).
const snapshotColumn = "_ducklake_internal_snapshot_id"

func (d *Data) abs(rel string) string { return filepath.Join(d.Path, filepath.FromSlash(rel)) }

func (d *Data) exec(ctx context.Context, sql string) error {
	c, err := d.db.Connect()
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Exec(ctx, sql)
	return err
}

func (d *Data) ints(ctx context.Context, sql string) ([]int64, error) {
	c, err := d.db.Connect()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	res, err := c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var out []int64
	for {
		ch, err := res.Next()
		if err != nil {
			return nil, err
		}
		if ch == nil {
			return out, nil
		}
		for r := 0; r < ch.Rows; r++ {
			v, err := ch.Columns[0].Value(r)
			if err != nil {
				return nil, err
			}
			out = append(out, mustInt(v))
		}
	}
}

func (d *Data) size(rel string) (int64, error) {
	st, err := os.Stat(d.abs(rel))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// WriteRows writes a data file of the rows ids at rel (a path relative to
// the data path) and returns its size.
func (d *Data) WriteRows(ctx context.Context, rel string, ids []int64) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(d.abs(rel)), 0o755); err != nil {
		return 0, err
	}
	vals := make([]string, len(ids))
	for i, id := range ids {
		vals[i] = fmt.Sprintf("(%d, %s)", id, sqlquote.Literal(payload(id)))
	}
	q := fmt.Sprintf("COPY (SELECT * FROM (VALUES %s) t(id, payload)) TO %s (FORMAT parquet)",
		strings.Join(vals, ", "), sqlquote.Literal(d.abs(rel)))
	if err := d.exec(ctx, q); err != nil {
		return 0, fmt.Errorf("write %s: %w", rel, err)
	}
	return d.size(rel)
}

// mergeSource is a file to merge: its path and the snapshot its rows were
// committed in, unless it is itself a merged file (partial).
type mergeSource struct {
	Path    string
	Begin   int64
	Partial bool
}

// WriteMerged writes at rel one file of the rows of sources, each with the
// snapshot it was committed in, and returns its size.
func (d *Data) WriteMerged(ctx context.Context, rel string, sources []mergeSource) (int64, error) {
	parts := make([]string, len(sources))
	for i, s := range sources {
		snap := fmt.Sprintf("%d::BIGINT", s.Begin)
		if s.Partial {
			snap = snapshotColumn
		}
		parts[i] = fmt.Sprintf("SELECT id, payload, %s AS %s FROM read_parquet(%s)", snap, snapshotColumn, sqlquote.Literal(d.abs(s.Path)))
	}
	q := fmt.Sprintf("COPY (SELECT * FROM (%s) ORDER BY %s, id) TO %s (FORMAT parquet)",
		strings.Join(parts, " UNION ALL "), snapshotColumn, sqlquote.Literal(d.abs(rel)))
	if err := d.exec(ctx, q); err != nil {
		return 0, fmt.Errorf("merge into %s: %w", rel, err)
	}
	return d.size(rel)
}

// Positions returns the row positions of ids in the data file at rel.
func (d *Data) Positions(ctx context.Context, rel string, ids []int64) ([]int64, error) {
	return d.ints(ctx, fmt.Sprintf("SELECT file_row_number FROM read_parquet(%s, file_row_number = true) WHERE id IN (%s) ORDER BY 1",
		sqlquote.Literal(d.abs(rel)), joinIDs(ids)))
}

// WriteDeletes writes a delete file (file_path, pos) of the positions of
// the data file dataRel at rel, and returns its size.
func (d *Data) WriteDeletes(ctx context.Context, rel, dataRel string, positions []int64) (int64, error) {
	vals := make([]string, len(positions))
	for i, p := range positions {
		vals[i] = fmt.Sprintf("(%d)", p)
	}
	q := fmt.Sprintf("COPY (SELECT %s AS file_path, pos::BIGINT AS pos FROM (VALUES %s) t(pos) ORDER BY pos) TO %s (FORMAT parquet)",
		sqlquote.Literal(d.abs(dataRel)), strings.Join(vals, ", "), sqlquote.Literal(d.abs(rel)))
	if err := os.MkdirAll(filepath.Dir(d.abs(rel)), 0o755); err != nil {
		return 0, err
	}
	if err := d.exec(ctx, q); err != nil {
		return 0, fmt.Errorf("write deletes %s: %w", rel, err)
	}
	return d.size(rel)
}

// ReadIDs returns the ids a reader at snapshot at sees in the data file
// rel: without the positions of its delete file delRel (if any) and, in a
// merged file, without the rows committed after at.
func (d *Data) ReadIDs(ctx context.Context, rel, delRel string, partial bool, at int64) ([]int64, error) {
	q := fmt.Sprintf("SELECT id FROM read_parquet(%s, file_row_number = true) WHERE true", sqlquote.Literal(d.abs(rel)))
	if delRel != "" {
		q += fmt.Sprintf(" AND file_row_number NOT IN (SELECT pos FROM read_parquet(%s))", sqlquote.Literal(d.abs(delRel)))
	}
	if partial {
		q += fmt.Sprintf(" AND %s <= %d", snapshotColumn, at)
	}
	return d.ints(ctx, q)
}

// FileIDs returns every id of the data file rel and the snapshot of each
// row (the file's own begin for a plain file).
func (d *Data) FileIDs(ctx context.Context, rel string) ([]int64, error) {
	return d.ints(ctx, fmt.Sprintf("SELECT id FROM read_parquet(%s) ORDER BY id", sqlquote.Literal(d.abs(rel))))
}
