package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/wire"
)

// Append appends all rows of chunk to schema.table ("" means main) through a
// DuckDB appender. The chunk needs one column per table column. Columns whose
// type equals the table's are copied as they are; for the others
// duckdb_append_data_chunk casts where DuckDB allows it implicitly (INTEGER
// to BIGINT or VARCHAR, say), and otherwise the error names the column and
// both types: "append to main.t: column 2 is INTEGER, chunk has VARCHAR:
// ...". There is no SQL cast fallback. Outside an explicit transaction the
// append runs in its own transaction, so it is all or nothing.
func (c *Conn) Append(schema, table string, chunk *wire.DataChunk) error {
	if schema == "" {
		schema = "main"
	}
	return c.AppendPath([]string{schema}, table, chunk)
}

// Catalog is the catalog name of the connection's database (DB.Catalog).
func (c *Conn) Catalog() string { return c.db.catalog }

// AppendPath is Append to a table of the schema at path: one name, or the
// names of a nested schema (DuckDB 2.0) outermost first. DuckDB's table
// appender finds a table by one schema name only, so a nested schema's
// table is appended through a query appender, INSERT INTO the table
// SELECT * FROM the appended rows, which casts as INSERT does.
func (c *Conn) AppendPath(path []string, table string, chunk *wire.DataChunk) error {
	return c.AppendChunks(path, table, []*wire.DataChunk{chunk})
}

// AppendChunks is AppendPath of several chunks, all of the first one's
// column types, through one appender: creating and flushing an appender
// per chunk cost a staged log entry of thirteen chunks a fifth of its
// apply time.
func (c *Conn) AppendChunks(path []string, table string, chunks []*wire.DataChunk) error {
	name := qualifiedName(path, table)
	if len(path) == 0 {
		return fmt.Errorf("append to %s: no schema", name)
	}
	q, err := c.begin(context.Background())
	if err != nil {
		return fmt.Errorf("append to %s: %w", name, err)
	}
	defer c.end(q)
	if err := c.appendTx(q, path, table, nil, chunks); err != nil {
		return fmt.Errorf("append to %s: %w", name, err)
	}
	return nil
}

// InsertChunks runs INSERT INTO the table at path SELECT * FROM the rows of
// chunks, the rows typed as: each chunk is cast to those types first, as an
// appender casts (the error names the column), then the INSERT casts by
// position into the table's columns, as INSERT … SELECT from a table of
// those types does. That is what replication's staged rows need: the rows of
// a staged part enter their table as if they had first been appended to a
// staging table of the part's types, without being written there.
func (c *Conn) InsertChunks(path []string, table string, as []wire.LogicalType, chunks []*wire.DataChunk) error {
	name := qualifiedName(path, table)
	if len(path) == 0 || len(as) == 0 {
		return fmt.Errorf("insert into %s: no schema or no column types", name)
	}
	q, err := c.begin(context.Background())
	if err != nil {
		return fmt.Errorf("insert into %s: %w", name, err)
	}
	defer c.end(q)
	if err := c.appendTx(q, path, table, as, chunks); err != nil {
		return fmt.Errorf("insert into %s: %w", name, err)
	}
	return nil
}

// qualifiedName is path and table as one dotted name, for messages.
func qualifiedName(path []string, table string) string {
	return strings.Join(append(path[:len(path):len(path)], table), ".")
}

