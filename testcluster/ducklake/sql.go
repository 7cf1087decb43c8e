package ducklake

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// The statement shapes the DuckLake client sends to its catalog, written
// from duckdb/ducklake at 2ed0a0be (2026-08-20). Each function names the
// file and function whose text it follows; DESIGN.md lists them. The texts
// keep DuckLake's placeholders ({SNAPSHOT_ID}, …) until subst fills them,
// as DuckLake does right before it sends a text.

// schemaIdent is {METADATA_CATALOG} as QuackMetadataManager::Query
// replaces it: the metadata schema alone, quoted
// (DuckLakeUtil::SQLIdentifierToString), never the catalog.
const schemaIdent = `"main"`

// snapshot is a DuckLake snapshot row (DuckLakeSnapshot).
type snapshot struct {
	ID, SchemaVersion, NextCatalogID, NextFileID int64
}

// subst fills the placeholders of a text as
// DuckLakeMetadataManager::SubstituteSnapshotPlaceholders and
// QuackMetadataManager::Query do. commitMessage is the commit's tag
// ({COMMIT_MESSAGE}, set by CALL lake.set_commit_message).
func subst(q string, s snapshot, commitMessage string) string {
	r := strings.NewReplacer(
		"{METADATA_CATALOG}", schemaIdent,
		"{METADATA_SCHEMA_NAME_LITERAL}", "'main'",
		"{SNAPSHOT_ID}", strconv.FormatInt(s.ID, 10),
		"{SCHEMA_VERSION}", strconv.FormatInt(s.SchemaVersion, 10),
		"{NEXT_CATALOG_ID}", strconv.FormatInt(s.NextCatalogID, 10),
		"{NEXT_FILE_ID}", strconv.FormatInt(s.NextFileID, 10),
		"{AUTHOR}", "'harness'",
		"{COMMIT_MESSAGE}", sqlquote.Literal(commitMessage),
		"{COMMIT_EXTRA_INFO}", "NULL",
	)
	return r.Replace(q)
}

// catalogOnly fills the catalog placeholders of a text that names no
// snapshot.
func catalogOnly(q string) string { return subst(q, snapshot{}, "") }

// probeSecretsSQL: DuckLakeInitializer::Initialize, "explicitly load all
// secrets", sent through the metadata manager.
const probeSecretsSQL = "FROM duckdb_secrets()"

// metadataExistsSQL: QuackMetadataManager::MetadataExistsQuery, the
// information_schema probe of ATTACH.
const metadataExistsSQL = "SELECT COUNT(*) FROM information_schema.tables " +
	"WHERE table_name = 'ducklake_metadata' AND table_schema = {METADATA_SCHEMA_NAME_LITERAL}"

// probeCommitFunctionSQL: QuackMetadataManager::ProbeServerCapabilities. No
// row means no server-side ducklake_commit: the client runs its own
// commit loop.
const probeCommitFunctionSQL = "SELECT 1 FROM duckdb_functions() WHERE function_name = 'ducklake_commit' LIMIT 1"

// loadDuckLakeSQL: DuckLakeMetadataManager::LoadDuckLake.
const loadDuckLakeSQL = "\nSELECT key, value, scope, scope_id FROM {METADATA_CATALOG}.ducklake_metadata\n"

