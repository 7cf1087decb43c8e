package replication

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// shapeCase is one INSERT run both ways: the table it writes (created
// before any case runs), the statement, and whether the prepared path must
// take it.
type shapeCase struct {
	table, columns string
	insert         string
	prepared       bool
}

// shapeCases are the differential cases; FuzzShapeOf seeds from them too.
var shapeCases = []shapeCase{
	// integers into each integer type: in range, at the bounds, one past
	{"t_tiny", "v TINYINT", "INSERT INTO t_tiny VALUES (127)", true},
	{"t_tiny", "", "INSERT INTO t_tiny VALUES (-128)", true},
	{"t_tiny", "", "INSERT INTO t_tiny VALUES (128)", false},
	{"t_tiny", "", "INSERT INTO t_tiny VALUES (-129)", false},
	{"t_small", "v SMALLINT", "INSERT INTO t_small VALUES (32767), (-32768)", true},
	{"t_small", "", "INSERT INTO t_small VALUES (32768)", false},
	{"t_int", "v INTEGER", "INSERT INTO t_int VALUES (2147483647)", true},
	{"t_int", "", "INSERT INTO t_int VALUES (-2147483648)", true},
	{"t_int", "", "INSERT INTO t_int VALUES (2147483648)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (007)", true},
	{"t_int", "", "INSERT INTO t_int VALUES (-0)", true},
	{"t_int", "", "INSERT INTO t_int VALUES (- 5)", true},
	{"t_int", "", "INSERT INTO t_int VALUES (1.5)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (2.0)", false},
	{"t_int", "", "INSERT INTO t_int VALUES ('42')", false},
	{"t_int", "", "INSERT INTO t_int VALUES ('4x2')", false},
	{"t_int", "", "INSERT INTO t_int VALUES (1e3)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (0x1F)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (1_000)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (+5)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (NULL)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (TRUE)", false},
	{"t_int", "", "INSERT INTO t_int VALUES (99999999999999999999)", false},
	{"t_big", "v BIGINT", "INSERT INTO t_big VALUES (999999999999999999), (-999999999999999999)", true},
	{"t_big", "", "INSERT INTO t_big VALUES (9223372036854775807)", false},
	{"t_big", "", "INSERT INTO t_big VALUES (9223372036854775808)", false},
	{"t_utiny", "v UTINYINT", "INSERT INTO t_utiny VALUES (255)", true},
	{"t_utiny", "", "INSERT INTO t_utiny VALUES (256)", false},
	{"t_utiny", "", "INSERT INTO t_utiny VALUES (-1)", false},
	{"t_utiny", "", "INSERT INTO t_utiny VALUES (-0)", true},
	{"t_usmall", "v USMALLINT", "INSERT INTO t_usmall VALUES (65535)", true},
	{"t_uint", "v UINTEGER", "INSERT INTO t_uint VALUES (4294967295)", true},
	{"t_uint", "", "INSERT INTO t_uint VALUES (4294967296)", false},
	{"t_ubig", "v UBIGINT", "INSERT INTO t_ubig VALUES (123456789012345678)", true},
	{"t_ubig", "", "INSERT INTO t_ubig VALUES (-3)", false},
	{"t_huge", "v HUGEINT", "INSERT INTO t_huge VALUES (5)", false},
	// decimals: scale kept, scaled up, rounded (not taken), out of range
	{"t_dec", "v DECIMAL(5,2)", "INSERT INTO t_dec VALUES (1.50)", true},
	{"t_dec", "", "INSERT INTO t_dec VALUES (1.5)", true},
	{"t_dec", "", "INSERT INTO t_dec VALUES (-999.99)", true},
	{"t_dec", "", "INSERT INTO t_dec VALUES (7)", true},
	{"t_dec", "", "INSERT INTO t_dec VALUES (000123.4)", true},
	{"t_dec", "", "INSERT INTO t_dec VALUES (0.00)", true},
	{"t_dec", "", "INSERT INTO t_dec VALUES (1.505)", false},
	{"t_dec", "", "INSERT INTO t_dec VALUES (1000)", false},
	{"t_dec", "", "INSERT INTO t_dec VALUES (1000.5)", false},
	{"t_dec", "", "INSERT INTO t_dec VALUES ('1.5')", false},
	{"t_dec18", "v DECIMAL(18,3)", "INSERT INTO t_dec18 VALUES (123456789012345.678)", true},
	{"t_dec18", "", "INSERT INTO t_dec18 VALUES (1234567890123456.78)", false},
	{"t_dec38", "v DECIMAL(38,2)", "INSERT INTO t_dec38 VALUES (1.50)", false},
	{"t_dbl", "v DOUBLE", "INSERT INTO t_dbl VALUES (1.50), (3)", false},
	// strings
	{"t_str", "v VARCHAR", "INSERT INTO t_str VALUES ('plain')", true},
	{"t_str", "", "INSERT INTO t_str VALUES ('it''s')", true},
	{"t_str", "", "INSERT INTO t_str VALUES ('')", true},
	{"t_str", "", "INSERT INTO t_str VALUES ('back\\slash \\n \\x41 \\u00e9')", true},
	{"t_str", "", "INSERT INTO t_str VALUES ('ünïcödé ✓ 𝄞')", true},
	{"t_str", "", "INSERT INTO t_str VALUES ('" + strings.Repeat("long ", 20000) + "')", true},
	{"t_str", "", "INSERT INTO t_str VALUES (E'esc\\'aped\\n')", false},
	{"t_str", "", "INSERT INTO t_str VALUES (U&'d\\0061t\\+000061')", false},
	{"t_str", "", "INSERT INTO t_str VALUES ($$dollar$$)", false},
	{"t_str", "", "INSERT INTO t_str VALUES ('a' 'b')", false},
	{"t_str", "", "INSERT INTO t_str VALUES (42)", false},
	{"t_str", "", "INSERT INTO t_str VALUES (1.50)", false},
	{"t_nocase", "v VARCHAR COLLATE NOCASE", "INSERT INTO t_nocase VALUES ('MiXed')", true},
	// strings into other types stay literal
	{"t_date", "v DATE", "INSERT INTO t_date VALUES ('2024-02-29')", false},
	{"t_date", "", "INSERT INTO t_date VALUES ('2023-02-29')", false},
	{"t_ts", "v TIMESTAMP", "INSERT INTO t_ts VALUES ('2024-01-02 03:04:05.123456')", false},
	{"t_enum", "v mood", "INSERT INTO t_enum VALUES ('ok')", false},
	{"t_enum", "", "INSERT INTO t_enum VALUES ('nope')", false},
	{"t_list", "v INTEGER[]", "INSERT INTO t_list VALUES ('[1, 2]')", false},
	{"t_bool", "v BOOLEAN", "INSERT INTO t_bool VALUES (TRUE), (false), (NULL)", false},
	{"t_alias", "v myint", "INSERT INTO t_alias VALUES (5)", true},
	// several columns: NULL, DEFAULT, booleans kept in the text; column lists; several rows
	{"t_mix", "id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, price DECIMAL(9,2) DEFAULT 9.99, ok BOOLEAN, n BIGINT DEFAULT 42",
		"INSERT INTO t_mix VALUES (1, 'one', 1.25, TRUE, DEFAULT)", true},
	{"t_mix", "", "INSERT INTO t_mix (id, name) VALUES (2, 'two')", true},
	{"t_mix", "", "INSERT INTO T_MIX (NAME, ID) VALUES ('three', 3), ('four', 4);", true},
	{"t_mix", "", "INSERT INTO t_mix VALUES (5, 'five', NULL, NULL, 50), (6, 'six', DEFAULT, false, -6)", true},
	{"t_mix", "", "insert into main.t_mix values (7, 'seven', 0.5, true, 7)", true},
	{"t_mix", "", "INSERT INTO t_mix VALUES (1, 'dup', 1, TRUE, 1)", true}, // primary key: fails prepared, literal decides
	{"t_mix", "", "INSERT INTO t_mix VALUES (8, NULL, 1, TRUE, 1)", true},  // NOT NULL
	{"t_mix", "", "INSERT INTO t_mix VALUES (9, 'x', 1)", false},           // too few values
	{"t_mix", "", "INSERT INTO t_mix (id) VALUES (10, 11)", false},         // too many
	{"t_mix", "", "INSERT INTO t_mix VALUES (12, 'x', 1, TRUE, 1) RETURNING id", false},
	{"t_mix", "", "INSERT INTO t_mix VALUES (13, /* c */ 'x', 1, TRUE, 1)", false},
	{"t_mix", "", "INSERT INTO t_mix VALUES (14, 'x', 1 + 1, TRUE, 1)", false},
	{"t_check", "v INTEGER CHECK (v < 10)", "INSERT INTO t_check VALUES (20)", true}, // CHECK: fails prepared
	{"t_check", "", "INSERT INTO t_check VALUES (5)", true},
	{"t_missing", "", "INSERT INTO no_such_table VALUES (1)", false},
}

