package replication

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/wire"
)

// A snapshot is a magic string followed by frames:
//
//	frame = kind(1) uvarint(len) payload crc32c(kind, len, payload)
//
// kinds: 'H' the applied index; 'Q' a schema name and a DDL statement run
// with that schema current; 'T' a schema and table that the following 'C'
// frames (encoded Q3 DataChunks) are appended to, and 'P' the same for a
// table of a nested schema (DuckDB 2.0), named by its schema's path; 'Z'
// another frame compressed (snapzstd.go), which is how Persist writes
// chunks; 'E' the number of frames before it, so a truncated snapshot is
// detected.
const snapshotMagic = "DUCKRAFT-SNAP\x01"

const (
	frameHeader = 'H'
	frameSQL    = 'Q'
	frameTable  = 'T'
	// framePathTable is frameTable for a table of a nested schema: the
	// number of names in the schema's path, the names, then the table.
	// Builds before nested schemas refuse it as an unknown kind.
	framePathTable = 'P'
	frameChunk     = 'C'
	// frameStaged is one Stage entry of an open staged part: the stage's
	// id, the part, the part's row the entry starts at, then its chunks
	// (encodeStageBody). A node restored from the snapshot keeps them in
	// staged_entries, since its log will not hold them. Builds before
	// staged rows were kept in the log refuse it as an unknown kind.
	frameStaged = 'S'
	frameEnd    = 'E'
)

// maxFrame bounds one frame so a corrupt length cannot allocate wildly.
const maxFrame = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshotCorrupt is wrapped by Restore errors caused by a damaged
// snapshot.
var ErrSnapshotCorrupt = errors.New("replication: corrupt snapshot")

// fsmSnapshot is a read transaction pinned at an applied index.
type fsmSnapshot struct {
	conn  *engine.Conn
	index uint64
	// catalog is catalogQuery's rows, read when the snapshot was pinned.
	catalog [][]string
	log     *slog.Logger
	// observe is the fsm's observeSnapshot; nil tells nobody.
	observe func(time.Duration, int64, error)
	// compress says Persist may compress frames: every server of the
	// configuration reads them.
	compress bool
	// stageLog is the log the staged rows of open parts are read from
	// (fsm.readsStages); unpin, if set, lets the log drop them again.
	stageLog raft.LogStore
	unpin    func()
}

// pinSnapshot opens a connection with the applier's settings (pins) and a
// read transaction on it (pinOn).
func pinSnapshot(db *engine.DB, pins settingPins, log *slog.Logger) (*fsmSnapshot, error) {
	conn, err := snapshotConn(db, pins)
	if err != nil {
		return nil, err
	}
	return pinOn(conn, log)
}

