package hunter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Statement is one SQL statement the hunter sends, with the placement that
// produced it: where in a write the function under test sits.
type Statement struct {
	SQL       string
	Placement string
	// Func is the function under test, empty for harmless writes.
	Func string
	// creates names the object the statement creates, if any; follow-ups
	// that use it are dropped when it is refused.
	creates string
	// needs is the object a follow-up uses.
	needs string
	// table is a table the statement creates, added to the pool once
	// accepted.
	table string
}

// Setup creates the tables and sequence every run starts with: small
// enough that thousands of statements run in minutes.
var Setup = []string{
	"CREATE SEQUENCE seq0",
	"CREATE TABLE t0(id INTEGER, v INTEGER, s VARCHAR, d DOUBLE)",
	"INSERT INTO t0 SELECT i, i % 97, 's' || i, i / 7 FROM range(200) r(i)",
	"CREATE TABLE t1(id INTEGER, v INTEGER, s VARCHAR, d DOUBLE)",
	"INSERT INTO t1 SELECT i, i % 13, 'r' || i, i / 3 FROM range(150) r(i)",
	"CREATE TABLE t2(id INTEGER, v INTEGER, s VARCHAR, d DOUBLE)",
	"INSERT INTO t2 SELECT i, i % 5, 'q' || i, i * 1.5 FROM range(100) r(i)",
}

// baseTables are the tables Setup creates; they are never dropped.
var baseTables = []string{"t0", "t1", "t2"}

// maxExtraTables bounds the tables the run creates besides the base ones:
// past it the oldest is dropped.
const maxExtraTables = 6

// Generator makes a seeded stream of writes. Given the same seed, function
// list and answers (Result), it generates the same statements.
type Generator struct {
	rng     *rand.Rand
	places  []placement
	scalars []Function
	// macros are the scalar macros, drawn as often as a third of the
	// scalars: DuckDB defines over a hundred, most of them deterministic.
	macros  []Function
	tables  []Function
	queue   []Statement
	pool    []string // tables statements may write: base ones, then created ones
	nextObj int
	nextID  int
	n       int
}

// NewGenerator returns a generator over funcs seeded with seed, leaving
// out the placements named in skip (to hunt past a known finding).
func NewGenerator(seed int64, funcs []Function, skip ...string) *Generator {
	g := &Generator{rng: rand.New(rand.NewPCG(uint64(seed), 0x68756e74)), nextID: 1000}
	for _, p := range placements {
		if !slices.Contains(skip, p.name) {
			g.places = append(g.places, p)
		}
	}
	g.pool = append(g.pool, baseTables...)
	for _, f := range funcs {
		switch {
		case f.Table:
			g.tables = append(g.tables, f)
		case f.Macro:
			g.macros = append(g.macros, f)
		default:
			g.scalars = append(g.scalars, f)
		}
	}
	g.scalars = append(g.scalars, extraScalars...)
	return g
}

// extraScalars are scalars that are not VOLATILE in duckdb_functions() but
// read the session or the node: what a write must not depend on.
var extraScalars = []Function{
	{Name: "current_setting", Overloads: [][]Param{{{Name: "setting_name", Type: "VARCHAR", Positional: true}}}},
	{Name: "getvariable", Overloads: [][]Param{{{Name: "col0", Type: "VARCHAR", Positional: true}}}},
	{Name: "version", Overloads: [][]Param{nil}},
	{Name: "pragma_version", Overloads: [][]Param{nil}},
	// age() with one argument counts from today's date, though DuckDB
	// lists age as CONSISTENT.
	{Name: "age", Overloads: [][]Param{{{Name: "timestamp", Type: "TIMESTAMP", Positional: true}}}},
}

// Result tells the generator whether st was accepted, so that the objects
// it created can be used and follow-ups of a refused one dropped.
func (g *Generator) Result(st Statement, accepted bool) {
	if !accepted {
		if st.creates != "" {
			q := g.queue[:0]
			for _, f := range g.queue {
				if f.needs != st.creates {
					q = append(q, f)
				}
			}
			g.queue = q
		}
		return
	}
	if st.table != "" {
		g.pool = append(g.pool, st.table)
	}
}

