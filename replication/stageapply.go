package replication

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// Staging: a large client transaction's appends reach the log as Stage
// entries before its COMMIT, and its Txn moves each part's rows into their
// table (Staged). A Stage entry writes no rows: it checks that it continues
// its part and lists itself in staged_entries by the log index that holds it,
// and the Raft log keeps it (logHolds) until the COMMIT reads the rows back
// from the log and inserts them into their table, so each row is written to
// the database once. The stages table lists every part with the rows it
// holds and the timestamp of the last entry that wrote it; everything here
// reads and writes only replicated state, so each node decides alike.
//
// A part a build before this one staged into a table of its own
// (stageTable) goes on there: its later entries append to the table, and
// its COMMIT moves the table's rows.

// stagesDDL creates the list of stages.
const stagesDDL = `CREATE TABLE IF NOT EXISTS ` + metaSchema + `.stages(id UBIGINT NOT NULL, part UINTEGER NOT NULL,
		rows UBIGINT NOT NULL, touched BIGINT NOT NULL)`

// stagedEntriesDDL creates the list of the entries of each part: the log
// index that holds the entry's rows, or, on a node restored from a snapshot
// (whose log starts after them), the rows themselves (encodeStageBody). Its
// name must not start with "stage_", the prefix of the older staging tables.
const stagedEntriesDDL = `CREATE TABLE IF NOT EXISTS ` + metaSchema + `.staged_entries(id UBIGINT NOT NULL, part UINTEGER NOT NULL,
		first_row UBIGINT NOT NULL, idx UBIGINT, body BLOB)`

// ErrStageGone fails a Stage or Staged entry whose stage no longer exists:
// its transaction was rolled back, or the leader dropped it after it sat
// idle longer than the stage timeout.
var ErrStageGone = errors.New("replication: the rows staged for this transaction are gone (rolled back, or dropped after the stage timeout)")

// stageTable is the staging table of part part of stage id, in the
// metadata schema.
func stageTable(id uint64, part uint32) string {
	return "stage_" + strconv.FormatUint(id, 16) + "_" + strconv.FormatUint(uint64(part), 10)
}