// snapshotConn opens a connection with the applier's settings: the part of
// a pin that need not wait for the applier.
func snapshotConn(db *engine.DB, pins settingPins) (*engine.Conn, error) {
	conn, err := db.Connect()
	if err != nil {
		return nil, fmt.Errorf("snapshot: connect: %w", err)
	}
	if err := pins.apply(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return conn, nil
}

// pinOn opens a read transaction on conn, which it owns from then on.
// DuckDB starts the transaction's view at its first read, so reading the
// applied index both pins the view and says which index it shows.
func pinOn(conn *engine.Conn, log *slog.Logger) (*fsmSnapshot, error) {
	if _, err := conn.Exec(context.Background(), "BEGIN TRANSACTION READ ONLY"); err != nil {
		conn.Close()
		return nil, fmt.Errorf("snapshot: begin: %w", err)
	}
	idx, err := readApplied(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	snap := &fsmSnapshot{conn: conn, index: idx, log: log}
	// The catalog is read now, while the FSM applies nothing (raft calls
	// Snapshot between applies): DuckDB's sequences are not transactional,
	// so read at Persist their values would include what entries after idx
	// drew, and a node restored from the snapshot would draw other values
	// replaying them.
	if snap.catalog, err = snap.rows(catalogQuery); err != nil {
		conn.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}

// Persist implements raft.FSMSnapshot.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	counted := &countingWriter{w: sink}
	w := &frameWriter{w: bufio.NewWriterSize(counted, 1<<20), compress: s.compress}
	err := s.write(w)
	if err == nil {
		err = w.w.Flush()
	}
	if err != nil {
		sink.Cancel()
		err = fmt.Errorf("persist snapshot at %d: %w", s.index, err)
	} else {
		s.log.Info("snapshot persisted", "applied", s.index, "frames", w.frames, "bytes", counted.n, "took", time.Since(start))
		err = sink.Close()
	}
	if s.observe != nil {
		s.observe(time.Since(start), counted.n, err)
	}
	return err
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {
	s.conn.Close()
	if s.unpin != nil {
		s.unpin()
	}
}

// schemaPaths is a WITH clause naming every schema of the database by its
// path (DuckDB 2.0 nests schemas): qpath is the quoted path ("a"."b" for b
// in a), depth its length and top its outermost schema's name. Catalog
// functions name an object's schema by its own name alone, so objects are
// joined to their schema by schema_oid (ofSchema).
const schemaPaths = `WITH RECURSIVE paths(oid, depth, qpath, top) AS (
		SELECT oid, 1, ` + `('"' || replace(schema_name, '"', '""') || '"')` + `, schema_name FROM duckdb_schemas()
			WHERE parent_schema_oid IS NULL AND database_name = current_database()
		UNION ALL SELECT s.oid, p.depth + 1, p.qpath || '.' || ('"' || replace(s.schema_name, '"', '""') || '"'), p.top
			FROM duckdb_schemas() s JOIN paths p ON s.parent_schema_oid = p.oid)
	`

// catalogQuery lists, in restore order, what a snapshot recreates before
// the rows: each row is (schema, DDL), the DDL run with that schema
// current. Objects of the metadata schema are created by the FSM itself.
// Schemas, enum types, sequences, macros, tables and views come in one
// list in creation order (DuckDB's catalog oids come from one counter), so
// what each names existed when it was created: DuckDB binds views, and
// macros whose table functions take a subquery (summary((SELECT … FROM t))),
// at creation, while table DEFAULTs call macros, so no order by kind fits
// every catalog (two orders by kind each left a follower unable to restore:
// found by the divergence hunter). A view's tables cannot be replaced after
// it, since the applier keeps view dependencies (pin.go). Not covered: a
// table replaced after a macro that binds it at creation. A sequence that
// handed out values is recreated at its last value and drawn from once:
// DuckDB's own DDL for it starts a fresh sequence at the next value, whose
// currval() is an error until nextval() is called, so a DEFAULT or write
// calling currval() failed on the restored node alone. Rows are written
// after the catalog; indexes and DuckDB 2.0's triggers (afterQuery) after
// the rows, since appending the rows would fire the triggers.
//
// An object of a top-level schema is created with that schema current, from
// DuckDB's own DDL (which names no schema for a sequence). A nested schema
// cannot be current, so an object of one is created with main current and
// DDL that names its schema's path: DuckDB writes tables, views, indexes and
// triggers qualified, and the query builds the DDL of schemas, types and
// sequences (qualified). duckdb_functions() has no schema_oid, so the
// cluster refuses macros in nested schemas (analyze.Analysis.NestedMacro).
var (
	current = ` database_name = current_database() AND schema_name <> '` + metaSchema + `'`
	// ofSchema joins catalog function o's rows to their schema's path,
	// leaving out the metadata schema; inSchema is the schema to make
	// current for an object's DDL, and qualified what names its schema in
	// DDL the snapshot builds.
	ofSchema     = ` o JOIN paths p ON p.oid = o.schema_oid AND p.top <> '` + metaSchema + `'`
	inSchema     = `CASE WHEN p.depth = 1 THEN o.schema_name ELSE 'main' END`
	qualified    = `CASE WHEN p.depth = 1 THEN '' ELSE p.qpath || '.' END`
	catalogQuery = schemaPaths + `SELECT schema_name, ddl FROM (
		SELECT o.oid, 'main' AS schema_name, 'CREATE SCHEMA ' || p.qpath AS ddl
			FROM duckdb_schemas() o JOIN paths p ON p.oid = o.oid AND p.top <> '` + metaSchema + `' WHERE NOT o.internal
		UNION ALL SELECT o.type_oid, ` + inSchema + `, 'CREATE TYPE ' || ` + qualified + ` || ` + qi("o.type_name") + ` || ' AS ENUM (' ||
			list_aggregate(list_transform(o.labels, lambda l: '''' || replace(l, '''', '''''') || ''''), 'string_agg', ', ') || ')'
			FROM duckdb_types()` + ofSchema + ` WHERE NOT o.internal AND o.logical_type = 'ENUM'
		UNION ALL SELECT o.sequence_oid, ` + inSchema + `, CASE WHEN o.last_value IS NULL AND p.depth = 1 THEN o.sql ELSE
			'CREATE SEQUENCE ' || ` + qualified + ` || ` + qi("o.sequence_name") + ` || ' START WITH ' || coalesce(o.last_value, o.start_value) ||
			' INCREMENT BY ' || o.increment_by || ' MINVALUE ' || o.min_value || ' MAXVALUE ' || o.max_value ||
			CASE WHEN o.cycle THEN ' CYCLE' ELSE ' NO CYCLE' END || ';' || CASE WHEN o.last_value IS NULL THEN '' ELSE
			' SELECT nextval(' || ` + ql("p.qpath || '.' || "+qi("o.sequence_name")) + ` || ')' END END
			FROM duckdb_sequences()` + ofSchema + ` WHERE NOT o.temporary
		UNION ALL SELECT function_oid, schema_name, 'CREATE MACRO ' || ` + qi("function_name") + ` || '(' || array_to_string(parameters, ', ') || ') AS ' ||
			CASE WHEN function_type = 'table_macro' THEN 'TABLE ' ELSE '' END || macro_definition
			FROM duckdb_functions() WHERE NOT internal AND function_type IN ('macro', 'table_macro') AND` + current + `
		UNION ALL SELECT o.table_oid, ` + inSchema + `, o.sql FROM duckdb_tables()` + ofSchema + ` WHERE NOT o.temporary
		UNION ALL SELECT o.view_oid, ` + inSchema + `, o.sql FROM duckdb_views()` + ofSchema + ` WHERE NOT o.internal AND NOT o.temporary
	) ORDER BY oid`
	// tablesQuery lists the tables whose rows a snapshot holds, each with
	// the oid of its schema (schemasQuery gives the schema's path).
	tablesQuery = schemaPaths + `SELECT o.schema_oid::VARCHAR, o.table_name FROM duckdb_tables()` + ofSchema +
		` WHERE NOT o.temporary ORDER BY o.table_oid`
	// schemasQuery lists every schema of the database: its oid, its name
	// and its parent's oid ('' at the top).
	schemasQuery = `SELECT oid::VARCHAR, schema_name, coalesce(parent_schema_oid::VARCHAR, '') FROM duckdb_schemas()
		WHERE database_name = current_database()`
	// afterQuery lists the DDL run after the rows, as catalogQuery does.
	afterQuery = schemaPaths + `SELECT schema_name, ddl FROM (
		SELECT o.index_oid AS oid, ` + inSchema + ` AS schema_name, o.sql AS ddl FROM duckdb_indexes()` + ofSchema + ` WHERE o.sql IS NOT NULL
		UNION ALL SELECT o.trigger_oid, ` + inSchema + `, o.sql FROM duckdb_triggers()` + ofSchema + ` WHERE NOT o.temporary
	) ORDER BY oid`
)

func (s *fsmSnapshot) write(w *frameWriter) error {
	if _, err := io.WriteString(w.w, snapshotMagic); err != nil {
		return err
	}
	if err := w.frame(frameHeader, binary.AppendUvarint(nil, s.index)); err != nil {
		return err
	}
	if err := writeDDL(w, s.catalog); err != nil {
		return err
	}
	paths, err := s.schemaPaths()
	if err != nil {
		return err
	}
	tables, err := s.rows(tablesQuery)
	if err != nil {
		return err
	}
	for _, t := range tables {
		path := paths[t[0]]
		if path == nil {
			return fmt.Errorf("table %s: schema oid %s is not in the catalog", t[1], t[0])
		}
		if err := s.writeTable(w, path, t[1]); err != nil {
			return err
		}
	}
	if err := s.writeTable(w, []string{metaSchema}, "keys"); err != nil {
		return err
	}
	if err := s.writeStages(w); err != nil {
		return err
	}
	after, err := s.rows(afterQuery)
	if err != nil {
		return err
	}
	if err := writeDDL(w, after); err != nil {
		return err
	}
	return w.frame(frameEnd, binary.AppendUvarint(nil, uint64(w.frames)))
}

// stageTablesQuery lists the staging tables of open transactions (stageapply.go)
// with their DDL.
const stageTablesQuery = `SELECT table_name, sql FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = '` +
	metaSchema + `' AND starts_with(table_name, 'stage_') ORDER BY table_oid`

// writeStages writes the rows staged by transactions not yet committed, and
// the list of stages: a node restored from the snapshot must be able to
// commit them as every other node does. The rows of a part staged into a
// table by an older build go as that table; the others as one frame per
// Stage entry, read from the log or from staged_entries' bodies.
func (s *fsmSnapshot) writeStages(w *frameWriter) error {
	tables, err := s.rows(stageTablesQuery)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if err := w.frame(frameSQL, appendLenBytes(appendLenBytes(nil, []byte(metaSchema)), []byte(t[1]))); err != nil {
			return err
		}
		if err := s.writeTable(w, []string{metaSchema}, t[0]); err != nil {
			return err
		}
	}
	ctx := context.Background()
	parts, err := s.rows("SELECT DISTINCT id::VARCHAR, part::VARCHAR FROM " + metaSchema + ".staged_entries ORDER BY 1, 2")
	if err != nil {
		return err
	}
	for _, p := range parts {
		id, err1 := strconv.ParseUint(p[0], 10, 64)
		part, err2 := strconv.ParseUint(p[1], 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("staged entries: %w", err)
		}
		entries, err := stagedEntries(ctx, s.conn, id, uint32(part))
		if err != nil {
			return err
		}
		for _, e := range entries {
			chunks, err := stageBody(ctx, s.conn, s.stageLog, id, uint32(part), e)
			if err != nil {
				return err
			}
			b := binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil, id), part), e.first)
			if err := w.compressedFrame(frameStaged, append(b, encodeStageBody(chunks)...)); err != nil {
				return err
			}
		}
	}
	return s.writeTable(w, []string{metaSchema}, "stages")
}

