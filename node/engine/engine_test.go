package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/wire"
)

// int64At reads row i of a BIGINT vector.
func int64At(v *wire.Vector, i int) int64 { return int64(binary.LittleEndian.Uint64(v.Data[i*8:])) }

// queryInt64 runs a query returning one BIGINT.
func queryInt64(t *testing.T, c *Conn, sql string) int64 {
	t.Helper()
	_, chunks := collect(t, c, sql)
	if len(chunks) != 1 || chunks[0].Rows != 1 {
		t.Fatalf("%q: want one row", sql)
	}
	return int64At(chunks[0].Columns[0], 0)
}

func TestOpen(t *testing.T) {
	db := openTest(t)
	if db.Version() != "v2.0.0" {
		t.Errorf("version %q", db.Version())
	}
	if want := runtime.GOOS + "_" + runtime.GOARCH; db.Platform() != want {
		t.Errorf("platform %q, want %q", db.Platform(), want)
	}
	c := connect(t, db)
	if n := queryInt64(t, c, "SELECT current_setting('threads')::BIGINT"); n != 2 {
		t.Errorf("threads = %d", n)
	}
	_, err := c.Query(context.Background(), "SELECT * FROM read_csv('/etc/hostname')")
	var e *Error
	if !errors.As(err, &e) || e.Type != "Permission" {
		t.Errorf("external access: %v", err)
	}

	path := t.TempDir() + "/x.db"
	fileDB, err := Open(path, Options{MemoryLimit: "256MB", AllowExternalAccess: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fileDB.Close()
	if fileDB.Path() != path {
		t.Errorf("path %q", fileDB.Path())
	}
	if _, err := Open(path, Options{MemoryLimit: "lots"}); err == nil {
		t.Error("invalid memory_limit accepted")
	}
}

func TestStreamingChunksAreFlat(t *testing.T) {
	c := connect(t, openTest(t))
	// Constant, dictionary-like and sequence vectors must all arrive flat.
	_, chunks := collect(t, c, `SELECT 42::BIGINT AS k,
		CASE WHEN range % 3 = 0 THEN 'a value longer than twelve' ELSE 'b' END AS s,
		{'a': 42::BIGINT, 'b': range} AS st,
		range AS r
		FROM range(10000)`)
	rows := 0
	for _, ch := range chunks {
		k, s, st, r := ch.Columns[0], ch.Columns[1], ch.Columns[2], ch.Columns[3]
		for i := range ch.Rows {
			n := int64(rows + i)
			wantS := "b"
			if n%3 == 0 {
				wantS = "a value longer than twelve"
			}
			if int64At(k, i) != 42 || str(s, i) != wantS || int64At(st.Children[0], i) != 42 ||
				int64At(st.Children[1], i) != n || int64At(r, i) != n {
				t.Fatalf("row %d: k=%d s=%q st=%d/%d r=%d", n, int64At(k, i), str(s, i),
					int64At(st.Children[0], i), int64At(st.Children[1], i), int64At(r, i))
			}
		}
		rows += ch.Rows
	}
	if rows != 10000 {
		t.Errorf("%d rows", rows)
	}
}

func TestMultiStatement(t *testing.T) {
	c := connect(t, openTest(t))
	res, err := c.Query(context.Background(), "CREATE TABLE t (i BIGINT); INSERT INTO t VALUES (1), (2); SELECT sum(i)::BIGINT AS s FROM t")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatementType() != StatementSelect || res.Names()[0] != "s" {
		t.Errorf("statement %v, names %v", res.StatementType(), res.Names())
	}
	chunk, err := res.Next()
	if err != nil || int64At(chunk.Columns[0], 0) != 3 {
		t.Fatalf("chunk %+v, err %v", chunk, err)
	}
	res.Close()

	res, err = c.Query(context.Background(), "INSERT INTO t VALUES (3), (4), (5)")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatementType() != StatementInsert || res.RowsChanged() != 3 {
		t.Errorf("statement %v, rows changed %d", res.StatementType(), res.RowsChanged())
	}
	res.Close()

	_, err = c.Query(context.Background(), "INSERT INTO t VALUES (6); SELECT * FROM nope; INSERT INTO t VALUES (7)")
	if e := (*Error)(nil); !errors.As(err, &e) || e.Type != "Catalog" {
		t.Errorf("error %v", err)
	}
	if n := queryInt64(t, c, "SELECT count(*) FROM t"); n != 6 {
		t.Errorf("%d rows: statements before the failing one must have run, none after", n)
	}
}

func TestErrors(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, "CREATE TABLE k (id INTEGER PRIMARY KEY); INSERT INTO k VALUES (1)")
	cases := []struct {
		sql, typ, raw string
	}{
		{"SELECT * FROM nope", "Catalog", "Table with name nope does not exist!"},
		{"SELEC 1", "Parser", "syntax error at or near \"SELEC\""},
		{"SELECT 'a'::INTEGER", "Conversion", "Could not convert string 'a' to INT32"},
		{"SELECT CASE WHEN range = 5000 THEN error('boom') ELSE range END FROM range(10000)", "Invalid Input", "boom"},
		{"INSERT INTO k VALUES (1)", "Constraint", "Duplicate key \"id: 1\""},
		{"SELECT no_such_column", "Binder", "Referenced column \"no_such_column\" was not found"},
		{"", "Invalid Input", "No statement to prepare!"},
	}
	for _, tc := range cases {
		err := drain(c, tc.sql)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %v is not an *Error", tc.sql, err)
			continue
		}
		if e.Type != tc.typ || !strings.HasPrefix(e.Error(), tc.typ+" Error: ") || !strings.HasPrefix(RawMessage(err), tc.raw) {
			t.Errorf("%q: type %q, message %q, raw %q", tc.sql, e.Type, e.Error(), RawMessage(err))
		}
		if _, err := c.Exec(context.Background(), tc.sql); !errors.As(err, &e) || e.Type != tc.typ {
			t.Errorf("exec %q: %v", tc.sql, err)
		}
	}
	if RawMessage(errors.New("plain")) != "plain" || RawMessage(nil) != "" {
		t.Error("RawMessage of non-DuckDB errors")
	}
}