// stageRows returns how many rows part part of stage id holds, and whether
// it exists.
func (f *fsm) stageRows(ctx context.Context, id uint64, part uint32) (uint64, bool, error) {
	rows, err := f.conn.QueryStrings(ctx, "SELECT rows::VARCHAR FROM "+metaSchema+".stages WHERE id = "+
		strconv.FormatUint(id, 10)+" AND part = "+strconv.FormatUint(uint64(part), 10))
	if err != nil {
		return 0, false, fmt.Errorf("read stage %x part %d: %w", id, part, err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(rows[0], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read stage %x part %d: %w", id, part, err)
	}
	return n, true, nil
}

// stageType is t without its alias and collation, the parts of a type that
// its SQL text carries as the client sent them: a client's alias
// "INTEGER); DROP TABLE …" would run on every node. What is left renders
// only type names, numbers, and quoted field names and ENUM labels, and it
// stores the same values (an alias such as JSON adds no storage; the
// target's own types apply when the rows move into it).
func stageType(t wire.LogicalType) wire.LogicalType {
	t.Alias, t.Collation = "", ""
	if t.Child != nil {
		c := stageType(*t.Child)
		t.Child = &c
	}
	if t.Fields != nil {
		fields := make([]wire.Field, len(t.Fields))
		for i, f := range t.Fields {
			fields[i] = wire.Field{Name: f.Name, Type: stageType(f.Type)}
		}
		t.Fields = fields
	}
	return t
}

// applyStage checks that a Stage entry continues its part and lists it in
// staged_entries at idx, the index of the log entry that holds it; the rows
// stay in the log until the COMMIT. A part staged into a table by an older
// build is appended to instead.
func (f *fsm) applyStage(ctx context.Context, s wal.Stage, idx uint64, ts int64, res *wal.Result) error {
	if len(s.Chunks) == 0 {
		return fmt.Errorf("stage %x part %d: the entry holds no rows", s.ID, s.Part)
	}
	chunks, err := decodeStageChunks(s.ID, s.Part, s.Chunks)
	if err != nil {
		return err
	}
	have, ok, err := f.stageRows(ctx, s.ID, s.Part)
	if err != nil {
		return err
	}
	switch {
	case !ok && s.Offset > 0:
		return fmt.Errorf("stage %x part %d at row %d: %w", s.ID, s.Part, s.Offset, ErrStageGone)
	case ok && have != s.Offset:
		return fmt.Errorf("stage %x part %d holds %d rows; an entry that starts at row %d does not continue it", s.ID, s.Part, have, s.Offset)
	case !ok:
		if _, err := f.conn.Exec(ctx, "INSERT INTO "+metaSchema+".stages VALUES (?, ?, 0, ?)", s.ID, s.Part, ts); err != nil {
			return fmt.Errorf("stage %x part %d: %w", s.ID, s.Part, err)
		}
	}
	inTable, err := f.stagedInTable(ctx, s.ID, s.Part)
	if err != nil {
		return err
	}
	if inTable {
		err = f.conn.AppendChunks([]string{metaSchema}, stageTable(s.ID, s.Part), chunks)
	} else {
		f.stagesTouched = true
		f.holds.lower(idx)
		_, err = f.conn.Exec(ctx, "INSERT INTO "+metaSchema+".staged_entries VALUES (?, ?, ?, ?, NULL)", s.ID, s.Part, s.Offset, idx)
	}
	if err != nil {
		return fmt.Errorf("stage %x part %d: %w", s.ID, s.Part, err)
	}
	var n uint64
	for _, c := range chunks {
		n += uint64(c.Rows)
	}
	if _, err := f.conn.Exec(ctx, "UPDATE "+metaSchema+".stages SET rows = rows + ?, touched = ? WHERE id = ? AND part = ?",
		n, ts, s.ID, s.Part); err != nil {
		return fmt.Errorf("stage %x part %d: %w", s.ID, s.Part, err)
	}
	res.RowsChanged += int64(n)
	return nil
}

// decodeStageChunks decodes the chunks of a Stage entry of part part of
// stage id.
func decodeStageChunks(id uint64, part uint32, enc [][]byte) ([]*wire.DataChunk, error) {
	chunks := make([]*wire.DataChunk, len(enc))
	for i, b := range enc {
		c, err := wire.DecodeDataChunk(wire.NewReader(b), wire.Limits{})
		if err != nil {
			return nil, fmt.Errorf("stage %x part %d: decode chunk %d: %w", id, part, i, err)
		}
		chunks[i] = c
	}
	return chunks, nil
}

// stagedInTable reports whether part part of stage id was staged into a
// table of its own (stageTable) by an older build.
func (f *fsm) stagedInTable(ctx context.Context, id uint64, part uint32) (bool, error) {
	rows, err := f.conn.QueryStrings(ctx, "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = '"+
		metaSchema+"' AND table_name = '"+stageTable(id, part)+"'")
	if err != nil {
		return false, fmt.Errorf("stage %x part %d: %w", id, part, err)
	}
	return len(rows) > 0, nil
}

// applyStaged inserts the rows of a stage into their table and drops the
// stage, in the transaction's own DuckDB transaction. The rows of each
// entry are read back from the log (or from staged_entries after a restore),
// cast to the types of the part's first rows as their append to a staging
// table of those types would have, and inserted as INSERT INTO the table
// SELECT * casts: the same rows, errors and order as the move from a
// staging table they replace.
func (f *fsm) applyStaged(ctx context.Context, s wal.Staged, res *wal.Result) error {
	path := s.Path()
	if strings.EqualFold(path[0], metaSchema) {
		return fmt.Errorf("%w: schema %s holds the applier's own bookkeeping; staged rows may not be moved into it", ErrRefused, metaSchema)
	}
	have, ok, err := f.stageRows(ctx, s.ID, s.Part)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("stage %x part %d: %w", s.ID, s.Part, ErrStageGone)
	}
	if have != s.Rows {
		return fmt.Errorf("stage %x part %d holds %d rows, the transaction sent %d", s.ID, s.Part, have, s.Rows)
	}
	inTable, err := f.stagedInTable(ctx, s.ID, s.Part)
	if err != nil {
		return err
	}
	if inTable {
		name := metaSchema + "." + stageTable(s.ID, s.Part)
		target := sqlquote.Path(append(append([]string{f.conn.Catalog()}, path...), s.Table))
		if _, err := f.conn.Exec(ctx, "INSERT INTO "+target+" SELECT * FROM "+name); err != nil {
			return err
		}
	} else if err := f.insertStaged(ctx, s); err != nil {
		return err
	}
	if err := f.dropStage(ctx, s.ID, s.Part); err != nil {
		return err
	}
	res.RowsChanged += int64(have)
	return nil
}

// insertStaged inserts the rows of the entries of part s.Part of stage s.ID
// into s's table, one entry at a time, so that memory holds one entry's
// rows.
func (f *fsm) insertStaged(ctx context.Context, s wal.Staged) error {
	entries, err := stagedEntries(ctx, f.conn, s.ID, s.Part)
	if err != nil {
		return err
	}
	var as []wire.LogicalType
	for _, e := range entries {
		enc, err := stageBody(ctx, f.conn, f.stageLog, s.ID, s.Part, e)
		if err != nil {
			return err
		}
		chunks, err := decodeStageChunks(s.ID, s.Part, enc)
		if err != nil {
			return err
		}
		if as == nil {
			as = make([]wire.LogicalType, len(chunks[0].Columns))
			for i, v := range chunks[0].Columns {
				as[i] = stageType(v.Type)
			}
		}
		if err := f.conn.InsertChunks(s.Path(), s.Table, as, chunks); err != nil {
			return err
		}
		f.progress.Add(1)
	}
	return nil
}

// applyUnstage drops the parts of stage u.ID last written before
// u.IdleBefore.
func (f *fsm) applyUnstage(ctx context.Context, u wal.Unstage) error {
	parts, err := f.conn.QueryStrings(ctx, "SELECT part::VARCHAR FROM "+metaSchema+".stages WHERE id = "+
		strconv.FormatUint(u.ID, 10)+" AND touched < "+strconv.FormatInt(u.IdleBefore, 10)+" ORDER BY part")
	if err != nil {
		return fmt.Errorf("unstage %x: %w", u.ID, err)
	}
	for _, p := range parts {
		part, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return fmt.Errorf("unstage %x: %w", u.ID, err)
		}
		if err := f.dropStage(ctx, u.ID, uint32(part)); err != nil {
			return err
		}
	}
	return nil
}