// createTablesSQL: DuckLakeMetadataManager::GetCreateTableStatements, the
// 29 metadata tables, one statement a line.
var createTablesSQL = []string{
	"CREATE TABLE {METADATA_CATALOG}.ducklake_metadata(key VARCHAR NOT NULL, value VARCHAR NOT NULL, scope VARCHAR, scope_id BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_snapshot(snapshot_id BIGINT PRIMARY KEY, snapshot_time TIMESTAMPTZ, schema_version BIGINT, next_catalog_id BIGINT, next_file_id BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_snapshot_changes(snapshot_id BIGINT PRIMARY KEY, changes_made VARCHAR, author VARCHAR, commit_message VARCHAR, commit_extra_info VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_schema(schema_id BIGINT PRIMARY KEY, schema_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_table(table_id BIGINT, table_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id BIGINT, table_name VARCHAR, path VARCHAR, path_is_relative BOOLEAN);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_view(view_id BIGINT, view_uuid UUID, begin_snapshot BIGINT, end_snapshot BIGINT, schema_id BIGINT, view_name VARCHAR, dialect VARCHAR, sql VARCHAR, column_aliases VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_tag(object_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_column_tag(table_id BIGINT, column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, key VARCHAR, value VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_data_file(data_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, file_order BIGINT, path VARCHAR, path_is_relative BOOLEAN, file_format VARCHAR, record_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, row_id_start BIGINT, partition_id BIGINT, encryption_key VARCHAR,  mapping_id BIGINT, partial_max BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_file_column_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_file_variant_stats(data_file_id BIGINT, table_id BIGINT, column_id BIGINT, variant_path VARCHAR, shredded_type VARCHAR, column_size_bytes BIGINT, value_count BIGINT, null_count BIGINT, min_value VARCHAR, max_value VARCHAR, contains_nan BOOLEAN, extra_stats VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_delete_file(delete_file_id BIGINT PRIMARY KEY, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, format VARCHAR, delete_count BIGINT, file_size_bytes BIGINT, footer_size BIGINT, encryption_key VARCHAR, partial_max BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_column(column_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, table_id BIGINT, column_order BIGINT, column_name VARCHAR, column_type VARCHAR, initial_default VARCHAR, default_value VARCHAR, nulls_allowed BOOLEAN, parent_column BIGINT, default_value_type VARCHAR, default_value_dialect VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_table_stats(table_id BIGINT, record_count BIGINT, next_row_id BIGINT, file_size_bytes BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_table_column_stats(table_id BIGINT, column_id BIGINT, contains_null BOOLEAN, contains_nan BOOLEAN, min_value VARCHAR, max_value VARCHAR, extra_stats VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_partition_info(partition_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_partition_column(partition_id BIGINT, table_id BIGINT, partition_key_index BIGINT, column_id BIGINT, transform VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_file_partition_value(data_file_id BIGINT, table_id BIGINT, partition_key_index BIGINT, partition_value VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_files_scheduled_for_deletion(data_file_id BIGINT, path VARCHAR, path_is_relative BOOLEAN, schedule_start TIMESTAMPTZ);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_inlined_data_tables(table_id BIGINT, table_name VARCHAR, schema_version BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_column_mapping(mapping_id BIGINT, table_id BIGINT, type VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_name_mapping(mapping_id BIGINT, column_id BIGINT, source_name VARCHAR, target_field_id BIGINT, parent_column BIGINT, is_partition BOOLEAN);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_schema_versions(begin_snapshot BIGINT, schema_version BIGINT, table_id BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_macro(schema_id BIGINT, macro_id BIGINT, macro_name VARCHAR, begin_snapshot BIGINT, end_snapshot BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_macro_impl(macro_id BIGINT, impl_id BIGINT, dialect VARCHAR, sql VARCHAR, type VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_macro_parameters(macro_id BIGINT, impl_id BIGINT,column_id BIGINT, parameter_name VARCHAR, parameter_type VARCHAR, default_value VARCHAR, default_value_type VARCHAR);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_sort_info(sort_id BIGINT, table_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT);",
	"CREATE TABLE {METADATA_CATALOG}.ducklake_sort_expression(sort_id BIGINT, table_id BIGINT, sort_key_index BIGINT, expression VARCHAR, dialect VARCHAR, sort_direction VARCHAR, null_order VARCHAR);",
}