// drain runs sql and reads its whole result, returning the first error.
func drain(c *Conn, sql string) error {
	res, err := c.Query(context.Background(), sql)
	if err != nil {
		return err
	}
	defer res.Close()
	for {
		chunk, err := res.Next()
		if chunk == nil || err != nil {
			return err
		}
	}
}

func TestOneResultPerConn(t *testing.T) {
	c := connect(t, openTest(t))
	first, err := c.Query(context.Background(), "SELECT * FROM range(100000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Next(); err != nil {
		t.Fatal(err)
	}
	if n := queryInt64(t, c, "SELECT 7::BIGINT"); n != 7 {
		t.Errorf("got %d", n)
	}
	if _, err := first.Next(); err == nil {
		t.Error("Next on a result closed by a later query succeeded")
	}
	first.Close()
}

func TestExecParams(t *testing.T) {
	c := connect(t, openTest(t))
	exec(t, c, `CREATE TABLE p (b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INTEGER, i64 BIGINT, i INTEGER,
		u8 UTINYINT, u16 USMALLINT, u32 UINTEGER, u64 UBIGINT, u UBIGINT, f FLOAT, d DOUBLE,
		s VARCHAR, bl BLOB, ts TIMESTAMP, tz TIMESTAMPTZ, n INTEGER)`)
	when := time.Date(2024, 2, 29, 12, 30, 0, 123456000, time.UTC)
	n := exec(t, c, "INSERT INTO p VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		true, int8(-8), int16(-16), int32(-32), int64(-64), 7,
		uint8(8), uint16(16), uint32(32), uint64(1<<63), uint(9), float32(1.5), 2.25,
		"héllo", []byte{0, 1, 2}, when, when, nil)
	if n != 1 {
		t.Errorf("rows changed %d", n)
	}
	_, chunks := collect(t, c, `SELECT b::VARCHAR || i8 || i16 || i32 || i64 || i || u8 || u16 || u32 || u64 || u || f || d || s || hex(bl)
		|| strftime(ts, '%Y-%m-%d %H:%M:%S.%f') || epoch_us(tz) || coalesce(n::VARCHAR, 'null') FROM p`)
	want := fmt.Sprint("true-8-16-32-647816329223372036854775808", 9, "1.52.25héllo000102", "2024-02-29 12:30:00.123456", when.UnixMicro(), "null")
	if got := str(chunks[0].Columns[0], 0); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if n := exec(t, c, "UPDATE p SET i = i + 1; UPDATE p SET i = i + 1"); n != 2 {
		t.Errorf("rows changed over two statements: %d", n)
	}
	if _, err := c.Exec(context.Background(), "SELECT ?", 1, 2); err == nil {
		t.Error("extra argument accepted")
	}
	if _, err := c.Exec(context.Background(), "SELECT ?", struct{}{}); err == nil {
		t.Error("unsupported argument type accepted")
	}
	if _, err := c.Exec(context.Background(), "SELECT ?; SELECT ?", 1); err == nil {
		t.Error("arguments for several statements accepted")
	}
}

