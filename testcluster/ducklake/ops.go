package ducklake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
)

// Table is a DuckLake table as the one client that writes it knows it: its
// catalog ids and where each of its live rows is. Other clients only read
// it.
type Table struct {
	Name    string
	ID      int64 // 0 until its creation committed
	Created int64 // the snapshot that created it
	Inlined string
	// files are the live data files by path; inlined the live inlined
	// rows, id to row_id.
	files   map[string]*fileState
	inlined map[int64]int64
}

// NewTable returns the model of a table not created yet.
func NewTable(name string) *Table {
	return &Table{Name: name, files: map[string]*fileState{}, inlined: map[int64]int64{}}
}

// fileState is a live data file of a table.
type fileState struct {
	ID      int64
	Path    string
	Begin   int64
	Partial bool
	IDs     []int64
	// deleted are the positions its delete file lists; deleteID that
	// file's id (0: none).
	deleted    []int64
	deleteID   int64
	deletePath string
	live       map[int64]bool
}

// LiveIDs returns the ids the table holds now, by the client's model.
func (t *Table) LiveIDs() []int64 {
	var out []int64
	for id := range t.inlined {
		out = append(out, id)
	}
	for _, f := range t.files {
		for id := range f.live {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// op is one DuckLake operation ready to commit: its change, and what its
// commit does to the writer's model of the table.
type op struct {
	name     string
	change   *change
	inserted []int64
	deleted  []int64
	// apply updates the model once the commit is known to have landed,
	// with the attempt that landed.
	apply func(a *attempt)
	// discard undoes what the operation wrote locally when its commit
	// did not land (DuckLakeTransactionState::CleanupFiles).
	discard func()
}

func (l *Lake) removeFile(rel string) func() {
	return func() { os.Remove(l.data.abs(rel)) }
}

// errCreatedUnseen: a table its writer has not seen created is in the
// catalog.
var errCreatedUnseen = errors.New("the catalog holds a table its writer did not see created")

// createTable is CREATE TABLE name (id BIGINT, payload VARCHAR): the
// catalog is loaded at the transaction's snapshot, the commit allocates
// the table id, writes the table, its columns, its schema version, and
// registers and creates its inlined-data table.
func (l *Lake) createTable(ctx context.Context, t *Table) (*op, error) {
	s0, err := l.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	tables, err := l.tablesAt(ctx, *s0)
	if err != nil {
		return nil, err
	}
	if ct, ok := tables[t.Name]; ok {
		return nil, fmt.Errorf("%w: table %q exists (id %d)", errCreatedUnseen, t.Name, ct.ID)
	}
	uuid := newUUID()
	quoted := `"main".` + strconv.Quote(t.Name)
	return &op{
		name: "create_table",
		change: &change{
			schemaChange: true,
			changes:      func(*attempt) string { return "created_table:" + quoted },
			build: func(ctx context.Context, a *attempt) (string, error) {
				// CommitChanges loads the catalog at the commit's
				// snapshot for the partition and sort keys it keeps.
				if _, err := l.tablesAt(ctx, a.snap); err != nil {
					return "", err
				}
				a.tableID = a.snap.NextCatalogID
				a.snap.NextCatalogID++
				a.inlined = inlinedTableName(a.tableID, a.snap.SchemaVersion)
				return newTableSQL(a.tableID, uuid, t.Name) + newInlinedTableSQL(a.tableID, a.snap.SchemaVersion) + schemaVersionSQL(a.tableID), nil
			},
			conflicts: func(others []changeEntry) error {
				for _, o := range others {
					if o.Kind == "created_table" && o.Value == quoted {
						return fmt.Errorf("%w - attempting to create table %q in schema \"main\" - but this table has been created by another transaction already", errConflict, t.Name)
					}
				}
				return nil
			},
		},
		apply: func(a *attempt) {
			t.ID, t.Created, t.Inlined = a.tableID, a.snap.ID, a.inlined
		},
	}, nil
}

// insertFile is an INSERT too large to inline: DuckDB writes a Parquet
// file under the data path, and the commit adds its catalog row, its
// column statistics and the table's statistics.
func (l *Lake) insertFile(ctx context.Context, t *Table, ids []int64) (*op, error) {
	rel := fmt.Sprintf("main/%s/ducklake-%s.parquet", t.Name, newUUID())
	size, err := l.data.WriteRows(ctx, rel, ids)
	if err != nil {
		return nil, err
	}
	n := int64(len(ids))
	return &op{
		name:     "insert_file",
		inserted: ids,
		change: &change{
			changes: func(*attempt) string { return fmt.Sprintf("inserted_into_table:%d", t.ID) },
			build: func(_ context.Context, a *attempt) (string, error) {
				a.fileID = a.snap.NextFileID
				a.snap.NextFileID++
				st := a.stats[t.ID]
				a.rowIDStart = st.NextRowID
				next := tableStats{Records: st.Records + n, NextRowID: st.NextRowID + n, Size: st.Size + size, Initialized: st.Initialized}
				f := dataFile{ID: a.fileID, TableID: t.ID, Begin: "{SNAPSHOT_ID}", Path: rel, Records: n, Size: size,
					RowIDStart: strconv.FormatInt(st.NextRowID, 10), PartialMax: "NULL", MinID: ids[0], MaxID: ids[len(ids)-1],
					MinPay: payload(ids[0]), MaxPay: payload(ids[len(ids)-1])}
				return tableStatsSQL(t.ID, next) + newDataFileSQL(f), nil
			},
			conflicts: conflictWith("insert into table", t.ID, "dropped_table", "altered_table", "deleted_from_table", "inlined_delete"),
		},
		apply: func(a *attempt) {
			live := map[int64]bool{}
			for _, id := range ids {
				live[id] = true
			}
			t.files[rel] = &fileState{ID: a.fileID, Path: rel, Begin: a.snap.ID, IDs: ids, live: live}
		},
		discard: l.removeFile(rel),
	}, nil
}

// insertInlined is a small INSERT whose rows go into the table's
// inlined-data table in the catalog (data inlining, at most
// data_inlining_row_limit rows).
func (l *Lake) insertInlined(ctx context.Context, t *Table, ids []int64) (*op, error) {
	n := int64(len(ids))
	return &op{
		name:     "insert_inlined",
		inserted: ids,
		change: &change{
			changes: func(*attempt) string { return fmt.Sprintf("inlined_insert:%d", t.ID) },
			build: func(ctx context.Context, a *attempt) (string, error) {
				// WriteNewInlinedData looks up the newest inlined table
				// of the table before it writes into it.
				rows, err := l.meta.query(ctx, subst(latestInlinedTableSQL(t.ID), a.snap, ""))
				if err != nil {
					return "", err
				}
				if len(rows) != 1 {
					return "", fmt.Errorf("table %d has %d newest inlined-data tables", t.ID, len(rows))
				}
				a.inlined = asString(rows[0][0])
				st := a.stats[t.ID]
				a.rowIDStart = st.NextRowID
				next := tableStats{Records: st.Records + n, NextRowID: st.NextRowID + n, Size: st.Size, Initialized: st.Initialized}
				return tableStatsSQL(t.ID, next) + inlinedInsertSQL(a.inlined, st.NextRowID, ids, payload), nil
			},
			conflicts: conflictWith("insert into table", t.ID, "dropped_table", "altered_table", "deleted_from_table", "inlined_delete"),
		},
		apply: func(a *attempt) {
			for i, id := range ids {
				t.inlined[id] = a.rowIDStart + int64(i)
			}
		},
	}, nil
}

// deleteInlined is a DELETE of inlined rows: their end_snapshot is set by
// an UPDATE … FROM a VALUES CTE.
func (l *Lake) deleteInlined(t *Table, ids []int64) *op {
	rowIDs := make([]int64, len(ids))
	for i, id := range ids {
		rowIDs[i] = t.inlined[id]
	}
	return &op{
		name:    "delete_inlined",
		deleted: ids,
		change: &change{
			changes: func(*attempt) string { return fmt.Sprintf("inlined_delete:%d", t.ID) },
			build: func(context.Context, *attempt) (string, error) {
				return inlinedDeleteSQL(t.Inlined, rowIDs), nil
			},
			conflicts: conflictWith("delete from table", t.ID, "dropped_table", "altered_table", "inlined_delete", "flushed_inlined",
				"inserted_into_table", "inlined_insert"),
		},
		apply: func(*attempt) {
			for _, id := range ids {
				delete(t.inlined, id)
			}
		},
	}
}

// deleteFromFile is a DELETE of rows of one data file: DuckDB writes a
// delete file of all the file's deleted positions, which replaces the
// file's previous delete file from the commit's snapshot on.
func (l *Lake) deleteFromFile(ctx context.Context, t *Table, f *fileState, ids []int64) (*op, error) {
	pos, err := l.data.Positions(ctx, f.Path, ids)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(ids) {
		return nil, fmt.Errorf("%d of %d rows to delete found in %s", len(pos), len(ids), f.Path)
	}
	all := append(slices.Clone(f.deleted), pos...)
	slices.Sort(all)
	rel := fmt.Sprintf("main/%s/ducklake-%s-delete.parquet", t.Name, newUUID())
	size, err := l.data.WriteDeletes(ctx, rel, f.Path, all)
	if err != nil {
		return nil, err
	}
	return &op{
		name:    "delete_file",
		deleted: ids,
		change: &change{
			changes: func(*attempt) string { return fmt.Sprintf("deleted_from_table:%d", t.ID) },
			build: func(_ context.Context, a *attempt) (string, error) {
				a.fileID = a.snap.NextFileID
				a.snap.NextFileID++
				body := ""
				if f.deleteID != 0 {
					body = endDeleteFilesSQL(f.ID)
				}
				return body + newDeleteFileSQL(a.fileID, t.ID, f.ID, rel, int64(len(all)), size), nil
			},
			conflicts: conflictWith("delete from table", t.ID, "dropped_table", "altered_table", "merge_adjacent", "rewrite_delete",
				"inserted_into_table", "inlined_insert", "deleted_from_table"),
		},
		apply: func(a *attempt) {
			f.deleted, f.deleteID, f.deletePath = all, a.fileID, rel
			for _, id := range ids {
				delete(f.live, id)
			}
		},
		discard: l.removeFile(rel),
	}, nil
}

// compact is ducklake_merge_adjacent_files on one table: live files
// without deletes are merged into one file whose rows keep the snapshot
// they were committed in; the merged files leave the catalog and are
// scheduled for deletion. It returns nil when there is nothing to merge.
func (l *Lake) compact(ctx context.Context, t *Table) (*op, error) {
	s0, err := l.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := l.meta.query(ctx, subst(compactionCandidatesSQL(t.ID), *s0, ""))
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 {
		return nil, nil
	}
	if len(rows) > 4 {
		rows = rows[:4]
	}
	var (
		ids, all     []int64
		paths        []string
		sources      []mergeSource
		begin, pmax  int64 = -1, -1
		records      int64
		minID, maxID int64
	)
	for _, r := range rows {
		path := asString(r[1])
		f, ok := t.files[path]
		if !ok {
			return nil, fmt.Errorf("the catalog lists a data file %s of %s that its writer never committed", path, t.Name)
		}
		ids = append(ids, mustInt(r[0]))
		paths = append(paths, path)
		b := mustInt(r[2])
		pm, partial := asInt(r[3])
		sources = append(sources, mergeSource{Path: path, Begin: b, Partial: partial})
		if begin < 0 || b < begin {
			begin = b
		}
		if !partial {
			pm = b
		}
		pmax = max(pmax, pm)
		records += mustInt(r[4])
		all = append(all, f.IDs...)
	}
	slices.Sort(all)
	minID, maxID = all[0], all[len(all)-1]
	rel := fmt.Sprintf("main/%s/ducklake-%s.parquet", t.Name, newUUID())
	size, err := l.data.WriteMerged(ctx, rel, sources)
	if err != nil {
		return nil, err
	}
	return &op{
		name: "compact",
		change: &change{
			changes: func(*attempt) string { return fmt.Sprintf("merge_adjacent:%d", t.ID) },
			build: func(_ context.Context, a *attempt) (string, error) {
				a.fileID = a.snap.NextFileID
				a.snap.NextFileID++
				f := dataFile{ID: a.fileID, TableID: t.ID, Begin: strconv.FormatInt(begin, 10), Path: rel, Records: records, Size: size,
					RowIDStart: "NULL", PartialMax: strconv.FormatInt(pmax, 10), MinID: minID, MaxID: maxID,
					MinPay: payload(minID), MaxPay: payload(maxID)}
				return mergeAdjacentSQL(ids, paths) + newDataFileSQL(f), nil
			},
			conflicts: conflictWith("compact table", t.ID, "dropped_table", "deleted_from_table", "merge_adjacent", "rewrite_delete"),
		},
		apply: func(a *attempt) {
			live := map[int64]bool{}
			for _, p := range paths {
				delete(t.files, p)
			}
			for _, id := range all {
				live[id] = true
			}
			t.files[rel] = &fileState{ID: a.fileID, Path: rel, Begin: begin, Partial: true, IDs: all, live: live}
		},
		discard: l.removeFile(rel),
	}, nil
}

// ExpireResult is what one ducklake_expire_snapshots did.
type ExpireResult struct {
	Snapshots, DataFiles, DeleteFiles int
}

// expire is ducklake_expire_snapshots(versions := every snapshot below
// below but the newest), DeleteSnapshots's statements in order: it runs in
// the DuckLake transaction, not through the commit loop. The files no
// snapshot needs any more are found by reads that follow the DELETE of the
// snapshots in the same transaction.
func (l *Lake) expire(ctx context.Context, below int64) (ExpireResult, error) {
	var res ExpireResult
	fail := func(err error) (ExpireResult, error) {
		l.abort(ctx)
		return res, err
	}
	rows, err := l.meta.query(ctx, catalogOnly(allSnapshotsSQL(below)))
	if err != nil {
		return fail(fmt.Errorf("Failed to get snapshot information from DuckLake: %w", err))
	}
	if len(rows) == 0 {
		return res, l.end(ctx)
	}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, mustInt(r[0]))
	}
	if _, err := l.meta.query(ctx, catalogOnly(expireStatsTablesSQL)); err != nil {
		return fail(err)
	}
	for _, tbl := range []string{"ducklake_snapshot", "ducklake_snapshot_changes"} {
		if _, err := l.meta.query(ctx, catalogOnly(deleteWhereInSQL(tbl, "snapshot_id", ids))); err != nil {
			return fail(fmt.Errorf("Failed to delete snapshots in DuckLake: %w", err))
		}
	}
	res.Snapshots = len(ids)
	files, err := l.meta.query(ctx, catalogOnly(expireFilesSQL))
	if err != nil {
		return fail(err)
	}
	var fileIDs []int64
	if len(files) > 0 {
		var paths []string
		for _, r := range files {
			fileIDs = append(fileIDs, mustInt(r[0]))
			paths = append(paths, asString(r[2]))
		}
		for _, tbl := range []string{"ducklake_data_file", "ducklake_file_column_stats", "ducklake_file_variant_stats", "ducklake_file_partition_value"} {
			if _, err := l.meta.query(ctx, catalogOnly(deleteWhereInSQL(tbl, "data_file_id", fileIDs))); err != nil {
				return fail(fmt.Errorf("Failed to delete old data file information in DuckLake: %w", err))
			}
		}
		if _, err := l.meta.query(ctx, catalogOnly(scheduleDeletionSQL(fileIDs, paths))); err != nil {
			return fail(err)
		}
		res.DataFiles = len(fileIDs)
	}
	filter := ""
	if len(fileIDs) > 0 {
		filter = fmt.Sprintf("data_file_id IN (%s) OR", joinIDs(fileIDs))
	}
	dels, err := l.meta.query(ctx, catalogOnly(fmt.Sprintf(expireDeleteFilesSQL, filter)))
	if err != nil {
		return fail(err)
	}
	if len(dels) > 0 {
		var delIDs []int64
		var paths []string
		for _, r := range dels {
			delIDs = append(delIDs, mustInt(r[0]))
			paths = append(paths, asString(r[2]))
		}
		if _, err := l.meta.query(ctx, catalogOnly(deleteWhereInSQL("ducklake_delete_file", "delete_file_id", delIDs))); err != nil {
			return fail(fmt.Errorf("Failed to delete old delete file information in DuckLake: %w", err))
		}
		if _, err := l.meta.query(ctx, catalogOnly(scheduleDeletionSQL(delIDs, paths))); err != nil {
			return fail(err)
		}
		res.DeleteFiles = len(delIDs)
	}
	for _, tbl := range []string{"ducklake_schema", "ducklake_view", "ducklake_tag", "ducklake_macro"} {
		if _, err := l.meta.query(ctx, catalogOnly(fmt.Sprintf(expireOrphansSQL, tbl))); err != nil {
			return fail(err)
		}
	}
	return res, l.end(ctx)
}

// Read is what a time-travel read of a table found.
type Read struct {
	Table  string
	At     int64
	Exists bool // the snapshot was there when the read ended
	IDs    []int64
	// Rows is the multiset of IDs in a few bytes, which a run keeps
	// instead of the IDs.
	Rows digest
}

// digest is a multiset of row ids: how many, and the sum of a mix of
// each (order does not count; a row twice counts twice).
type digest struct {
	Count int64
	Sum   uint64
}

// mix is splitmix64's finalizer: ids that differ in any bit sum apart.
func mix(id int64) uint64 {
	z := uint64(id) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (d *digest) add(ids []int64, sign int64) {
	for _, id := range ids {
		d.Count += sign
		d.Sum += uint64(sign) * mix(id)
	}
}

func digestOf(ids []int64) digest {
	var d digest
	d.add(ids, 1)
	return d
}

// readAt is SELECT * FROM lake.t AT (VERSION => at): the snapshot, the
// catalog at it, the table's files with their delete files and its inlined
// rows at it, in one read-only DuckLake transaction; then the client's
// DuckDB reads the files. A snapshot that is not there (expired, or not
// yet made) gives a Read that does not exist.
func (l *Lake) readAt(ctx context.Context, table string, at int64) (Read, error) {
	r := Read{Table: table, At: at}
	fail := func(err error) (Read, error) {
		l.abort(ctx)
		return r, err
	}
	snapRows, err := l.meta.query(ctx, catalogOnly(snapshotAtVersionSQL(at)))
	if err != nil {
		return fail(fmt.Errorf("Failed to query snapshot at version %d for DuckLake: %w", at, err))
	}
	if len(snapRows) == 0 {
		return r, l.end(ctx)
	}
	s := snapRows[0]
	snap := snapshot{mustInt(s[0]), mustInt(s[1]), mustInt(s[2]), mustInt(s[3])}
	tables, err := l.tablesAt(ctx, snap)
	if err != nil {
		return fail(err)
	}
	ct, ok := tables[table]
	type file struct {
		path, del string
		partial   bool
	}
	var files []file
	if ok {
		rows, err := l.meta.query(ctx, subst(filesAtSQL(ct.ID), snap, ""))
		if err != nil {
			return fail(fmt.Errorf("Failed to get data file list from DuckLake: %w", err))
		}
		for _, row := range rows {
			_, partial := asInt(row[7])
			files = append(files, file{path: asString(row[1]), del: asString(row[9]), partial: partial})
		}
		for _, name := range ct.Inlined {
			rows, err := l.meta.query(ctx, subst(inlinedDataAtSQL(name), snap, ""))
			if err != nil {
				return fail(err)
			}
			for _, row := range rows {
				r.IDs = append(r.IDs, mustInt(row[0]))
			}
		}
	}
	// The snapshot must still be there: a snapshot expired while it was
	// read may have lost files the read needed.
	again, err := l.meta.query(ctx, catalogOnly(snapshotAtVersionSQL(at)))
	if err != nil {
		return fail(err)
	}
	if err := l.end(ctx); err != nil {
		return r, err
	}
	if len(again) == 0 {
		return r, nil
	}
	for _, f := range files {
		ids, err := l.data.ReadIDs(ctx, f.path, f.del, f.partial, at)
		if err != nil {
			return r, err
		}
		r.IDs = append(r.IDs, ids...)
	}
	slices.Sort(r.IDs)
	r.Rows, r.Exists = digestOf(r.IDs), true
	return r, nil
}