// Next returns the next statement.
func (g *Generator) Next() Statement {
	g.n++
	if len(g.queue) > 0 {
		st := g.queue[0]
		g.queue = g.queue[1:]
		return st
	}
	if len(g.pool) > len(baseTables)+maxExtraTables {
		old := g.pool[len(baseTables)]
		g.pool = append(g.pool[:len(baseTables)], g.pool[len(baseTables)+1:]...)
		return Statement{SQL: "DROP TABLE " + old, Placement: "harmless"}
	}
	if g.n%40 == 0 {
		return Statement{SQL: fmt.Sprintf("DELETE FROM %s WHERE id >= 1000", g.table()), Placement: "harmless"}
	}
	// About a third of the statements are deterministic writes that must
	// be accepted.
	if g.rng.IntN(3) == 0 {
		return g.harmless()
	}
	if len(g.places) == 0 {
		return g.harmless()
	}
	return g.places[g.rng.IntN(len(g.places))].gen(g)
}

// placement is one place in a write where a function call can sit.
type placement struct {
	name string
	gen  func(*Generator) Statement
}

var placements = []placement{
	{"update-set", func(g *Generator) Statement {
		e, f := g.scalarExpr()
		return g.st("update-set", f, "UPDATE %s SET v = %s WHERE id %% 7 = %d", g.table(), asInt(e), g.rng.IntN(7))
	}},
	{"update-where", func(g *Generator) Statement {
		e, f := g.anyExpr()
		return g.st("update-where", f, "UPDATE %s SET v = v + 1 WHERE id < %s %% 200", g.table(), asInt(e))
	}},
	{"delete-where", func(g *Generator) Statement {
		e, f := g.anyExpr()
		return g.st("delete-where", f, "DELETE FROM %s WHERE id >= 1000 AND id %% 3 = %s %% 3", g.table(), asInt(e))
	}},
	{"insert-values", func(g *Generator) Statement {
		e, f := g.scalarExpr()
		return g.st("insert-values", f, "INSERT INTO %s(id, v, s) VALUES (%d, %s, %s)", g.table(), g.id(), asInt(e), asText(e))
	}},
	{"insert-select", func(g *Generator) Statement {
		e, f := g.anyExpr()
		return g.st("insert-select", f, "INSERT INTO %s(id, v, s) SELECT id + %d, %s, s FROM %s WHERE id < 3", g.table(), g.id(), asInt(e), g.table())
	}},
	{"insert-from-table-function", func(g *Generator) Statement {
		call, f := g.tableCall()
		return g.st("insert-from-table-function", f, "INSERT INTO %s(id, s) SELECT %d, CAST(x AS VARCHAR) FROM %s x LIMIT 3", g.table(), g.id(), call)
	}},
	{"call", func(g *Generator) Statement {
		call, f := g.tableCall()
		return g.st("call", f, "CALL %s", call)
	}},
	{"subquery", func(g *Generator) Statement {
		e, f := g.anyExpr()
		return g.st("subquery", f, "UPDATE %s SET v = (SELECT %s) WHERE id IN (SELECT id FROM %s WHERE id < 10)", g.table(), asInt(e), g.table())
	}},
	{"create-table-as", func(g *Generator) Statement {
		e, f := g.anyExpr()
		name := g.obj("c")
		st := g.st("create-table-as", f, "CREATE TABLE %s AS SELECT id, %s AS v, s, d FROM %s LIMIT 50", name, asInt(e), g.table())
		st.table = name
		return st
	}},
	{"create-table-as-table-function", func(g *Generator) Statement {
		call, f := g.tableCall()
		name := g.obj("c")
		return g.st("create-table-as-table-function", f, "CREATE TABLE %s AS SELECT * FROM %s LIMIT 5", name, call)
	}},
	{"column-default", func(g *Generator) Statement {
		e, f := g.scalarExpr()
		name := g.obj("def")
		st := g.st("column-default", f, "CREATE TABLE %s(id INTEGER, v INTEGER DEFAULT %s, s VARCHAR, d DOUBLE)", name, asInt(e))
		st.creates, st.table = name, name
		g.follow(name, "column-default", f, "INSERT INTO %s(id, s) SELECT i, 'x' FROM range(3) r(i)", name)
		return st
	}},
	{"alter-set-default", func(g *Generator) Statement {
		e, f := g.scalarExpr()
		t := g.table()
		st := g.st("alter-set-default", f, "ALTER TABLE %s ALTER COLUMN d SET DEFAULT %s", t, asInt(e))
		st.creates = "default:" + t
		g.follow(st.creates, "alter-set-default", f, "INSERT INTO %s(id, v) VALUES (%d, 1)", t, g.id())
		g.follow(st.creates, "alter-set-default", "", "ALTER TABLE %s ALTER COLUMN d DROP DEFAULT", t)
		return st
	}},
	{"generated-column", func(g *Generator) Statement {
		e, f := g.scalarExpr()
		name := g.obj("gen")
		st := g.st("generated-column", f, "CREATE TABLE %s(id INTEGER, v INTEGER, s VARCHAR, d DOUBLE, g INTEGER GENERATED ALWAYS AS (%s))", name, asInt(e))
		st.creates, st.table = name, name
		g.follow(name, "generated-column", f, "INSERT INTO %s(id, v) SELECT i, i FROM range(3) r(i)", name)
		return st
	}},
	{"macro", func(g *Generator) Statement {
		e, f := g.anyExpr()
		name := g.obj("m")
		st := g.st("macro", f, "CREATE MACRO %s(x) AS x + %s", name, asInt(e))
		st.creates = name
		g.follow(name, "macro", f, "UPDATE %s SET v = %s(v) %% 1000 WHERE id < 20", g.table(), name)
		g.follow(name, "macro", f, "INSERT INTO %s(id, v) SELECT id + %d, %s(v) %% 1000 FROM %s WHERE id < 3", g.table(), g.id(), name, g.table())
		return st
	}},
	{"table-macro", func(g *Generator) Statement {
		call, f := g.tableCall()
		name := g.obj("tm")
		st := g.st("table-macro", f, "CREATE MACRO %s() AS TABLE SELECT * FROM %s LIMIT 3", name, call)
		st.creates = name
		g.follow(name, "table-macro", f, "INSERT INTO %s(id, s) SELECT %d, CAST(x AS VARCHAR) FROM %s() x", g.table(), g.id(), name)
		g.follow(name, "table-macro", f, "CREATE TABLE %s AS SELECT * FROM %s()", g.obj("c"), name)
		return st
	}},
	{"view", func(g *Generator) Statement {
		e, f := g.anyExpr()
		name := g.obj("v")
		t := g.table()
		st := g.st("view", f, "CREATE VIEW %s AS SELECT id, %s AS v FROM %s", name, asInt(e), t)
		st.creates = name
		g.follow(name, "view", f, "INSERT INTO %s(id, v) SELECT id + %d, v FROM %s WHERE id < 3", g.table(), g.id(), name)
		g.follow(name, "view", f, "UPDATE %s SET v = %s.v FROM %s WHERE %s.id = %s.id AND %s.id < 20", t, name, name, t, name, t)
		return st
	}},
	{"view-table-function", func(g *Generator) Statement {
		call, f := g.tableCall()
		name := g.obj("v")
		st := g.st("view-table-function", f, "CREATE VIEW %s AS SELECT * FROM %s", name, call)
		st.creates = name
		g.follow(name, "view-table-function", f, "INSERT INTO %s(id, s) SELECT %d, CAST(x AS VARCHAR) FROM %s x LIMIT 3", g.table(), g.id(), name)
		return st
	}},
	// DuckDB 2.0's nested schemas: a table in one, written by the other
	// placements, which snapshots and the state hash name by its path.
	{"nested-schema", func(g *Generator) Statement {
		name := g.obj("ns")
		st := g.st("nested-schema", "", "CREATE SCHEMA %s", name)
		st.creates = name
		g.follow(name, "nested-schema", "", "CREATE SCHEMA %s.c", name)
		g.queue = append(g.queue, Statement{SQL: fmt.Sprintf("CREATE TABLE %s.c.t AS SELECT id, v, s, d FROM %s LIMIT 20", name, g.table()),
			Placement: "nested-schema", needs: name, table: name + ".c.t"})
		return st
	}},
	// DuckDB 2.0's triggers: every node runs the action for each write to
	// the table, literal INSERTs included.
	{"trigger", func(g *Generator) Statement {
		e, f := g.scalarExpr()
		t, log, name := g.table(), g.obj("log"), g.obj("tr")
		st := g.st("trigger", f, "CREATE TABLE %s(id INTEGER, v INTEGER)", log)
		st.creates = log
		action := fmt.Sprintf("FOR EACH ROW INSERT INTO %s VALUES (NEW.id, %s)", log, asInt(e))
		if g.rng.IntN(2) == 0 {
			action = fmt.Sprintf("INSERT INTO %s SELECT id, %s FROM %s WHERE id < 3", log, asInt(e), t)
		}
		g.follow(log, "trigger", f, "CREATE TRIGGER %s AFTER INSERT ON %s %s", name, t, action)
		g.follow(log, "trigger", f, "INSERT INTO %s(id, v) VALUES (%d, 1)", t, g.id())
		g.follow(log, "trigger", "", "DROP TRIGGER %s ON %s", name, t)
		return st
	}},
	{"sample", func(g *Generator) Statement {
		t := g.table()
		s := samples[g.rng.IntN(len(samples))]
		switch g.rng.IntN(4) {
		case 0:
			return g.st("sample", "", "DELETE FROM %s WHERE id IN (SELECT id FROM %s %s)", t, t, s)
		case 1:
			return g.st("sample", "", "INSERT INTO %s(id, v) SELECT id + %d, v FROM %s %s", t, g.id(), t, s)
		case 2:
			return g.st("sample", "", "UPDATE %s SET v = v + 1 WHERE id IN (SELECT id FROM %s %s)", t, t, s)
		}
		name := g.obj("c")
		st := g.st("sample", "", "CREATE TABLE %s AS SELECT * FROM %s %s", name, t, s)
		st.table = name
		return st
	}},
	{"rowid", func(g *Generator) Statement {
		t := g.table()
		switch g.rng.IntN(4) {
		case 0:
			return g.st("rowid", "", "UPDATE %s SET v = rowid %% 1000 WHERE id < 50", t)
		case 1:
			return g.st("rowid", "", "DELETE FROM %s WHERE rowid %% 17 = %d AND id >= 1000", t, g.rng.IntN(17))
		case 2:
			return g.st("rowid", "", "INSERT INTO %s(id, v) SELECT %d, rowid FROM %s WHERE id = 5", t, g.id(), t)
		}
		return g.st("rowid", "", "UPDATE %s SET v = v + 1 WHERE rowid = (SELECT max(rowid) FROM %s)", t, t)
	}},
	{"unordered", func(g *Generator) Statement {
		t := g.table()
		switch g.rng.IntN(3) {
		case 0:
			return g.st("unordered", "", "UPDATE %s SET s = (SELECT string_agg(s, ',') FROM (SELECT s FROM %s LIMIT 3)) WHERE id = 1", t, t)
		case 1:
			return g.st("unordered", "", "INSERT INTO %s(id, v) SELECT %d, any_value(v) FROM %s", t, g.id(), t)
		}
		return g.st("unordered", "", "UPDATE %s SET v = (SELECT v FROM %s LIMIT 1 OFFSET 7) WHERE id = 2", t, t)
	}},
}