func TestInTransaction(t *testing.T) {
	c := connect(t, openTest(t))
	steps := []struct {
		sql  string
		inTx bool
	}{
		{"CREATE TABLE t (i INTEGER)", false},
		{"BEGIN", true},
		{"INSERT INTO t VALUES (1)", true},
		{"COMMIT", false},
		{"BEGIN TRANSACTION; INSERT INTO t VALUES (2)", true},
		{"SELECT * FROM nope", true}, // fails; the transaction is aborted but open
		{"ROLLBACK", false},
		{"START TRANSACTION; SELECT 1", true},
		{"END", false},
	}
	for _, s := range steps {
		drain(c, s.sql)
		if c.InTransaction() != s.inTx {
			t.Errorf("after %q: InTransaction = %v", s.sql, c.InTransaction())
		}
	}
	exec(t, c, "BEGIN")
	if !c.InTransaction() {
		t.Error("Exec BEGIN not seen")
	}
	exec(t, c, "ROLLBACK")
	if c.InTransaction() {
		t.Error("Exec ROLLBACK not seen")
	}
}

func TestStreamTenMillionRows(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 10M rows")
	}
	c := connect(t, openTest(t))
	res, err := c.Query(context.Background(), "SELECT range, range * 2 AS twice FROM range(10000000)")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	before := rssBytes(t)
	var rows, sum, peak int64
	for {
		chunk, err := res.Next()
		if err != nil {
			t.Fatal(err)
		}
		if chunk == nil {
			break
		}
		for i := range chunk.Rows {
			sum += int64At(chunk.Columns[0], i)
		}
		rows += int64(chunk.Rows)
		if rows%(1<<20) < 2048 {
			peak = max(peak, rssBytes(t))
		}
	}
	if rows != 10_000_000 || sum != 10_000_000*(10_000_000-1)/2 {
		t.Errorf("rows %d, sum %d", rows, sum)
	}
	// Materializing the result would take 160MB; streaming holds a chunk or
	// a few (DuckDB's streaming buffer is about 1MB).
	t.Logf("RSS grew by %d KB while streaming", (peak-before)>>10)
	if grew := peak - before; grew > 64<<20 {
		t.Errorf("RSS grew by %d MB while streaming", grew>>20)
	}
}

func TestInterrupt(t *testing.T) {
	c := connect(t, openTest(t))
	// Interrupt until the query returns: an interrupt sent before it
	// starts (a stalled machine) finds the connection idle and does
	// nothing.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				c.Interrupt()
			}
		}
	}()
	start := time.Now()
	err := drain(c, "SELECT count(*) FROM range(10000000000) a")
	close(stop)
	<-stopped
	if !IsInterrupt(err) || RawMessage(err) != "Interrupted!" {
		t.Fatalf("error %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("interrupt took %v", d)
	}
	if n := queryInt64(t, c, "SELECT 5::BIGINT"); n != 5 {
		t.Errorf("connection unusable after interrupt: %d", n)
	}
	c.Interrupt() // idle: must not affect the next query
	if n := queryInt64(t, c, "SELECT 6::BIGINT"); n != 6 {
		t.Errorf("got %d", n)
	}
}