// schemaPaths maps each schema's oid to its path, outermost first.
func (s *fsmSnapshot) schemaPaths() (map[string][]string, error) {
	rows, err := s.rows(schemasQuery)
	if err != nil {
		return nil, err
	}
	name, parent := map[string]string{}, map[string]string{}
	for _, r := range rows {
		name[r[0]], parent[r[0]] = r[1], r[2]
	}
	paths := make(map[string][]string, len(rows))
	for oid := range name {
		var path []string
		// A parent chain is at most as long as the list of schemas.
		for o := oid; o != "" && len(path) <= len(rows); o = parent[o] {
			path = append(path, name[o])
		}
		slices.Reverse(path)
		paths[oid] = path
	}
	return paths, nil
}

// writeDDL writes one SQL frame per (schema, DDL) row.
func writeDDL(w *frameWriter, rows [][]string) error {
	for _, r := range rows {
		if err := w.frame(frameSQL, appendLenBytes(appendLenBytes(nil, []byte(r[0])), []byte(r[1]))); err != nil {
			return err
		}
	}
	return nil
}

// rows runs a catalog query whose columns are all VARCHAR.
func (s *fsmSnapshot) rows(query string) ([][]string, error) {
	res, err := s.conn.Query(context.Background(), query)
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	defer res.Close()
	var out [][]string
	for {
		c, err := res.Next()
		if err != nil {
			return nil, fmt.Errorf("read catalog: %w", err)
		}
		if c == nil {
			return out, nil
		}
		for i := range c.Rows {
			row := make([]string, len(c.Columns))
			for j, v := range c.Columns {
				val, err := v.Value(i)
				if err != nil {
					return nil, fmt.Errorf("read catalog: %w", err)
				}
				row[j], _ = val.(string)
			}
			out = append(out, row)
		}
	}
}