// initializeSQL: DuckLakeMetadataManager::InitializeDuckLake, the whole
// catalog in one text: the tables, then the first snapshot (with NOW()),
// its changes, the metadata keys and the main schema.
func initializeSQL(dataPath, schemaUUID string) string {
	var b strings.Builder
	b.WriteString("\n")
	for _, s := range createTablesSQL {
		b.WriteString(s + "\n")
	}
	fmt.Fprintf(&b, `
INSERT INTO {METADATA_CATALOG}.ducklake_snapshot VALUES (0, NOW(), 0, 1, 0);
INSERT INTO {METADATA_CATALOG}.ducklake_snapshot_changes VALUES (0, 'created_schema:"main"',  NULL, NULL, NULL);
INSERT INTO {METADATA_CATALOG}.ducklake_metadata (key, value) VALUES ('version', '1.0'), ('created_by', 'DuckDB harness'), ('data_path', %s), ('encrypted', 'false');
INSERT INTO {METADATA_CATALOG}.ducklake_schema VALUES (0, '%s'::UUID, 0, NULL, 'main', 'main/', true);
	`, sqlquote.Literal(dataPath), schemaUUID)
	return b.String()
}

// latestSnapshotSQL: DuckLakeMetadataManager::LatestSnapshotQuery
// (GetSnapshot): the snapshot a transaction starts from.
const latestSnapshotSQL = `SELECT snapshot_id, schema_version, next_catalog_id, next_file_id FROM {METADATA_CATALOG}.ducklake_snapshot WHERE snapshot_id = (SELECT MAX(snapshot_id) FROM {METADATA_CATALOG}.ducklake_snapshot);`

// snapshotAtVersionSQL: DuckLakeMetadataManager::GetSnapshot(at_clause)
// for AT (VERSION => n), the time-travel read.
func snapshotAtVersionSQL(n int64) string {
	return fmt.Sprintf(`
SELECT snapshot_id, schema_version, next_catalog_id, next_file_id
FROM {METADATA_CATALOG}.ducklake_snapshot
WHERE snapshot_id = %d;`, n)
}

// snapshotAndStatsAndChangesSQL:
// DuckLakeMetadataManager::GetSnapshotAndStatsAndChangesQuery, what a
// retried commit reads: the newest snapshot, the changes made since the
// transaction's snapshot ({SNAPSHOT_ID}), and the table statistics.
const snapshotAndStatsAndChangesSQL = `
SELECT
    snapshot_id,
    schema_version,
    next_catalog_id,
    next_file_id,
    COALESCE((
            SELECT STRING_AGG(changes_made, ',')
            FROM {METADATA_CATALOG}.ducklake_snapshot_changes c
            WHERE c.snapshot_id > {SNAPSHOT_ID}
            ),'') AS changes,
    NULL AS table_id,
    NULL AS column_id,
    NULL AS record_count,
    NULL AS next_row_id,
    NULL AS file_size_bytes,
    NULL AS contains_null,
    NULL AS contains_nan,
    NULL AS min_value,
    NULL AS max_value,
    NULL AS extra_stats
    FROM {METADATA_CATALOG}.ducklake_snapshot
    WHERE snapshot_id = (
        SELECT MAX(snapshot_id)
        FROM {METADATA_CATALOG}.ducklake_snapshot)
UNION ALL
SELECT
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    table_id,
    column_id,
    record_count,
    next_row_id,
    file_size_bytes,
    contains_null,
    contains_nan,
    min_value,
    max_value,
    extra_stats
FROM {METADATA_CATALOG}.ducklake_table_stats
LEFT JOIN {METADATA_CATALOG}.ducklake_table_column_stats
    USING (table_id)
WHERE record_count IS NOT NULL
    AND file_size_bytes IS NOT NULL
ORDER BY table_id NULLS FIRST;
	`