func TestInterruptWhileStreaming(t *testing.T) {
	c := connect(t, openTest(t))
	res, err := c.Query(context.Background(), "SELECT * FROM range(100000000)")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	if _, err := res.Next(); err != nil {
		t.Fatal(err)
	}
	c.Interrupt()
	for {
		chunk, err := res.Next()
		if err != nil {
			if !IsInterrupt(err) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if chunk == nil {
			t.Fatal("result ended despite the interrupt")
		}
	}
}

func TestContextCancel(t *testing.T) {
	c := connect(t, openTest(t))
	// A deadline that passes while the statement runs interrupts it. One
	// that passed before the statement began (a stalled machine) only
	// fails the call, with the bare context error: try a longer one.
	for timeout := 200 * time.Millisecond; ; timeout *= 2 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		_, err := c.Exec(ctx, "SELECT count(*) FROM range(10000000000) a")
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && !IsInterrupt(err) && timeout < 10*time.Second {
			t.Logf("a deadline of %v passed before the statement began: %v", timeout, err)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || !IsInterrupt(err) {
			t.Fatalf("exec error %v", err)
		}
		break
	}

	ctx, cancel := context.WithCancel(context.Background())
	res, err := c.Query(ctx, "SELECT * FROM range(100000000)")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	cancel()
	for {
		chunk, err := res.Next()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("next error %v", err)
			}
			break
		}
		if chunk == nil {
			t.Fatal("result ended despite the cancellation")
		}
	}
	if _, err := c.Query(ctx, "SELECT 1"); !errors.Is(err, context.Canceled) {
		t.Errorf("query with a cancelled context: %v", err)
	}
}

func TestConcurrentConns(t *testing.T) {
	db := openTest(t)
	setup := connect(t, db)
	exec(t, setup, "CREATE TABLE src AS SELECT range AS id, range::VARCHAR AS s, [range, NULL] AS l FROM range(20000)")
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			c, err := db.Connect()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			table := fmt.Sprintf("dst%d", w)
			if _, err := c.Exec(context.Background(), "CREATE TABLE "+table+" AS SELECT * FROM src LIMIT 0"); err != nil {
				t.Error(err)
				return
			}
			res, err := c.Query(context.Background(), "SELECT * FROM src")
			if err != nil {
				t.Error(err)
				return
			}
			var chunks []*wire.DataChunk
			for {
				chunk, err := res.Next()
				if err != nil {
					t.Error(err)
				}
				if chunk == nil {
					break
				}
				chunks = append(chunks, cloneChunk(chunk))
			}
			res.Close()
			for _, ch := range chunks {
				if err := c.Append("", table, ch); err != nil {
					t.Error(err)
					return
				}
			}
			go c.Interrupt() // concurrent with the next statement; either outcome is fine
			drain(c, "SELECT count(*) FROM "+table)
		})
	}
	wg.Wait()
	for w := range 6 {
		if n := queryInt64(t, setup, fmt.Sprintf("SELECT count(*) FROM (SELECT * FROM src EXCEPT ALL SELECT * FROM dst%d)", w)); n != 0 {
			t.Errorf("dst%d differs in %d rows", w, n)
		}
	}
}

func TestTransactionControl(t *testing.T) {
	c := connect(t, openTest(t))
	ctx := context.Background()
	exec(t, c, "CREATE TABLE t (i INTEGER)")
	if err := c.Begin(ctx); err != nil || !c.InTransaction() {
		t.Fatalf("Begin: %v, in transaction %v", err, c.InTransaction())
	}
	exec(t, c, "INSERT INTO t VALUES (1)")
	if err := c.Commit(ctx); err != nil || c.InTransaction() {
		t.Fatalf("Commit: %v, in transaction %v", err, c.InTransaction())
	}
	if err := c.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	// A second BEGIN fails and the state comes from the probe: still in
	// the first transaction.
	if err := c.Begin(ctx); err == nil || !c.InTransaction() {
		t.Fatalf("nested Begin: %v, in transaction %v", err, c.InTransaction())
	}
	if err := c.Rollback(ctx); err != nil || c.InTransaction() {
		t.Fatalf("Rollback: %v, in transaction %v", err, c.InTransaction())
	}
	if err := c.Commit(ctx); err == nil || c.InTransaction() {
		t.Fatalf("Commit without a transaction: %v, in transaction %v", err, c.InTransaction())
	}
	if got := exec(t, c, "DELETE FROM t"); got != 1 {
		t.Fatalf("committed rows = %d, want 1", got)
	}
}