// writeTable writes the rows of table in the schema at path: a table
// frame, a path-table frame for a nested schema, then the chunks.
func (s *fsmSnapshot) writeTable(w *frameWriter, path []string, table string) error {
	var err error
	if len(path) == 1 {
		err = w.frame(frameTable, appendLenBytes(appendLenBytes(nil, []byte(path[0])), []byte(table)))
	} else {
		b := binary.AppendUvarint(nil, uint64(len(path)))
		for _, p := range path {
			b = appendLenBytes(b, []byte(p))
		}
		err = w.frame(framePathTable, appendLenBytes(b, []byte(table)))
	}
	if err != nil {
		return err
	}
	// Qualified by the catalog: DuckDB 2.0 binds no shorter name of every
	// nested schema's table.
	name := sqlquote.Path(append(append([]string{s.conn.Catalog()}, path...), table))
	cols, err := storedColumns(s.conn, name)
	if err != nil {
		return err
	}
	res, err := s.conn.Query(context.Background(), "SELECT "+cols+" FROM "+name)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	defer res.Close()
	var buf []byte
	for {
		c, err := res.Next()
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if c == nil {
			return nil
		}
		if buf, err = wire.AppendDataChunk(buf[:0], c, wire.Q3); err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		if err := w.compressedFrame(frameChunk, buf); err != nil {
			return err
		}
	}
}