// globalTableStatsSQL: DuckLakeMetadataManager::GlobalTableStatsQuery, the
// statistics a first commit attempt builds on.
const globalTableStatsSQL = `
SELECT table_id, column_id, record_count, next_row_id, file_size_bytes, contains_null, contains_nan, min_value, max_value, extra_stats
FROM {METADATA_CATALOG}.ducklake_table_stats
LEFT JOIN {METADATA_CATALOG}.ducklake_table_column_stats USING (table_id)
WHERE record_count IS NOT NULL
  AND file_size_bytes IS NOT NULL
ORDER BY table_id;
`

// schemasAtSQL: DuckLakeMetadataManager::BuildCatalogForSnapshot, the
// schema load.
const schemasAtSQL = `
SELECT schema_id, schema_uuid::VARCHAR, schema_name, path, path_is_relative
FROM {METADATA_CATALOG}.ducklake_schema
WHERE {SNAPSHOT_ID} >= begin_snapshot AND ({SNAPSHOT_ID} < end_snapshot OR end_snapshot IS NULL)
`

// tablesAtSQL: DuckLakeMetadataManager::BuildCatalogForSnapshot, the table
// and column load with its correlated LIST subqueries.
const tablesAtSQL = `
SELECT schema_id, tbl.table_id, table_uuid::VARCHAR, table_name,
	(
		SELECT LIST({'key': key, 'value': value})
		FROM {METADATA_CATALOG}.ducklake_tag tag
		WHERE object_id=table_id AND
		      {SNAPSHOT_ID} >= tag.begin_snapshot AND ({SNAPSHOT_ID} < tag.end_snapshot OR tag.end_snapshot IS NULL)
	) AS tag,
	(
		SELECT LIST({'name': table_name, 'schema_version': schema_version})
		FROM {METADATA_CATALOG}.ducklake_inlined_data_tables inlined_data_tables
		WHERE inlined_data_tables.table_id = tbl.table_id
	) AS inlined_data_tables,
	path, path_is_relative,
	col.column_id, column_name, column_type, initial_default, default_value, nulls_allowed, parent_column,
	(
		SELECT LIST({'key': key, 'value': value})
		FROM {METADATA_CATALOG}.ducklake_column_tag col_tag
		WHERE col_tag.table_id=tbl.table_id AND col_tag.column_id=col.column_id AND
		      {SNAPSHOT_ID} >= col_tag.begin_snapshot AND ({SNAPSHOT_ID} < col_tag.end_snapshot OR col_tag.end_snapshot IS NULL)
	) AS column_tags, default_value_type
FROM {METADATA_CATALOG}.ducklake_table tbl
LEFT JOIN {METADATA_CATALOG}.ducklake_column col USING (table_id)
WHERE {SNAPSHOT_ID} >= tbl.begin_snapshot AND ({SNAPSHOT_ID} < tbl.end_snapshot OR tbl.end_snapshot IS NULL)
  AND (({SNAPSHOT_ID} >= col.begin_snapshot AND ({SNAPSHOT_ID} < col.end_snapshot OR col.end_snapshot IS NULL)) OR column_id IS NULL)
ORDER BY table_id, parent_column NULLS FIRST, column_order
`

// filesAtSQL: DuckLakeMetadataManager::GetFilesForTable without filters:
// the data files of a table at a snapshot with the delete file in force
// for each.
func filesAtSQL(tableID int64) string {
	return fmt.Sprintf(`
SELECT data.data_file_id, data.path AS data_path, data.path_is_relative AS data_path_is_relative, data.file_size_bytes AS data_file_size_bytes, data.footer_size AS data_footer_size, data.row_id_start, data.begin_snapshot, data.partial_max, data.mapping_id, del.path AS del_path, del.path_is_relative AS del_path_is_relative, del.file_size_bytes AS del_file_size_bytes, del.footer_size AS del_footer_size, del.format AS del_format
FROM {METADATA_CATALOG}.ducklake_data_file data

LEFT JOIN (
    SELECT *
    FROM {METADATA_CATALOG}.ducklake_delete_file
    WHERE table_id=%d  AND {SNAPSHOT_ID} >= begin_snapshot
          AND ({SNAPSHOT_ID} < end_snapshot OR end_snapshot IS NULL)
    ) del ON del.data_file_id = data.data_file_id
WHERE data.table_id=%d AND {SNAPSHOT_ID} >= data.begin_snapshot AND ({SNAPSHOT_ID} < data.end_snapshot OR data.end_snapshot IS NULL)
		`, tableID, tableID)
}