// appendTx wraps append in a transaction unless one is open.
func (c *Conn) appendTx(q *query, path []string, table string, as []wire.LogicalType, chunks []*wire.DataChunk) error {
	if c.inTx {
		return c.append(q, path, table, as, chunks)
	}
	if err := c.run("BEGIN TRANSACTION"); err != nil {
		return err
	}
	if err := c.append(q, path, table, as, chunks); err != nil {
		if rerr := c.run("ROLLBACK"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return c.run("COMMIT")
}

// run executes a statement that returns nothing of interest.
func (c *Conn) run(sql string) error {
	var res bindings.Result
	defer bindings.DestroyResult(&res)
	if bindings.Query(c.conn, sql, &res) == bindings.StateError {
		return newError(bindings.ResultError(&res), bindings.ResultErrorType(&res))
	}
	return nil
}

// append appends chunks to the table at path. With as, the rows go through
// a query appender whose rows have those types (InsertChunks); without, a
// table appender for a table of a plain schema, and a query appender of the
// chunks' own types for a nested schema's.
func (c *Conn) append(q *query, path []string, table string, as []wire.LogicalType, chunks []*wire.DataChunk) error {
	if len(chunks) == 0 || slices.Contains(chunks, nil) {
		return errors.New("nil chunk")
	}
	chunk := chunks[0]
	for i, ch := range chunks[1:] {
		if len(ch.Columns) != len(chunk.Columns) {
			return fmt.Errorf("chunk %d has %d columns, the first %d", i+2, len(ch.Columns), len(chunk.Columns))
		}
		for j, col := range ch.Columns {
			if col == nil || !sameType(&col.Type, &chunk.Columns[j].Type) {
				return fmt.Errorf("chunk %d: column %d differs from the first chunk's", i+2, j+1)
			}
		}
	}
	// The DuckDB chunk has the wire types; where they differ from the
	// table's, the appender casts.
	types := make([]bindings.LogicalType, 0, len(chunk.Columns))
	defer func() {
		for i := range types {
			bindings.DestroyLogicalType(&types[i])
		}
	}()
	for i, col := range chunk.Columns {
		if col == nil {
			return fmt.Errorf("column %d is missing", i+1)
		}
		if col.Count < chunk.Rows {
			return fmt.Errorf("column %d has %d rows, chunk has %d", i+1, col.Count, chunk.Rows)
		}
		lt, err := cType(c.conn, col.Type)
		if err != nil {
			return fmt.Errorf("column %d: %w", i+1, err)
		}
		types = append(types, lt)
	}
	ncols := len(types)

	var app bindings.Appender
	defer bindings.AppenderDestroy(&app)
	var mismatch []string
	if len(path) > 1 || as != nil {
		rowTypes := types
		if as != nil {
			if len(as) != ncols {
				return fmt.Errorf("the rows have %d columns, the chunk %d", len(as), ncols)
			}
			rowTypes = make([]bindings.LogicalType, 0, ncols)
			defer func() {
				for i := range rowTypes {
					bindings.DestroyLogicalType(&rowTypes[i])
				}
			}()
			for i, t := range as {
				lt, err := cType(c.conn, t)
				if err != nil {
					return fmt.Errorf("column %d: %w", i+1, err)
				}
				rowTypes = append(rowTypes, lt)
			}
		}
		// Qualified by the catalog, the only form DuckDB 2.0 binds for every
		// nested schema (main.child.t fails as main.child's).
		insert := "INSERT INTO " + sqlquote.Path(append(append([]string{c.db.catalog}, path...), table)) + " SELECT * FROM appended_data"
		if bindings.AppenderCreateQuery(c.conn, insert, rowTypes, "appended_data", nil, &app) == bindings.StateError {
			return appenderError(app)
		}
	} else {
		if bindings.AppenderCreateExt(c.conn, "", path[0], table, &app) == bindings.StateError {
			return appenderError(app)
		}
		if n := int(bindings.AppenderColumnCount(app)); ncols != n {
			return fmt.Errorf("table has %d columns, chunk has %d", n, ncols)
		}
		for i, col := range chunk.Columns {
			tableType, err := ownedWireType(bindings.AppenderColumnType(app, bindings.IdxT(i)))
			if err != nil {
				return fmt.Errorf("column %d: %w", i+1, err)
			}
			if !sameType(&tableType, &col.Type) {
				mismatch = append(mismatch, fmt.Sprintf("column %d is %s, chunk has %s", i+1, typeName(tableType), typeName(col.Type)))
			}
		}
	}

	dc := bindings.CreateDataChunk(types)
	defer bindings.DestroyDataChunk(&dc)
	if dc.Ptr == nil || int(bindings.DataChunkGetColumnCount(dc)) != ncols {
		return errors.New("DuckDB cannot create a data chunk of these types")
	}
	batch := int(bindings.VectorSize())
	for _, chunk := range chunks {
		for i, col := range chunk.Columns {
			if col.Count < chunk.Rows {
				return fmt.Errorf("column %d has %d rows, chunk has %d", i+1, col.Count, chunk.Rows)
			}
		}
		for start := 0; start < chunk.Rows; start += batch {
			if c.interrupted(q) {
				return errInterrupted()
			}
			n := min(batch, chunk.Rows-start)
			bindings.DataChunkReset(dc)
			for i, col := range chunk.Columns {
				if err := copyVector(bindings.DataChunkGetVector(dc, bindings.IdxT(i)), col, start, n, 0); err != nil {
					return fmt.Errorf("column %d: %w", i+1, err)
				}
			}
			bindings.DataChunkSetSize(dc, bindings.IdxT(n))
			if bindings.AppendDataChunk(app, dc) == bindings.StateError {
				return withMismatch(mismatch, appenderError(app))
			}
		}
	}
	if bindings.AppenderClose(app) == bindings.StateError {
		return withMismatch(mismatch, appenderError(app))
	}
	return nil
}

func withMismatch(mismatch []string, err error) error {
	if len(mismatch) == 0 {
		return err
	}
	return fmt.Errorf("%s: %w", mismatch[0], err)
}

func appenderError(app bindings.Appender) error {
	ed := bindings.AppenderErrorData(app)
	defer bindings.DestroyErrorData(&ed)
	return newError(bindings.ErrorDataMessage(ed), bindings.ErrorDataErrorType(ed))
}

// copyVector copies rows [from, from+n) of src into dst at rows [at, at+n).
// Every offset and length in src is checked, since chunks come from clients.
func copyVector(dst bindings.Vector, src *wire.Vector, from, n, at int) error {
	if from+n > src.Count {
		return fmt.Errorf("rows %d..%d beyond the vector's %d rows", from, from+n, src.Count)
	}
	l, width, err := physical(&src.Type)
	if err != nil {
		return err
	}
	if err := copyValidity(dst, src, from, n, at); err != nil {
		return err
	}
	switch l {
	case layoutFixed:
		if len(src.Data) < (from+n)*width {
			return fmt.Errorf("%d data bytes for %d rows of %d bytes", len(src.Data), src.Count, width)
		}
		data := src.Data[from*width : (from+n)*width]
		if err := checkFixed(src, data, from, width); err != nil {
			return err
		}
		out, err := vectorData(dst, (at+n)*width)
		if err != nil {
			return err
		}
		copy(out[at*width:], data)
		return nil
	case layoutString:
		return copyStrings(dst, src, from, n, at)
	case layoutList:
		return copyList(dst, src, from, n, at)
	case layoutStruct:
		if src.Type.ID == wire.TypeVariant {
			if err := checkVariant(src, from, n); err != nil {
				return err
			}
		}
		if src.Type.ID == wire.TypeUnion {
			if err := checkUnionTags(src, from, n); err != nil {
				return err
			}
		}
		if len(src.Children) != len(src.Type.Fields) {
			return fmt.Errorf("%d children for %d fields", len(src.Children), len(src.Type.Fields))
		}
		for i, child := range src.Children {
			if child == nil {
				return fmt.Errorf("field %d is missing", i+1)
			}
			if err := copyVector(bindings.StructVectorGetChild(dst, bindings.IdxT(i)), child, from, n, at); err != nil {
				return fmt.Errorf("field %q: %w", src.Type.Fields[i].Name, err)
			}
		}
		return nil
	case layoutArray:
		size := int(src.Type.ArraySize)
		if len(src.Children) != 1 || src.Children[0] == nil {
			return errors.New("ARRAY without its child vector")
		}
		return copyVector(bindings.ArrayVectorGetChild(dst), src.Children[0], from*size, n*size, at*size)
	}
	return fmt.Errorf("unsupported type %s", typeName(src.Type))
}

// checkFixed rejects BOOLEAN values other than 0 and 1 and ENUM indexes
// beyond the dictionary, which DuckDB would read out of bounds, and time
// values outside their range (checkTime). data holds the rows from on.
func checkFixed(src *wire.Vector, data []byte, from, width int) error {
	var limit uint64
	switch src.Type.ID {
	case wire.TypeBoolean:
		limit = 2
	case wire.TypeEnum:
		limit = uint64(len(src.Type.EnumValues))
	case wire.TypeTime, wire.TypeTimeNS, wire.TypeTimeTZ, wire.TypeTimestampS, wire.TypeTimestampMS:
		for i := range len(data) / width {
			if !src.IsValid(from + i) {
				continue
			}
			if err := checkTime(src.Type.ID, binary.LittleEndian.Uint64(data[8*i:])); err != nil {
				return fmt.Errorf("row %d: %w", from+i, err)
			}
		}
		return nil
	default:
		return nil
	}
	for i := range len(data) / width {
		if !src.IsValid(from + i) {
			continue
		}
		var v uint64
		switch width {
		case 1:
			v = uint64(data[i])
		case 2:
			v = uint64(binary.LittleEndian.Uint16(data[2*i:]))
		default:
			v = uint64(binary.LittleEndian.Uint32(data[4*i:]))
		}
		if v >= limit {
			return fmt.Errorf("row %d: invalid %s value %d", from+i, typeName(src.Type), v)
		}
	}
	return nil
}

// Time limits of DuckDB's dtime_t, dtime_ns_t and dtime_tz_t: a time of
// day from 00:00:00 to 24:00:00, and a TIME WITH TIME ZONE's offset
// (stored as MAX_OFFSET - offset in its low 24 bits) within ±15:59:59.
const (
	microsPerDay    = 86400 * 1000000
	timeTZMaxOffset = 16*60*60 - 1
)

// checkTime rejects a TIME, TIME_NS, TIMETZ, TIMESTAMP_S or TIMESTAMP_MS
// value outside its range: DuckDB formats and converts them without a check
// that may fail, and an out-of-range one invalidates the whole database
// when it is printed.
func checkTime(id wire.TypeID, bits uint64) error {
	switch id {
	case wire.TypeTime:
		if int64(bits) < 0 || int64(bits) > microsPerDay {
			return fmt.Errorf("TIME value %d µs outside a day", int64(bits))
		}
	case wire.TypeTimeNS:
		if int64(bits) < 0 || int64(bits) > microsPerDay*1000 {
			return fmt.Errorf("TIME_NS value %d ns outside a day", int64(bits))
		}
	case wire.TypeTimestampS, wire.TypeTimestampMS:
		// DuckDB converts these to microseconds without a check that may
		// fail; ±infinity (±(2^63-1)) are kept as they are.
		scale := int64(1000000)
		if id == wire.TypeTimestampMS {
			scale = 1000
		}
		if v := int64(bits); v != math.MaxInt64 && v != -math.MaxInt64 && (v > math.MaxInt64/scale || v < -math.MaxInt64/scale) {
			return fmt.Errorf("%s value %d beyond the microseconds of a TIMESTAMP", typeNames[id], v)
		}
	case wire.TypeTimeTZ:
		if micros := bits >> 24; micros > microsPerDay {
			return fmt.Errorf("TIMETZ time %d µs outside a day", micros)
		}
		if bits&(1<<24-1) > 2*timeTZMaxOffset {
			return errors.New("TIMETZ offset beyond ±15:59:59")
		}
	}
	return nil
}

// checkUnionTags rejects a UNION row whose tag names no member: DuckDB
// reads the member vector the tag names without a bounds check that may
// fail ("Attempted to access index 7 within vector of size 2", an internal
// error that invalidates the database).
func checkUnionTags(src *wire.Vector, from, n int) error {
	if len(src.Children) == 0 || src.Children[0] == nil || len(src.Children[0].Data) < from+n {
		return errors.New("UNION without its tags")
	}
	members := len(src.Type.Fields) - 1
	for i := from; i < from+n; i++ {
		valid, err := validAt(src, i)
		if err != nil {
			return err
		}
		if valid && int(src.Children[0].Data[i]) >= members {
			return fmt.Errorf("row %d: UNION tag %d beyond its %d members", i, src.Children[0].Data[i], members)
		}
	}
	return nil
}

// vectorData returns the first size bytes of dst's data.
func vectorData(dst bindings.Vector, size int) ([]byte, error) {
	p := bindings.VectorGetData(dst)
	if p == nil {
		return nil, errors.New("DuckDB vector has no data buffer")
	}
	return unsafe.Slice((*byte)(p), size), nil
}

// copyValidity sets the validity bits of dst directly: DuckDB's mask is an
// array of uint64 words with bit i set when row i is valid.
func copyValidity(dst bindings.Vector, src *wire.Vector, from, n, at int) error {
	if src.Validity == nil {
		// A reused child vector may still carry NULLs of an earlier batch.
		if p := bindings.VectorGetValidity(dst); p != nil {
			mask := unsafe.Slice((*uint64)(p), (at+n+63)/64)
			for i := at; i < at+n; i++ {
				mask[i>>6] |= 1 << (uint(i) & 63)
			}
		}
		return nil
	}
	if len(src.Validity) < (from+n+7)/8 {
		return fmt.Errorf("validity of %d bytes for %d rows", len(src.Validity), src.Count)
	}
	bindings.VectorEnsureValidityWritable(dst)
	p := bindings.VectorGetValidity(dst)
	if p == nil {
		return errors.New("DuckDB vector has no validity mask")
	}
	mask := unsafe.Slice((*uint64)(p), (at+n+63)/64)
	for i := range n {
		bit := uint64(1) << (uint(at+i) & 63)
		if src.IsValid(from + i) {
			mask[(at+i)>>6] |= bit
		} else {
			mask[(at+i)>>6] &^= bit
		}
	}
	return nil
}

// copyStrings writes duckdb_string_t values. Strings of up to 12 bytes are
// stored inline and written directly; longer ones go through DuckDB, which
// owns their heap.
func copyStrings(dst bindings.Vector, src *wire.Vector, from, n, at int) error {
	if len(src.Offsets) < from+n+1 {
		return fmt.Errorf("%d string offsets for %d rows", len(src.Offsets), src.Count)
	}
	checkUTF8 := src.Type.ID == wire.TypeVarchar || src.Type.ID == wire.TypeChar
	out, err := vectorData(dst, (at+n)*stringSize)
	if err != nil {
		return err
	}
	for i := range n {
		if !src.IsValid(from + i) {
			continue
		}
		start, end := src.Offsets[from+i], src.Offsets[from+i+1]
		if start > end || int(end) > len(src.Bytes) {
			return fmt.Errorf("row %d: string offsets %d..%d outside %d bytes", from+i, start, end, len(src.Bytes))
		}
		b := src.Bytes[start:end]
		if err := checkString(src.Type.ID, b, checkUTF8); err != nil {
			return fmt.Errorf("row %d: %w", from+i, err)
		}
		if len(b) > stringInline {
			bindings.UnsafeVectorAssignStringElementLen(dst, bindings.IdxT(at+i), b)
			continue
		}
		s := out[(at+i)*stringSize : (at+i+1)*stringSize]
		clear(s)
		*(*uint32)(unsafe.Pointer(&s[0])) = uint32(len(b))
		copy(s[4:], b)
	}
	return nil
}

// checkString rejects values DuckDB would misread: invalid UTF-8 in VARCHAR,
// malformed BIT or BIGNUM headers and GEOMETRY values not in DuckDB's
// internal form.
func checkString(id wire.TypeID, b []byte, checkUTF8 bool) error {
	switch {
	case checkUTF8 && !utf8.Valid(b):
		return errors.New("invalid UTF-8 in VARCHAR value")
	case id == wire.TypeBit && (len(b) < 1 || b[0] > 7 || (len(b) == 1 && b[0] != 0)):
		return errors.New("malformed BIT value")
	case id == wire.TypeBigNum && len(b) < 4:
		return errors.New("malformed BIGNUM value")
	case id == wire.TypeGeometry:
		return checkGeometry(b)
	}
	return nil
}

// copyList copies the entries of rows [from, from+n) and the child rows they
// reference, compacting the child: row i's elements land right after row
// i-1's. Child rows are appended after those already in dst's child vector,
// which is how nested lists accumulate.
func copyList(dst bindings.Vector, src *wire.Vector, from, n, at int) error {
	if len(src.Entries) < from+n {
		return fmt.Errorf("%d list entries for %d rows", len(src.Entries), src.Count)
	}
	if len(src.Children) != 1 || src.Children[0] == nil {
		return errors.New("LIST without its child vector")
	}
	child := src.Children[0]
	var total uint64
	for i := range n {
		e := src.Entries[from+i]
		if !src.IsValid(from + i) {
			continue
		}
		if e.Offset > uint64(child.Count) || e.Length > uint64(child.Count)-e.Offset {
			return fmt.Errorf("row %d: list entry %d+%d beyond %d child rows", from+i, e.Offset, e.Length, child.Count)
		}
		total += e.Length
	}
	base := uint64(bindings.ListVectorGetSize(dst))
	if bindings.ListVectorReserve(dst, bindings.IdxT(base+total)) == bindings.StateError {
		return fmt.Errorf("cannot reserve %d list elements", base+total)
	}
	childDst := bindings.ListVectorGetChild(dst)
	raw, err := vectorData(dst, (at+n)*16)
	if err != nil {
		return err
	}
	entries := unsafe.Slice((*wire.ListEntry)(unsafe.Pointer(unsafe.SliceData(raw))), at+n)
	pos := base
	// Runs of rows whose elements are adjacent in src are copied at once.
	runStart, runLen := uint64(0), uint64(0)
	flush := func() error {
		if runLen == 0 {
			return nil
		}
		err := copyVector(childDst, child, int(runStart), int(runLen), int(pos-runLen))
		runLen = 0
		return err
	}
	for i := range n {
		e := src.Entries[from+i]
		if !src.IsValid(from+i) || e.Length == 0 {
			entries[at+i] = wire.ListEntry{Offset: pos}
			continue
		}
		if runLen > 0 && runStart+runLen != e.Offset {
			if err := flush(); err != nil {
				return err
			}
		}
		if runLen == 0 {
			runStart = e.Offset
		}
		runLen += e.Length
		entries[at+i] = wire.ListEntry{Offset: pos, Length: e.Length}
		pos += e.Length
	}
	if err := flush(); err != nil {
		return err
	}
	if bindings.ListVectorSetSize(dst, bindings.IdxT(pos)) == bindings.StateError {
		return fmt.Errorf("cannot set list size %d", pos)
	}
	return nil
}