// dropStage forgets part part of stage id: its entries, its staging table
// if an older build made one, and its row in stages.
func (f *fsm) dropStage(ctx context.Context, id uint64, part uint32) error {
	f.stagesTouched = true
	if _, err := f.conn.Exec(ctx, "DROP TABLE IF EXISTS "+metaSchema+"."+stageTable(id, part)); err != nil {
		return fmt.Errorf("drop stage %x part %d: %w", id, part, err)
	}
	if _, err := f.conn.Exec(ctx, "DELETE FROM "+metaSchema+".staged_entries WHERE id = ? AND part = ?", id, part); err != nil {
		return fmt.Errorf("drop stage %x part %d: %w", id, part, err)
	}
	if _, err := f.conn.Exec(ctx, "DELETE FROM "+metaSchema+".stages WHERE id = ? AND part = ?", id, part); err != nil {
		return fmt.Errorf("drop stage %x part %d: %w", id, part, err)
	}
	return nil
}

// IdleStages lists the stages of this node's database that no entry has
// written since before (unix microseconds): the leader proposes an Unstage
// for each, so a transaction whose client went away does not keep its
// staged rows for ever.
func (s *Store) IdleStages(ctx context.Context, before int64) ([]uint64, error) {
	conn, err := s.fsm.db.Connect()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rows, err := conn.QueryStrings(ctx, "SELECT DISTINCT id::VARCHAR FROM "+metaSchema+".stages WHERE touched < "+
		strconv.FormatInt(before, 10)+" ORDER BY 1")
	if err != nil {
		return nil, fmt.Errorf("list idle stages: %w", err)
	}
	ids := make([]uint64, 0, len(rows))
	for _, r := range rows {
		id, err := strconv.ParseUint(r, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("list idle stages: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