// inlinedDataAtSQL: DuckLakeMetadataManager::ReadInlinedData.
func inlinedDataAtSQL(inlinedTable string) string {
	return fmt.Sprintf(`
SELECT id AS col1, payload AS col2
FROM {METADATA_CATALOG}.%s inlined_data
WHERE {SNAPSHOT_ID} >= begin_snapshot AND ({SNAPSHOT_ID} < end_snapshot OR end_snapshot IS NULL)
ORDER BY row_id;`, sqlquote.Ident(inlinedTable))
}

// latestInlinedTableSQL: DuckLakeMetadataManager::LatestInlinedTableQuery,
// which WriteNewInlinedData reads before it writes inlined rows.
func latestInlinedTableSQL(tableID int64) string {
	return fmt.Sprintf("SELECT table_name, schema_version FROM {METADATA_CATALOG}.ducklake_inlined_data_tables "+
		"WHERE table_id = %d AND schema_version = ("+
		"  SELECT MAX(schema_version) FROM {METADATA_CATALOG}.ducklake_inlined_data_tables WHERE table_id = %d);", tableID, tableID)
}

// inlinedTableName: DuckLakeMetadataManager::InlinedTableNameFor.
func inlinedTableName(tableID, schemaVersion int64) string {
	return fmt.Sprintf("ducklake_inlined_data_%d_%d", tableID, schemaVersion)
}

// insertSnapshotSQL: DuckLakeMetadataManager::InsertSnapshotSql, the first
// statement of every commit batch; its primary key decides a race.
const insertSnapshotSQL = `INSERT INTO {METADATA_CATALOG}.ducklake_snapshot VALUES ({SNAPSHOT_ID}, NOW(), {SCHEMA_VERSION}, {NEXT_CATALOG_ID}, {NEXT_FILE_ID});`

// snapshotChangesSQL: DuckLakeMetadataManager::WriteSnapshotChangesSql,
// the last statement of every commit batch.
func snapshotChangesSQL(changes string) string {
	return fmt.Sprintf(`INSERT INTO {METADATA_CATALOG}.ducklake_snapshot_changes VALUES ({SNAPSHOT_ID}, %s, {AUTHOR}, {COMMIT_MESSAGE}, {COMMIT_EXTRA_INFO});`,
		sqlquote.Literal(changes))
}

// column is a column of a harness table.
type column struct {
	ID         int64
	Name, Type string
}

// tableColumns are the columns of every table the harness creates.
var tableColumns = []column{{1, "id", "BIGINT"}, {2, "payload", "VARCHAR"}}

// newTableSQL: DuckLakeMetadataManager::WriteNewTables (the table and its
// columns, ColumnToSQLRecursive) and InsertNewSchema.
func newTableSQL(tableID int64, uuid, name string) string {
	var cols []string
	for _, c := range tableColumns {
		cols = append(cols, fmt.Sprintf("(%d, {SNAPSHOT_ID}, NULL, %d, %d, %s, %s, NULL, 'NULL', true, NULL, 'literal', 'duckdb')",
			c.ID, tableID, c.ID, sqlquote.Literal(c.Name), sqlquote.Literal(c.Type)))
	}
	return fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_table VALUES (%d, '%s', {SNAPSHOT_ID}, NULL, 0, %s, %s, true);",
		tableID, uuid, sqlquote.Literal(name), sqlquote.Literal(name+"/")) +
		"INSERT INTO {METADATA_CATALOG}.ducklake_column VALUES " + strings.Join(cols, ",") + ";"
}