// samples are the sampling clauses DuckDB takes.
var samples = []string{
	"USING SAMPLE 10%", "USING SAMPLE 5 ROWS", "TABLESAMPLE 10%", "TABLESAMPLE reservoir(5 ROWS)",
	"USING SAMPLE 20% (bernoulli)", "USING SAMPLE 10% (system, 42)",
}

// harmless returns a deterministic write that every replica applies alike.
func (g *Generator) harmless() Statement {
	t := g.table()
	switch g.rng.IntN(6) {
	case 0:
		return g.st("harmless", "", "INSERT INTO %s VALUES (%d, %d, 'h%d', %d.5)", t, g.id(), g.rng.IntN(100), g.n, g.rng.IntN(9))
	case 1:
		return g.st("harmless", "", "UPDATE %s SET v = v + 1, s = s || 'u' WHERE id = %d", t, g.rng.IntN(200))
	case 2:
		return g.st("harmless", "", "DELETE FROM %s WHERE id = %d", t, g.rng.IntN(200)+1000)
	case 3:
		return g.st("harmless", "", "INSERT INTO %s(id, v) SELECT i + %d, nextval('seq0') %% 1000 FROM range(3) r(i)", t, g.id())
	case 4:
		return g.st("harmless", "", "UPDATE %s SET d = d * 2 WHERE id %% 11 = %d", t, g.rng.IntN(11))
	}
	return g.st("harmless", "", "INSERT INTO %s(id, v, s) SELECT id + %d, v, s FROM %s WHERE id < 2", t, g.id(), t)
}