// sequenceCases run in a database with a sequence, where nothing is
// prepared: a failure on the prepared path would run its transaction
// again and draw from the sequence once more (shapeCache.hasSequences).
var sequenceCases = []shapeCase{
	{"t_seq", "id INTEGER PRIMARY KEY, n BIGINT DEFAULT nextval('seq')", "INSERT INTO t_seq (id) VALUES (1)", false},
	{"t_seq", "", "INSERT INTO t_seq (id) VALUES (1)", false},
	{"t_seq", "", "INSERT INTO t_seq (id) VALUES (2), (2)", false},
	{"t_seq", "", "INSERT INTO t_seq (id) VALUES (3)", false},
	{"t_plain", "v INTEGER", "INSERT INTO t_plain VALUES (1)", false},
}

// TestPreparedShapesMatchLiterals applies every case to two FSMs, one of
// which never prepares shapes, and requires byte-equal results, errors,
// rows and state hashes; and that the cases marked prepared ran prepared
// (each case runs twice, the second from the cache).
func TestPreparedShapesMatchLiterals(t *testing.T) {
	t.Run("no sequences", func(t *testing.T) {
		runShapeCases(t, []string{"CREATE TYPE mood AS ENUM ('ok', 'bad')", "CREATE TYPE myint AS INTEGER"}, shapeCases)
	})
	t.Run("a sequence", func(t *testing.T) {
		runShapeCases(t, []string{"CREATE SEQUENCE seq"}, sequenceCases)
	})
}