// newInlinedTableSQL: DuckLakeMetadataManager::WriteNewInlinedTables (and
// InlinedTableDdlSql): the inlined-data table of a new table, registered
// and created inside the commit that creates the table.
func newInlinedTableSQL(tableID, schemaVersion int64) string {
	name := inlinedTableName(tableID, schemaVersion)
	return fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_inlined_data_tables VALUES (%d, %s, %d);", tableID, sqlquote.Literal(name), schemaVersion) +
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS {METADATA_CATALOG}.%s(row_id BIGINT, begin_snapshot BIGINT, end_snapshot BIGINT, id BIGINT, payload VARCHAR);", sqlquote.Ident(name))
}

// schemaVersionSQL: DuckLakeMetadataManager::InsertNewSchema.
func schemaVersionSQL(tableID int64) string {
	return fmt.Sprintf(`INSERT INTO {METADATA_CATALOG}.ducklake_schema_versions VALUES ({SNAPSHOT_ID},{SCHEMA_VERSION},%d);`, tableID)
}

// dataFile is a data file's catalog row as the harness writes it.
type dataFile struct {
	ID, TableID      int64
	Begin            string // "{SNAPSHOT_ID}" or an explicit snapshot id
	Path             string // relative to the data path
	Records, Size    int64
	RowIDStart       string // a number or NULL
	PartialMax       string // a number or NULL
	MinID, MaxID     int64
	MinPay, MaxPay   string
	PayloadBytes     int64
	ColumnSizeByteID int64
}

// newDataFileSQL: DuckLakeMetadataManager::WriteNewDataFilesSqlBatch, the
// file row and its column statistics.
func newDataFileSQL(f dataFile) string {
	return fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_data_file VALUES (%d, %d, %s, NULL, NULL, %s, true, 'parquet', %d, %d, NULL, %s, NULL, NULL, NULL, %s);",
		f.ID, f.TableID, f.Begin, sqlquote.Literal(f.Path), f.Records, f.Size, f.RowIDStart, f.PartialMax) +
		fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_file_column_stats VALUES (%d, %d, 1, %d, %d, 0, '%d', '%d', NULL, NULL),(%d, %d, 2, %d, %d, 0, %s, %s, NULL, NULL);",
			f.ID, f.TableID, f.ColumnSizeByteID, f.Records, f.MinID, f.MaxID,
			f.ID, f.TableID, f.PayloadBytes, f.Records, sqlquote.Literal(f.MinPay), sqlquote.Literal(f.MaxPay))
}

// tableStats are a table's global statistics (DuckLakeGlobalStatsInfo).
type tableStats struct {
	Records, NextRowID, Size int64
	Initialized              bool
}

// tableStatsSQL: DuckLakeMetadataManager::UpdateGlobalTableStatsSql: an
// INSERT of the first statistics, an UPDATE per statement after.
func tableStatsSQL(tableID int64, s tableStats) string {
	if !s.Initialized {
		return fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_table_stats VALUES (%d, %d, %d, %d);", tableID, s.Records, s.NextRowID, s.Size) +
			fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_table_column_stats VALUES (%d, 1, false, NULL, NULL, NULL, NULL),(%d, 2, false, NULL, NULL, NULL, NULL);", tableID, tableID)
	}
	out := fmt.Sprintf("UPDATE {METADATA_CATALOG}.ducklake_table_stats SET record_count=%d, file_size_bytes=%d, next_row_id=%d WHERE table_id=%d;",
		s.Records, s.Size, s.NextRowID, tableID)
	for _, c := range tableColumns {
		out += fmt.Sprintf("UPDATE {METADATA_CATALOG}.ducklake_table_column_stats SET contains_null=CAST(false AS BOOLEAN), contains_nan=CAST(NULL AS BOOLEAN), min_value=NULL, max_value=NULL, extra_stats=NULL WHERE table_id=%d AND column_id=%d;",
			tableID, c.ID)
	}
	return out
}