func (g *Generator) st(placement, fn, format string, args ...any) Statement {
	return Statement{SQL: fmt.Sprintf(format, args...), Placement: placement, Func: fn}
}

// follow queues a statement that uses the object needs.
func (g *Generator) follow(needs, placement, fn, format string, args ...any) {
	st := g.st(placement, fn, format, args...)
	st.needs = needs
	g.queue = append(g.queue, st)
}

func (g *Generator) table() string { return g.pool[g.rng.IntN(len(g.pool))] }

func (g *Generator) obj(prefix string) string {
	g.nextObj++
	return fmt.Sprintf("%s%d", prefix, g.nextObj)
}

func (g *Generator) id() int {
	g.nextID++
	return g.nextID
}

// anyExpr is a scalar call, or a scalar subquery over a table function.
func (g *Generator) anyExpr() (string, string) {
	if g.rng.IntN(4) == 0 {
		call, f := g.tableCall()
		return fmt.Sprintf("(SELECT count(*) FROM %s)", call), f
	}
	return g.scalarExpr()
}

// scalarExpr is a call of a volatile (or session- or clock-dependent)
// scalar, under one of the names DuckDB resolves to it.
func (g *Generator) scalarExpr() (string, string) {
	f := g.scalars[g.rng.IntN(len(g.scalars))]
	if len(g.macros) > 0 && g.rng.IntN(3) == 0 {
		f = g.macros[g.rng.IntN(len(g.macros))]
	}
	args := g.args(f)
	name := g.spell(f.Name)
	if len(args) == 0 && g.rng.IntN(5) == 0 && keywordOK[f.Name] {
		return strings.ToUpper(f.Name), f.Name
	}
	return fmt.Sprintf("%s(%s)", name, strings.Join(args, ", ")), f.Name
}