// runShapeCases creates the tables of cases after setup, applies each
// case twice on an FSM that prepares shapes and on one that does not, and
// compares them.
func runShapeCases(t *testing.T, setup []string, cases []shapeCase) {
	t.Helper()
	fastDB, slowDB := openDB(t, t.TempDir()), openDB(t, t.TempDir())
	defer fastDB.Close()
	defer slowDB.Close()
	fast, slow := openFSM(t, fastDB), openFSM(t, slowDB)
	defer fast.close()
	defer slow.close()
	slow.shapes = nil

	idx := uint64(0)
	apply := func(cmd wal.Command) (fastOut, slowOut string) {
		t.Helper()
		idx++
		outs := make([]string, 2)
		for i, f := range []*fsm{fast, slow} {
			outs[i] = describeOutcome(t, f.ApplyBatch([]*raft.Log{logEntry(t, idx, cmd)})[0])
		}
		return outs[0], outs[1]
	}
	tables := map[string]bool{}
	for _, c := range cases {
		if c.columns != "" {
			setup = append(setup, fmt.Sprintf("CREATE TABLE %s(%s)", c.table, c.columns))
			tables[c.table] = true
		}
	}
	for _, sql := range setup {
		if f, s := apply(stmt(sql)); f != s || strings.HasPrefix(f, "error") {
			t.Fatalf("%s: %s / %s", sql, f, s)
		}
	}
	for i, c := range cases {
		for round := 0; round < 2; round++ {
			before := fast.shapes.hits
			cmd := wal.Command{Key: fmt.Appendf(nil, "case-%d-%d", i, round), Timestamp: 1,
				Entry: wal.Statement{SQL: c.insert, Returning: round == 0}}
			f, s := apply(cmd)
			if f != s {
				t.Errorf("case %d round %d %.80q:\nprepared: %.300s\nliteral:  %.300s", i, round, c.insert, f, s)
			}
			if ran := fast.shapes.hits > before; ran != c.prepared && !strings.HasPrefix(s, "error") {
				t.Errorf("case %d %.80q: ran prepared %v, want %v (%.200s)", i, c.insert, ran, c.prepared, s)
			}
		}
	}
	ctx := context.Background()
	for table := range tables {
		q := fmt.Sprintf("SELECT typeof(r) || ' ' || r::VARCHAR || ' ' || hash(r) FROM %s r ORDER BY ALL", table)
		got, err := fast.conn.QueryStrings(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := slow.conn.QueryStrings(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: prepared rows\n%.500s\nliteral rows\n%.500s", table, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(want) == 0 && table != "t_huge" {
			t.Errorf("%s: no rows written", table)
		}
	}
	if h, w := fsmHash(t, fast), fsmHash(t, slow); h != w {
		t.Errorf("state hashes differ: prepared %+v, literal %+v", h, w)
	}
}

// describeOutcome renders what ApplyBatch answered for one command: its
// error, or its result's encoding.
func describeOutcome(t *testing.T, r any) string {
	t.Helper()
	if err, ok := r.(error); ok {
		return "apply error " + err.Error()
	}
	out := r.(*entryResult).results[0]
	if out.err != nil {
		return "error " + out.err.Error()
	}
	enc, err := out.res.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", enc)
}

// TestShapesDroppedWhenCatalogMayChange checks that the prepared shapes
// go at every statement that may change the catalog, at a rollback of the
// apply connection and at a snapshot restore, and survive INSERT, UPDATE
// and DELETE.
func TestShapesDroppedWhenCatalogMayChange(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	f := openFSM(t, db)
	defer f.close()
	idx := uint64(0)
	apply := func(e wal.Entry) {
		t.Helper()
		idx++
		r := f.ApplyBatch([]*raft.Log{logEntry(t, idx, wal.Command{Entry: e})})[0]
		if err, ok := r.(error); ok {
			t.Fatal(err)
		}
	}
	insert := wal.Statement{SQL: "INSERT INTO t VALUES (1, 'a')"}
	kept := func(want int) {
		t.Helper()
		if got := f.shapes.order.Len(); got != want {
			t.Fatalf("after entry %d: %d shapes kept, want %d", idx, got, want)
		}
	}
	apply(wal.Statement{SQL: "CREATE TABLE t(i INTEGER, s VARCHAR)"})
	apply(insert)
	kept(1)
	apply(wal.Statement{SQL: "UPDATE t SET s = 'b'"})
	apply(wal.Statement{SQL: "DELETE FROM t WHERE i = 2"})
	apply(wal.Statement{SQL: "INSERT INTO t VALUES (2, 'b'), (3, 'c')"})
	kept(2)
	apply(wal.Statement{SQL: "ALTER TABLE t ALTER s TYPE INTEGER"})
	kept(0)
	apply(wal.Statement{SQL: "INSERT INTO t VALUES (4, 5)"})
	kept(1)
	apply(wal.Statement{SQL: "SET default_null_order = 'nulls_first'"})
	kept(0)
	apply(wal.Statement{SQL: "INSERT INTO t VALUES (4, 5)"})
	kept(1)
	// A transaction whose last statement fails is rolled back and applied
	// again without it; its DDL is undone, and so are the shapes.
	apply(wal.Txn{Entries: []wal.Entry{wal.Statement{SQL: "INSERT INTO t VALUES (6, 7)"}, wal.Statement{SQL: "INSERT INTO nope VALUES (1)"}}})
	kept(0)

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	apply(wal.Statement{SQL: "INSERT INTO t VALUES (8, 9)"})
	kept(1)
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if err := f.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	kept(0)
}

// TestShapeOfRefuses: texts no client can send through Quack (its strings
// are UTF-8) but a log may hold stay on the literal path.
func TestShapeOfRefuses(t *testing.T) {
	for _, sql := range []string{
		"INSERT INTO t VALUES ('bad \xff utf8')",
		"INSERT INTO t VALUES ('nul \x00 byte')",
		"INSERT INTO t VALUES ($1)",
		"INSERT INTO t VALUES (1), (2), ",
		"INSERT INTO t VALUES ()",
		"INSERT INTO t VALUES (NULL)",
	} {
		if sh, ok := shapeOf(sqltext.Parse(sql)); ok {
			t.Errorf("%q accepted as %q", sql, sh.shape)
		}
	}
}

// FuzzShapeOf checks on any text that shapeOf never panics, that the
// literals it accepts are within its bounds, and that a shape holds no
// literal of its own (its values are all parameters or kept words).
func FuzzShapeOf(f *testing.F) {
	for _, c := range shapeCases {
		f.Add(c.insert)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		sh, ok := shapeOf(sqltext.Parse(sql))
		if !ok {
			return
		}
		for i, l := range sh.lits {
			switch {
			case l.str && (strings.IndexByte(l.digits, 0) >= 0):
				t.Fatalf("string literal with NUL accepted: %q", sql)
			case !l.str && (!allDigits(l.digits) || len(l.digits)+len(l.frac) > maxLiteralDigits):
				t.Fatalf("literal %d %+v of %q accepted", i, l, sql)
			}
		}
		again, ok := shapeOf(sqltext.Parse(sh.shape))
		if ok {
			t.Fatalf("shape %q of %q has literals %v", sh.shape, sql, again.lits)
		}
	})
}