// storedColumns is the select list of the columns a table stores: "*"
// unless it has generated columns, which DuckDB computes on read and which a
// restore cannot append (the table's DDL recreates them). The catalog
// functions do not tell generated columns from defaults; the bound plan of
// an INSERT does, as each column's category. The insert is the plan's top
// operator, or below the CTE DuckDB 2.0 wraps it in for a table's triggers.
func storedColumns(conn *engine.Conn, name string) (string, error) {
	insert := "INSERT INTO " + name + " DEFAULT VALUES"
	plans, err := conn.QueryStrings(context.Background(), "SELECT json_serialize_plan("+sqlquote.Literal(insert)+")::VARCHAR")
	if err != nil || len(plans) != 1 {
		return "", fmt.Errorf("columns of %s: %v", name, err)
	}
	type operator struct {
		Type      string     `json:"type"`
		Children  []operator `json:"children"`
		TableInfo *struct {
			Columns struct {
				Columns []struct {
					Name     string `json:"name"`
					Category string `json:"category"`
				} `json:"columns"`
			} `json:"columns"`
		} `json:"table_info"`
	}
	var plan struct {
		Error   bool       `json:"error"`
		Message string     `json:"error_message"`
		Plans   []operator `json:"plans"`
	}
	if err := json.Unmarshal([]byte(plans[0]), &plan); err != nil {
		return "", fmt.Errorf("columns of %s: %w", name, err)
	}
	if plan.Error || len(plan.Plans) != 1 {
		return "", fmt.Errorf("columns of %s: %s", name, plan.Message)
	}
	op := &plan.Plans[0]
	for op.Type != "LOGICAL_INSERT" && len(op.Children) > 0 {
		op = &op.Children[0]
	}
	if op.Type != "LOGICAL_INSERT" || op.TableInfo == nil {
		return "", fmt.Errorf("columns of %s: no insert in the plan of %s", name, insert)
	}
	var stored []string
	generated := false
	for _, c := range op.TableInfo.Columns.Columns {
		if c.Category == "GENERATED" {
			generated = true
			continue
		}
		stored = append(stored, sqlquote.Ident(c.Name))
	}
	if !generated {
		return "*", nil
	}
	return strings.Join(stored, ", "), nil
}

// qi is the SQL expression that quotes the identifier in column col.
func qi(col string) string { return `('"' || replace(` + col + `, '"', '""') || '"')` }

// ql is the SQL that quotes the string expression expr as a literal.
func ql(expr string) string { return `('''' || replace(` + expr + `, '''', '''''') || '''')` }

type frameWriter struct {
	w      *bufio.Writer
	frames int
	hdr    []byte
	// compress makes compressedFrame compress; zbuf is its buffer.
	compress bool
	zbuf     []byte
}

func (w *frameWriter) frame(kind byte, payload []byte) error {
	w.hdr = binary.AppendUvarint(append(w.hdr[:0], kind), uint64(len(payload)))
	crc := crc32.Update(crc32.Checksum(w.hdr, castagnoli), castagnoli, payload)
	w.hdr = binary.LittleEndian.AppendUint32(w.hdr, crc)
	if _, err := w.w.Write(w.hdr[:len(w.hdr)-4]); err != nil {
		return err
	}
	if _, err := w.w.Write(payload); err != nil {
		return err
	}
	if _, err := w.w.Write(w.hdr[len(w.hdr)-4:]); err != nil {
		return err
	}
	w.frames++
	return nil
}

type frameReader struct {
	r      *bufio.Reader
	frames int
	buf    []byte
	// raw holds a compressed frame's payload, decompressed.
	raw []byte
	// max bounds a frame's payload, compressed or not; 0 is maxFrame.
	max int
}