// keywordOK are the functions SQL lets one write without parentheses.
var keywordOK = map[string]bool{"current_date": true, "current_timestamp": true, "current_time": true,
	"localtimestamp": true, "localtime": true, "current_schema": true}

// tableCall is a call of a table function with plausible arguments.
func (g *Generator) tableCall() (string, string) {
	f := g.tables[g.rng.IntN(len(g.tables))]
	return fmt.Sprintf("%s(%s)", g.spell(f.Name), strings.Join(g.args(f), ", ")), f.Name
}

// spell writes name bare, quoted, upper-case, or qualified with its schema
// or catalog and schema: all name the same function.
func (g *Generator) spell(name string) string {
	switch g.rng.IntN(7) {
	case 0:
		return `"` + name + `"`
	case 1:
		return "main." + name
	case 2:
		return "system.main." + name
	case 3:
		return `"system"."main"."` + name + `"`
	case 4:
		return strings.ToUpper(name)
	case 5:
		return `main."` + name + `"`
	}
	return name
}

// args are arguments for one of f's overloads: every positional parameter,
// and now and then a named one.
func (g *Generator) args(f Function) []string {
	if len(f.Overloads) == 0 {
		return nil
	}
	ps := f.Overloads[g.rng.IntN(len(f.Overloads))]
	var out []string
	for _, p := range ps {
		typ := p.Type
		if f.Macro && typ == "" {
			typ = macroParamTypes[p.Name]
		}
		switch {
		case p.Positional:
			out = append(out, g.literal(f.Name, typ))
		case g.rng.IntN(5) == 0:
			out = append(out, p.Name+" := "+g.literal(f.Name, typ))
		}
	}
	return out
}