// inlinedInsertSQL: DuckLakeMetadataManager::FormatInlinedDataInsert.
func inlinedInsertSQL(inlinedTable string, rowIDStart int64, ids []int64, payload func(int64) string) string {
	vals := make([]string, len(ids))
	for i, id := range ids {
		vals[i] = fmt.Sprintf("(%d, {SNAPSHOT_ID}, NULL, %d, %s)", rowIDStart+int64(i), id, sqlquote.Literal(payload(id)))
	}
	return fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.%s VALUES %s;", sqlquote.Ident(inlinedTable), strings.Join(vals, ", "))
}

// inlinedDeleteSQL: DuckLakeMetadataManager::WriteNewInlinedDeletes, the
// UPDATE with a VALUES CTE that ends inlined rows.
func inlinedDeleteSQL(inlinedTable string, rowIDs []int64) string {
	list := make([]string, len(rowIDs))
	for i, r := range rowIDs {
		list[i] = fmt.Sprintf("(%d)", r)
	}
	return fmt.Sprintf(`
WITH deleted_row_list(deleted_row_id) AS (
VALUES %s
)
UPDATE {METADATA_CATALOG}.%s
SET end_snapshot = {SNAPSHOT_ID}
FROM deleted_row_list
WHERE row_id=deleted_row_id AND end_snapshot IS NULL AND begin_snapshot != {SNAPSHOT_ID};
`, strings.Join(list, ", "), sqlquote.Ident(inlinedTable))
}

// endDeleteFilesSQL: DuckLakeMetadataManager::DropDeleteFiles (FlushDrop):
// the delete file a new one replaces ends at the commit's snapshot.
func endDeleteFilesSQL(dataFileID int64) string {
	return fmt.Sprintf(`UPDATE {METADATA_CATALOG}.ducklake_delete_file SET end_snapshot = {SNAPSHOT_ID} WHERE end_snapshot IS NULL AND data_file_id IN (%d);`, dataFileID)
}

// newDeleteFileSQL: DuckLakeMetadataManager::WriteNewDeleteFiles.
func newDeleteFileSQL(id, tableID, dataFileID int64, path string, count, size int64) string {
	return fmt.Sprintf("INSERT INTO {METADATA_CATALOG}.ducklake_delete_file VALUES (%d, %d, {SNAPSHOT_ID}, NULL,  %d, %s, true, 'parquet', %d, %d, 0, NULL, NULL);",
		id, tableID, dataFileID, sqlquote.Literal(path), count, size)
}

// mergeAdjacentSQL: DuckLakeMetadataManager::WriteMergeAdjacent: the
// merged files leave the catalog entirely and are scheduled for deletion
// (with NOW()).
func mergeAdjacentSQL(sources []int64, paths []string) string {
	ids := make([]string, len(sources))
	sched := make([]string, len(sources))
	for i, id := range sources {
		ids[i] = strconv.FormatInt(id, 10)
		sched[i] = fmt.Sprintf("(%d, %s, true, NOW())", id, sqlquote.Literal(paths[i]))
	}
	var b strings.Builder
	for _, t := range []string{"ducklake_data_file", "ducklake_file_column_stats", "ducklake_delete_file", "ducklake_file_partition_value", "ducklake_file_variant_stats"} {
		fmt.Fprintf(&b, "\nDELETE FROM {METADATA_CATALOG}.%s\nWHERE data_file_id IN (%s);\n", t, strings.Join(ids, ", "))
	}
	b.WriteString("INSERT INTO {METADATA_CATALOG}.ducklake_files_scheduled_for_deletion VALUES " + strings.Join(sched, ", ") + ";")
	return b.String()
}