func (r *frameReader) limit() int {
	if r.max > 0 {
		return r.max
	}
	return maxFrame
}

// next returns the next frame, decompressed; its payload is valid until
// the next call.
func (r *frameReader) next() (byte, []byte, error) {
	kind, payload, err := r.nextRaw()
	if err != nil || kind != frameZstd {
		return kind, payload, err
	}
	kind, payload, err = r.decompress(payload)
	if err != nil {
		return 0, nil, err
	}
	return kind, payload, nil
}

// nextRaw returns the next frame as written.
func (r *frameReader) nextRaw() (byte, []byte, error) {
	kind, err := r.r.ReadByte()
	if err != nil {
		return 0, nil, fmt.Errorf("%w: frame %d: %w", ErrSnapshotCorrupt, r.frames, noEOF(err))
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: frame %d length: %w", ErrSnapshotCorrupt, r.frames, noEOF(err))
	}
	if n > uint64(r.limit()) {
		return 0, nil, fmt.Errorf("%w: frame %d of %d bytes", ErrSnapshotCorrupt, r.frames, n)
	}
	if uint64(cap(r.buf)) < n+4 {
		r.buf = make([]byte, n+4)
	}
	r.buf = r.buf[:n+4]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		return 0, nil, fmt.Errorf("%w: frame %d: %w", ErrSnapshotCorrupt, r.frames, noEOF(err))
	}
	hdr := binary.AppendUvarint([]byte{kind}, n)
	payload := r.buf[:n]
	want := binary.LittleEndian.Uint32(r.buf[n:])
	if got := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, payload); got != want {
		return 0, nil, fmt.Errorf("%w: frame %d checksum %08x, want %08x", ErrSnapshotCorrupt, r.frames, got, want)
	}
	r.frames++
	return kind, payload, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// dropQueries list what Restore drops before loading a snapshot: every
// user-visible object of the current database and the rows of the metadata
// tables.
var dropQueries = []string{
	schemaPaths + `SELECT 'DROP VIEW IF EXISTS ' || p.qpath || '.' || ` + qi("o.view_name") + ` || ' CASCADE'
		FROM duckdb_views()` + ofSchema + ` WHERE NOT o.internal AND NOT o.temporary ORDER BY o.view_oid DESC`,
	schemaPaths + `SELECT 'DROP TABLE IF EXISTS ' || p.qpath || '.' || ` + qi("o.table_name") + ` || ' CASCADE'
		FROM duckdb_tables()` + ofSchema + ` WHERE NOT o.temporary ORDER BY o.table_oid DESC`,
	`SELECT 'DROP MACRO ' || CASE WHEN function_type = 'table_macro' THEN 'TABLE ' ELSE '' END ||
		'IF EXISTS ' || ` + qi("schema_name") + ` || '.' || ` + qi("function_name") + ` || ' CASCADE'
		FROM duckdb_functions() WHERE NOT internal AND function_type IN ('macro', 'table_macro') AND` + current,
	schemaPaths + `SELECT 'DROP SEQUENCE IF EXISTS ' || p.qpath || '.' || ` + qi("o.sequence_name") + ` || ' CASCADE'
		FROM duckdb_sequences()` + ofSchema + ` WHERE NOT o.temporary`,
	schemaPaths + `SELECT 'DROP TYPE IF EXISTS ' || p.qpath || '.' || ` + qi("o.type_name") + ` || ' CASCADE'
		FROM duckdb_types()` + ofSchema + ` WHERE NOT o.internal`,
	schemaPaths + `SELECT 'DROP SCHEMA IF EXISTS ' || p.qpath || ' CASCADE'
		FROM duckdb_schemas() o JOIN paths p ON p.oid = o.oid AND p.top <> '` + metaSchema + `' WHERE NOT o.internal
		ORDER BY p.depth DESC`,
	`SELECT 'DELETE FROM ` + metaSchema + `.keys'`,
	`SELECT 'DROP TABLE ` + metaSchema + `.' || table_name FROM (` + stageTablesQuery + `)`,
	`SELECT 'DELETE FROM ` + metaSchema + `.stages'`,
	`SELECT 'DELETE FROM ` + metaSchema + `.staged_entries'`,
}