// macroParamTypes are the types of the parameters of DuckDB's own macros
// by their names: duckdb_functions() lists a macro's parameters untyped,
// and a call of ago() with an integer fails to bind before it reaches the
// cluster's checks.
var macroParamTypes = map[string]string{
	"i": "INTERVAL", "interval": "INTERVAL", "date": "TIMESTAMP", "timestamp": "TIMESTAMP",
	"arr": "INTEGER[]", "l": "INTEGER[]", "condition": "BOOLEAN", "include_implicit": "BOOLEAN",
	"seconds": "INTEGER", "bytes": "BIGINT", "position": "INTEGER", "dim": "INTEGER", "x": "INTEGER", "y": "INTEGER",
	"n": "VARCHAR", "v": "INTEGER", "value": "INTEGER", "weight": "INTEGER", "el": "INTEGER", "e": "INTEGER",
	"string": "VARCHAR", "text": "VARCHAR", "delimiter": "VARCHAR", "sep": "VARCHAR", "pattern": "VARCHAR",
	"message": "VARCHAR", "db_name": "VARCHAR", "privilege": "VARCHAR", "table": "VARCHAR", "expression": "INTEGER",
}

// literal is a value of type typ, kept small: sleep_ms, range and repeat
// take these as counts.
func (g *Generator) literal(fn, typ string) string {
	switch fn {
	case "nextval", "currval":
		return "'seq0'"
	case "summary":
		return "(SELECT * FROM t0 LIMIT 3)"
	case "histogram", "histogram_values":
		return []string{"t0", "v", "3", "'equi-width'"}[g.rng.IntN(4)]
	}
	switch typ {
	case "BIGINT", "INTEGER", "UBIGINT", "POINTER", "DOUBLE", "UINTEGER":
		return fmt.Sprint(g.rng.IntN(4))
	case "BOOLEAN":
		return []string{"true", "false"}[g.rng.IntN(2)]
	case "TIMESTAMP", "TIMESTAMP WITH TIME ZONE":
		return "TIMESTAMP '2024-01-01'"
	case "INTERVAL":
		return "INTERVAL 1 DAY"
	case "INTEGER[]":
		return "[1, 2]"
	case "JSON":
		return `'{"a": [1, 2]}'`
	case "VARCHAR[]":
		return "['t0']"
	case "VARCHAR":
		return strings_[g.rng.IntN(len(strings_))]
	}
	return []string{"1", "'x'", "NULL", "[1, 2]"}[g.rng.IntN(4)]
}

// strings_ are VARCHAR arguments: table and object names, SQL, JSON,
// settings and a file outside the data directory.
var strings_ = []string{"'t0'", "'main.t1'", "'SELECT 1'", "'seq0'", `'{"a": 1}'`, "'threads'", "'x'",
	"'/etc/hostname'", "'SELECT * FROM t0'", "'memory'"}

// asInt turns any value into a small INTEGER, deterministically.
func asInt(e string) string { return fmt.Sprintf("(hash(%s) %% 1000)::INTEGER", e) }

// asText turns any value into VARCHAR.
func asText(e string) string { return fmt.Sprintf("CAST(%s AS VARCHAR)", e) }

// reset forgets the tables and queued statements after the hunt dropped
// every object.
func (g *Generator) reset() {
	g.pool = append(g.pool[:0], baseTables...)
	g.queue = nil
}