// compactionCandidatesSQL is the harness's choice of files to merge, in the
// manner of DuckLakeMetadataManager::GetFilesForCompaction: live files of
// the table that never had a delete file.
func compactionCandidatesSQL(tableID int64) string {
	return fmt.Sprintf(`
SELECT data_file_id, path, begin_snapshot, partial_max, record_count
FROM {METADATA_CATALOG}.ducklake_data_file
WHERE table_id = %d AND end_snapshot IS NULL AND {SNAPSHOT_ID} >= begin_snapshot
  AND data_file_id NOT IN (SELECT data_file_id FROM {METADATA_CATALOG}.ducklake_delete_file)
ORDER BY data_file_id;`, tableID)
}

// allSnapshotsSQL: DuckLakeMetadataManager::GetAllSnapshots with the filter
// ducklake_expire_snapshots builds (never the newest snapshot).
func allSnapshotsSQL(below int64) string {
	return fmt.Sprintf(`
SELECT snapshot_id, snapshot_time, schema_version, next_file_id, changes_made, author, commit_message, commit_extra_info
FROM {METADATA_CATALOG}.ducklake_snapshot
LEFT JOIN {METADATA_CATALOG}.ducklake_snapshot_changes USING (snapshot_id)
WHERE snapshot_id != (SELECT MAX(snapshot_id) FROM {METADATA_CATALOG}.ducklake_snapshot) AND snapshot_id < %d
ORDER BY snapshot_id
`, below)
}

// The statements of DuckLakeMetadataManager::DeleteSnapshots
// (ducklake_expire_snapshots), in the order it sends them.
const (
	expireStatsTablesSQL = "SELECT DISTINCT table_id FROM {METADATA_CATALOG}.ducklake_table_stats;"
	// expireFilesSQL reads which data files no snapshot needs any more,
	// after the snapshots were deleted in the same transaction.
	expireFilesSQL = `
SELECT data_file_id, table_id, path, path_is_relative
FROM {METADATA_CATALOG}.ducklake_data_file
WHERE  (end_snapshot IS NOT NULL AND NOT EXISTS(
    SELECT snapshot_id
    FROM {METADATA_CATALOG}.ducklake_snapshot
    WHERE snapshot_id >= begin_snapshot AND snapshot_id < end_snapshot
));`
	expireDeleteFilesSQL = `
SELECT delete_file_id, table_id, path, path_is_relative
FROM {METADATA_CATALOG}.ducklake_delete_file
WHERE %s (end_snapshot IS NOT NULL AND NOT EXISTS(
    SELECT snapshot_id
    FROM {METADATA_CATALOG}.ducklake_snapshot
    WHERE snapshot_id >= begin_snapshot AND snapshot_id < end_snapshot
));`
	expireOrphansSQL = `
DELETE FROM {METADATA_CATALOG}.%s
WHERE end_snapshot IS NOT NULL AND NOT EXISTS(
    SELECT snapshot_id
    FROM {METADATA_CATALOG}.ducklake_snapshot
    WHERE snapshot_id >= begin_snapshot AND snapshot_id < end_snapshot
);`
)

// deleteWhereInSQL: the DELETE … WHERE <key> IN (…) statements of
// DeleteSnapshots.
func deleteWhereInSQL(table, key string, ids []int64) string {
	return fmt.Sprintf("\nDELETE FROM {METADATA_CATALOG}.%s\nWHERE %s IN (%s);\n", table, key, joinIDs(ids))
}

// scheduleDeletionSQL: the INSERT INTO ducklake_files_scheduled_for_deletion
// of DeleteSnapshots.
func scheduleDeletionSQL(ids []int64, paths []string) string {
	vals := make([]string, len(ids))
	for i := range ids {
		vals[i] = fmt.Sprintf("(%d, %s, true, NOW())", ids[i], sqlquote.Literal(paths[i]))
	}
	return "\nINSERT INTO {METADATA_CATALOG}.ducklake_files_scheduled_for_deletion\nVALUES " + strings.Join(vals, ", ") + ";\n"
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}