// restoreSnapshot replaces the database with the snapshot read from r, in
// conn's open transaction, and returns the snapshot's applied index.
func restoreSnapshot(conn *engine.Conn, r io.Reader) (uint64, error) {
	ctx := context.Background()
	br := bufio.NewReaderSize(r, 1<<20)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return 0, fmt.Errorf("%w: bad magic %q", ErrSnapshotCorrupt, magic)
	}
	for _, q := range dropQueries {
		snap := fsmSnapshot{conn: conn}
		stmts, err := snap.rows(q)
		if err != nil {
			return 0, err
		}
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s[0]); err != nil {
				return 0, fmt.Errorf("clear database: %s: %w", s[0], err)
			}
		}
	}
	// DDL runs with the object's schema current, because DuckDB writes
	// sequence and view DDL without their schema.
	defer conn.Exec(ctx, "RESET schema")
	fr := &frameReader{r: br}
	var (
		index      uint64
		seenHeader bool
		schema     []string
		table      string
	)
	for {
		kind, payload, err := fr.next()
		if err != nil {
			return 0, err
		}
		rd := byteReader{b: payload}
		switch kind {
		case frameHeader:
			index, seenHeader = rd.uvarint(), true
		case frameSQL:
			s, sql := string(rd.bytes()), string(rd.bytes())
			if rd.err != nil {
				break
			}
			if _, err := conn.Exec(ctx, "SET schema = "+sqlquote.Literal(sqlquote.Ident(s))); err != nil {
				return 0, fmt.Errorf("restore: set schema %s: %w", s, err)
			}
			if _, err := conn.Exec(ctx, sql); err != nil {
				return 0, fmt.Errorf("restore: %s: %w", sql, err)
			}
		case frameTable:
			schema, table = []string{string(rd.bytes())}, string(rd.bytes())
		case framePathTable:
			n := rd.uvarint()
			if n < 2 || n > uint64(len(payload)) {
				return 0, fmt.Errorf("%w: a nested table's schema path of %d names", ErrSnapshotCorrupt, n)
			}
			schema = make([]string, n)
			for i := range schema {
				schema[i] = string(rd.bytes())
			}
			table = string(rd.bytes())
		case frameChunk:
			if table == "" {
				return 0, fmt.Errorf("%w: rows before any table", ErrSnapshotCorrupt)
			}
			c, err := wire.DecodeDataChunk(wire.NewReader(payload), wire.Limits{})
			if err != nil {
				return 0, fmt.Errorf("%w: %s.%s: %w", ErrSnapshotCorrupt, strings.Join(schema, "."), table, err)
			}
			if err := conn.AppendPath(schema, table, c); err != nil {
				return 0, fmt.Errorf("restore: %w", err)
			}
		case frameStaged:
			id, part, first := rd.uvarint(), rd.uvarint(), rd.uvarint()
			if rd.err != nil {
				break
			}
			if part > math.MaxUint32 {
				return 0, fmt.Errorf("%w: staged rows of part %d", ErrSnapshotCorrupt, part)
			}
			if _, err := decodeStageBody(rd.b); err != nil {
				return 0, err
			}
			if _, err := conn.Exec(ctx, "INSERT INTO "+metaSchema+".staged_entries VALUES (?, ?, ?, NULL, ?)", id, uint32(part), first, rd.b); err != nil {
				return 0, fmt.Errorf("restore: staged rows: %w", err)
			}
		case frameEnd:
			if n := rd.uvarint(); rd.err == nil && n != uint64(fr.frames-1) {
				return 0, fmt.Errorf("%w: end says %d frames, read %d", ErrSnapshotCorrupt, n, fr.frames-1)
			}
			if !seenHeader {
				return 0, fmt.Errorf("%w: no header", ErrSnapshotCorrupt)
			}
			if _, err := conn.Exec(ctx, "UPDATE "+metaSchema+".applied SET idx = ? WHERE id = 1", index); err != nil {
				return 0, fmt.Errorf("restore: store applied index: %w", err)
			}
			return index, nil
		default:
			return 0, fmt.Errorf("%w: unknown frame kind %q", ErrSnapshotCorrupt, kind)
		}
		if rd.err != nil {
			return 0, fmt.Errorf("%w: frame %d: %w", ErrSnapshotCorrupt, fr.frames-1, rd.err)
		}
	}
}

func appendLenBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// byteReader reads uvarints and length-prefixed byte strings; the first
// error sticks.
type byteReader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (r *byteReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *byteReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