func TestPreparedStatement(t *testing.T) {
	c := connect(t, openTest(t))
	ctx := context.Background()
	exec(t, c, "CREATE TABLE t (i INTEGER, s VARCHAR)")
	s, err := c.Prepare("INSERT INTO t VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.StatementType() != StatementInsert || len(s.Names()) != 1 || s.Names()[0] != "Count" {
		t.Fatalf("type %v, names %v", s.StatementType(), s.Names())
	}
	for i := range 3 {
		if n, err := s.Exec(ctx, i, "x"); err != nil || n != 1 {
			t.Fatalf("exec %d: %d, %v", i, n, err)
		}
	}
	if _, err := s.Exec(ctx, 1); err == nil {
		t.Error("missing argument accepted")
	}
	if _, err := s.Exec(ctx, "nope", "x"); err == nil {
		t.Error("conversion error not reported")
	}
	ret, err := c.Prepare("UPDATE t SET s = 'y' WHERE i > ? RETURNING i")
	if err != nil {
		t.Fatal(err)
	}
	defer ret.Close()
	if ret.StatementType() != StatementUpdate || len(ret.Names()) != 1 || ret.Names()[0] != "i" {
		t.Fatalf("RETURNING: type %v, names %v", ret.StatementType(), ret.Names())
	}
	// Rows changed come from DuckDB's count row, which RETURNING replaces.
	if n, err := ret.Exec(ctx, 0); err != nil || n != 0 {
		t.Fatalf("RETURNING exec: %d, %v", n, err)
	}
	if got := exec(t, c, "DELETE FROM t WHERE s = 'y'"); got != 2 {
		t.Fatalf("rows updated through RETURNING = %d, want 2", got)
	}
	if _, err := c.Prepare("SELECT 1; SELECT 2"); err == nil {
		t.Error("two statements prepared")
	}
	var e *Error
	if _, err := c.Prepare("SELEC 1"); !errors.As(err, &e) || e.Type != "Parser" {
		t.Errorf("parse error = %v", err)
	}
	s.Close()
	if _, err := s.Exec(ctx, 1, "x"); err == nil {
		t.Error("closed statement ran")
	}
}

func TestResolveTable(t *testing.T) {
	db := openTest(t)
	if db.Catalog() != "memory" {
		t.Fatalf("in-memory catalog %q", db.Catalog())
	}
	tests := []struct {
		name   string
		schema []string
		table  string
	}{
		{"t", []string{"main"}, "t"},
		{"s.t", []string{"s"}, "t"},
		{`"my s"."T"`, []string{"my s"}, "T"},
		{"memory.s.t", []string{"s"}, "t"},
		{"memory.t", []string{"memory"}, "t"},
		{"a.b.t", []string{"a", "b"}, "t"},
		{"memory.a.b.t", []string{"a", "b"}, "t"},
		{"other.s.t", []string{"other", "s"}, "t"},
	}
	for _, tt := range tests {
		schema, table, err := db.ResolveTable(tt.name)
		if err != nil || !slices.Equal(schema, tt.schema) || table != tt.table {
			t.Errorf("ResolveTable(%q) = %q, %q, %v; want %q, %q", tt.name, schema, table, err, tt.schema, tt.table)
		}
	}
	for _, bad := range []string{"", "s.", ".t", `a..t`} {
		if _, _, err := db.ResolveTable(bad); err == nil {
			t.Errorf("ResolveTable(%q) accepted", bad)
		}
	}
}
