package sqltext

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrNondeterministic is returned, wrapped with the reason and what to do
// instead, for a write that would not leave every replica in the same state.
var ErrNondeterministic = errors.New("duckraft: not deterministic across replicas")

// Volatile is the set of functions whose result can differ between calls,
// by lower-case name: what duckdb_functions() lists with stability
// 'VOLATILE'. Sequence functions in it (nextval, currval) are allowed in
// writes; see docs/determinism.md.
type Volatile map[string]bool

// Plan says how to replicate one client write.
type Plan struct {
	// SQL is the statement to replicate, with the now() family replaced by
	// literals of the leader's timestamp. It is empty when Materialize is set.
	SQL string
	// Materialize is set when the write inserts values that only the leader
	// may compute (volatile functions, node-local files).
	Materialize *Materialize
	// Rerunnable is set when the leader's binder saw everything the
	// statement calls and none of it draws from a sequence, so a run that
	// is rolled back leaves no trace (DuckDB's sequences are not
	// transactional); Prove when it is also heavy: its cost is not bounded
	// by its text (it reads rows: INSERT … SELECT, UPDATE, DELETE, MERGE,
	// CREATE TABLE … AS, CREATE INDEX, ALTER). The leader proves such a
	// write before proposing it (replication.Store.Prove). Neither is part
	// of the log.
	Rerunnable, Prove bool
}

// Materialize is an INSERT split into its target and its source: run Query
// once on the leader, then insert its rows into Table on every node.
type Materialize struct {
	// Table is the target as written: possibly schema-qualified and quoted.
	Table string
	// Columns is the INSERT's column list as written (quoted names keep
	// their quotes); nil means the rows cover every column in table order.
	Columns []string
	// Query is a SELECT (or VALUES) that yields the rows to insert.
	Query string
}

// timeKind is the type a now()-family function returns.
type timeKind uint8

const (
	timeTZ        timeKind = iota + 1 // TIMESTAMP WITH TIME ZONE
	timeLocal                         // TIMESTAMP
	timeDate                          // DATE
	timeOfDayTZ                       // TIME WITH TIME ZONE
	timeOfDayOnly                     // TIME
)

// clockFuncs are the functions that read the clock. DuckDB lists them as
// CONSISTENT_WITHIN_QUERY or CONSISTENT, not VOLATILE, so they are named here.
var clockFuncs = map[string]timeKind{
	"now":                    timeTZ,
	"current_timestamp":      timeTZ,
	"get_current_timestamp":  timeTZ,
	"transaction_timestamp":  timeTZ,
	"localtimestamp":         timeLocal,
	"current_localtimestamp": timeLocal,
	"current_date":           timeDate,
	"today":                  timeDate,
	"current_time":           timeOfDayTZ,
	"get_current_time":       timeOfDayTZ,
	"localtime":              timeOfDayOnly,
	"current_localtime":      timeOfDayOnly,
}

// clockKeywords may be written without parentheses.
var clockKeywords = map[string]bool{
	"current_timestamp": true, "current_date": true, "current_time": true,
	"localtimestamp": true, "localtime": true,
}

// sequenceFuncs change or read sequences, which are database state: applied
// in log order they give every replica the same values.
var sequenceFuncs = map[string]bool{"nextval": true, "currval": true, "setval": true}

// sessionFuncs read or change state of the client's session, which the
// replicas do not have. Besides the clock and txid_current, they are what
// DuckDB 1.5.6 lists as CONSISTENT_WITHIN_QUERY: the search path
// (current_schema, current_schemas, in_search_path, which SET search_path
// changes per session) and the catalog's name (current_database, taken
// from each node's database file).
var sessionFuncs = map[string]bool{
	"setseed": true, "getvariable": true, "current_setting": true,
	"current_schema": true, "current_schemas": true, "in_search_path": true, "current_database": true,
}

// moreVolatile are node-dependent functions that DuckDB does not list as
// VOLATILE.
var moreVolatile = map[string]bool{"txid_current": true}

// nodeLocalFuncs read files, the network or node configuration, or run SQL
// hidden in a string; names starting with read_ or ending in _scan are
// treated the same way.
var nodeLocalFuncs = map[string]bool{
	"glob": true, "sniff_csv": true, "query": true, "query_table": true, "getenv": true,
	"parquet_metadata": true, "parquet_schema": true, "parquet_file_metadata": true,
	"parquet_kv_metadata": true, "parquet_bloom_probe": true,
	"duckdb_settings": true, "duckdb_extensions": true, "duckdb_memory": true,
	"duckdb_secrets": true, "duckdb_temporary_files": true, "duckdb_databases": true,
}

// isNodeLocal reports whether the function reads node-local state: the
// names above, file readers (read_*, *_scan), and DuckDB's views of the
// node (duckdb_*: settings, memory, extensions, catalog with its OIDs;
// pragma_*: database size, storage info, …).
func isNodeLocal(name string) bool {
	return nodeLocalFuncs[name] || strings.HasPrefix(name, "read_") || strings.HasSuffix(name, "_scan") ||
		strings.HasPrefix(name, "duckdb_") || strings.HasPrefix(name, "pragma_")
}

// Deterministic turns one client write into what the leader replicates: the
// now() family becomes literals of ts (in UTC, as DuckDB's one timestamp per
// transaction), an INSERT whose values need volatile functions or node-local
// files becomes a Materialize plan, and what cannot be made deterministic is
// refused with an error wrapping ErrNondeterministic.
func Deterministic(st Statement, ts time.Time, volatile Volatile) (Plan, error) {
	if err := st.Err(); err != nil {
		return Plan{}, fmt.Errorf("sqltext: %w", err)
	}
	s := newStmt(st)
	if n := s.statements(); n != 1 {
		return Plan{}, fmt.Errorf("sqltext: Deterministic takes one statement, got %d", n)
	}
	verb, v := st.Verb()
	f, err := s.findings(volatile)
	if err != nil {
		return Plan{}, err
	}
	if err := check(s, verb, v, f); err != nil {
		return Plan{}, err
	}
	if verb == "insert" && (f.volatile != "" || f.nodeLocal != "") {
		m, err := s.splitInsert(v, f)
		if err != nil {
			return Plan{}, err
		}
		m.Query, err = rewriteClock(m.Query, ts)
		if err != nil {
			return Plan{}, err
		}
		return Plan{Materialize: m}, nil
	}
	return Plan{SQL: s.rewrite(f.clock, ts)}, nil
}

// refuse builds the error for a refused write.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNondeterministic}, args...)...)
}

// check applies the rules per statement kind; verb and v come from Verb.
func check(s *stmt, verb string, v int, f findings) error {
	upper := strings.ToUpper(verb)
	switch verb {
	case "begin", "start", "commit", "end", "rollback", "abort":
		return refuse("%s is transaction control, not a replicated statement; duckraft's router groups a transaction's writes into one entry", upper)
	case "set", "reset", "pragma", "use", "prepare", "deallocate":
		return refuse("%s changes session state, which is not replicated; the router runs it on the client's own session", upper)
	case "execute":
		return refuse("EXECUTE runs a statement prepared in the client's session, which the replicas do not have; send the statement itself with its parameters")
	case "attach", "detach", "install", "load", "import", "export", "copy":
		return refuse("%s reads or writes files local to each node; load data with INSERT INTO t SELECT … FROM read_csv(…), which duckraft reads once on the leader and replicates as data", upper)
	case "explain":
		if s.word(v+1, "analyze") || s.word(v+1, "analyse") {
			return refuse("EXPLAIN ANALYZE of a write would run it on every replica and report only one; run the write, and EXPLAIN (without ANALYZE) it if you need the plan")
		}
		return nil
	case "update":
		if s.word(v+1, "extensions") {
			return refuse("UPDATE EXTENSIONS changes the extensions installed on each node; run it on each node")
		}
	case "insert", "delete", "merge", "create", "drop", "alter", "truncate", "comment", "call",
		"select", "from", "values", "table", "pivot", "unpivot":
	default:
		return refuse("duckraft does not know how to replicate %s statements", upper)
	}
	if f.session != "" {
		return refuse("%s() depends on the client's session, which the replicas do not have; pass the value as a literal or parameter", f.session)
	}
	switch verb {
	case "insert":
		return nil // volatile values and node-local sources are materialized
	case "create":
		return checkCreate(s, v, f)
	}
	if f.nodeLocal != "" {
		return refuse("%s reads files local to each node in %s; load the data with INSERT INTO t SELECT … FROM it, which duckraft reads once on the leader and replicates as data", f.nodeLocal, upper)
	}
	switch verb {
	case "update", "delete", "merge", "alter", "call", "truncate":
		if f.volatile != "" {
			return refuse("%s() in %s would give each replica a different value; compute the values in the client and send them as literals or parameters, or use INSERT … SELECT, which duckraft evaluates once on the leader", f.volatile, upper)
		}
		if verb == "alter" && len(f.clock) > 0 {
			return refuse("%s in ALTER TABLE would be evaluated by each replica, for existing rows now and for new rows on insert; drop the default and give the value in INSERT, where duckraft uses the leader's timestamp", f.clockName)
		}
	}
	return nil
}

// checkCreate refuses expressions that a CREATE stores and each replica
// evaluates later: column defaults, generated columns, views and macros.
// CREATE TABLE … AS evaluates its query once, so the clock is rewritten there.
func checkCreate(s *stmt, v int, f findings) error {
	for k := v + 1; k < len(s.sig) && k <= v+3; k++ {
		if s.word(k, "temp") || s.word(k, "temporary") {
			return refuse("temporary objects belong to one connection and cannot be replicated; create a regular table or view")
		}
	}
	if s.word(v+1, "secret") || s.word(v+2, "secret") || s.word(v+3, "secret") {
		return refuse("secrets are node-local configuration; create them on each node")
	}
	if s.createTableAs(v) {
		if f.volatile != "" {
			return refuse("%s() in CREATE TABLE … AS cannot be evaluated once for all replicas; create the table with its column types first, then INSERT INTO t SELECT …, which duckraft evaluates once on the leader", f.volatile)
		}
		if f.nodeLocal != "" {
			return refuse("%s in CREATE TABLE … AS reads files local to each node; create the table with its column types first, then INSERT INTO t SELECT …, which duckraft reads once on the leader", f.nodeLocal)
		}
		return nil
	}
	what := "a column default or generated column"
	if !s.createsTable(v) {
		what = "a stored view, macro or function body"
	}
	switch {
	case f.volatile != "":
		return refuse("%s() in %s would be evaluated separately on each replica; compute the values in the client or with INSERT … SELECT, which duckraft evaluates once on the leader", f.volatile, what)
	case len(f.clock) > 0:
		return refuse("%s in %s would be evaluated with each replica's clock; give the value in INSERT (duckraft uses the leader's timestamp there) or, in a macro, take it as a parameter", f.clockName, what)
	case f.nodeLocal != "":
		return refuse("%s in %s would read files local to each replica; load the data with INSERT INTO t SELECT … FROM it, which duckraft reads once on the leader", f.nodeLocal, what)
	case f.sequence && !s.createsTable(v):
		return refuse("nextval()/currval() in %s would change or read a sequence on whichever node reads it, and reads are not replicated; call it in the write itself (INSERT … VALUES (nextval('s')), or a column DEFAULT)", what)
	case f.sequence && s.generatesWithSequence(v):
		return refuse("nextval()/currval() in a generated column would be evaluated on every read of the node that reads it, and reads are not replicated; use DEFAULT nextval('s') instead, which the insert evaluates once")
	case !s.createsTable(v) && s.namesRowID():
		return refuse("rowid in %s would hide node-local row numbers (a snapshot restore or a checkpoint renumbers rows) from the writes that use it; select a key column instead", what)
	case !s.createsTable(v) && samples(s.sig):
		return refuse("sampling in %s would pick other rows on each replica in the writes that use it; sample in the statement that needs it (INSERT INTO t SELECT … USING SAMPLE …, which duckraft evaluates once on the leader)", what)
	}
	return nil
}

// Samples reports whether the statement samples rows: USING SAMPLE or
// TABLESAMPLE outside strings and comments. Text the lexer cannot split
// does not.
func (s Statement) Samples() bool {
	if s.err != nil {
		return false
	}
	return samples(s.sig)
}

// samples is Samples on a statement's significant tokens.
func samples(sig []Token) bool {
	for k, t := range sig {
		if t.Is("tablesample") || t.Is("sample") && k > 0 && sig[k-1].Is("using") {
			return true
		}
	}
	return false
}

// namesRowID reports whether the statement names rowid (bare or quoted)
// other than as a function.
func (s *stmt) namesRowID() bool {
	for k := range s.sig {
		if t := s.at(k); (t.Kind == TokIdent || t.Kind == TokQuotedIdent) && funcName(t) == "rowid" && !s.punct(k+1, '(') {
			return true
		}
	}
	return false
}

// stmt is a Statement as the rules read it: its text and its significant
// tokens, by index.
type stmt struct {
	sql string
	sig []Token
}

func newStmt(st Statement) *stmt { return &stmt{sql: st.Text, sig: st.sig} }

// at returns the k-th significant token, or a zero Token past the end.
func (s *stmt) at(k int) Token {
	if k < 0 || k >= len(s.sig) {
		return Token{}
	}
	return s.sig[k]
}

func (s *stmt) word(k int, w string) bool { return s.at(k).Is(w) }

func (s *stmt) punct(k int, c byte) bool { return s.at(k).IsPunct(c) }

// end returns the offset where significant token k ends.
func (s *stmt) end(k int) int { t := s.at(k); return t.Pos + len(t.Text) }

// statements counts the statements, ignoring a trailing semicolon.
func (s *stmt) statements() int {
	n, open := 0, false
	for k := range s.sig {
		if s.punct(k, ';') {
			open = false
			continue
		}
		if !open {
			n++
			open = true
		}
	}
	return n
}

// clockUse is one use of a now()-family function: significant tokens
// from..to (inclusive) are replaced by a literal of kind.
type clockUse struct {
	from, to int
	kind     timeKind
}

// findings is what a scan of a statement's function calls found; names are
// of the first occurrence, for messages.
type findings struct {
	clock     []clockUse
	clockName string // as written, e.g. "now()" or "current_date"
	volatile  string
	nodeLocal string // a function, "name()", or a quoted file name
	session   string
	sequence  bool
}

// specialSyntax are functions whose arguments use FROM as a keyword, so a
// string after FROM inside them is not a file.
var specialSyntax = map[string]bool{"trim": true, "substring": true, "extract": true, "overlay": true, "position": true}

// findings scans the statement for function calls and file references.
func (s *stmt) findings(volatile Volatile) (findings, error) {
	var f findings
	var parens []string // for each open parenthesis, the function it calls or ""
	for k := 0; k < len(s.sig); k++ {
		t := s.at(k)
		switch {
		case t.IsPunct('('):
			opener := ""
			if p := s.at(k - 1); p.Kind == TokIdent || p.Kind == TokQuotedIdent {
				opener = funcName(p)
			}
			parens = append(parens, opener)
		case t.IsPunct(')'):
			if len(parens) > 0 {
				parens = parens[:len(parens)-1]
			}
		case t.Kind == TokString:
			inSpecial := len(parens) > 0 && specialSyntax[parens[len(parens)-1]]
			if !inSpecial && (s.word(k-1, "from") || s.word(k-1, "join") || s.word(k-1, "using")) && f.nodeLocal == "" {
				f.nodeLocal = "the file " + t.Text
			}
		case t.Kind == TokIdent || t.Kind == TokQuotedIdent:
			if err := s.call(k, volatile, &f); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

// generatesWithSequence reports whether a CREATE TABLE (verb at v) has a
// generated column, `[GENERATED ALWAYS] AS (expr)`, whose expression calls
// nextval or currval. DuckDB computes generated columns on read.
func (s *stmt) generatesWithSequence(v int) bool {
	for k := v + 1; k < len(s.sig); k++ {
		if !s.word(k, "as") || !s.punct(k+1, '(') {
			continue
		}
		depth := 0
		for j := k + 1; j < len(s.sig); j++ {
			switch {
			case s.punct(j, '('):
				depth++
			case s.punct(j, ')'):
				depth--
			case sequenceFuncs[funcName(s.at(j))] && s.punct(j+1, '('):
				return true
			}
			if depth == 0 {
				break
			}
		}
	}
	return false
}

// funcName is the lower-case name a word or quoted identifier gives a
// function: DuckDB resolves "random"() and "RANDOM"() to random, as it
// looks functions up case-insensitively.
func funcName(t Token) string { return strings.ToLower(t.Name()) }

// call records what identifier k (a word or a quoted identifier) is, when
// it is a function call or a clock keyword.
func (s *stmt) call(k int, volatile Volatile, f *findings) error {
	name := funcName(s.at(k))
	qualified := s.punct(k-1, '.')
	isCall := s.punct(k+1, '(')
	if !isCall && s.at(k).Kind == TokQuotedIdent {
		return nil // a quoted column, never a clock keyword
	}
	if kind, ok := clockFuncs[name]; ok {
		switch {
		case isCall && qualified:
			return refuse("write %s() without a qualifier so that duckraft can replace it with the leader's timestamp", name)
		case isCall && !s.punct(k+2, ')'):
			return refuse("%s() takes no arguments here; duckraft replaces it with the leader's timestamp", name)
		case isCall:
			f.addClock(clockUse{k, k + 2, kind}, name+"()")
		case clockKeywords[name] && !qualified:
			f.addClock(clockUse{k, k, kind}, name)
		}
		return nil
	}
	if !isCall || s.objectName(k) {
		return nil
	}
	switch {
	case sequenceFuncs[name]:
		f.sequence = true
	case sessionFuncs[name]:
		if f.session == "" {
			f.session = name
		}
	case isNodeLocal(name):
		if f.nodeLocal == "" {
			f.nodeLocal = name + "()"
		}
	case volatile[name] || moreVolatile[name]:
		if f.volatile == "" {
			f.volatile = name
		}
	}
	return nil
}

// namingWords precede the name of the object a statement creates or
// inserts into, which may be followed by a parenthesis without being a call.
var namingWords = map[string]bool{
	"into": true, "table": true, "exists": true, "view": true, "macro": true,
	"function": true, "index": true, "sequence": true, "type": true,
}

// objectName reports whether word k names a table or other object, as in
// INSERT INTO random (a) or CREATE TABLE main.uuid (a INT).
func (s *stmt) objectName(k int) bool {
	for s.punct(k-1, '.') {
		k -= 2
	}
	p := s.at(k - 1)
	return p.Kind == TokIdent && namingWords[strings.ToLower(p.Text)]
}

func (f *findings) addClock(u clockUse, name string) {
	if len(f.clock) == 0 {
		f.clockName = name
	}
	f.clock = append(f.clock, u)
}

// rewrite returns the statement with each clock use replaced by a literal.
func (s *stmt) rewrite(uses []clockUse, ts time.Time) string {
	if len(uses) == 0 {
		return s.sql
	}
	var b strings.Builder
	last := 0
	for _, u := range uses {
		b.WriteString(s.sql[last:s.at(u.from).Pos])
		b.WriteString(clockLiteral(u.kind, ts))
		last = s.end(u.to)
	}
	b.WriteString(s.sql[last:])
	return b.String()
}

// rewriteClock rewrites the clock uses of sql, a query made of parts of a
// statement: a text of its own, which it lexes.
func rewriteClock(sql string, ts time.Time) (string, error) {
	st := Parse(sql)
	if err := st.Err(); err != nil {
		return "", fmt.Errorf("sqltext: %w", err)
	}
	s := newStmt(st)
	f, err := s.findings(nil)
	if err != nil {
		return "", err
	}
	return s.rewrite(f.clock, ts), nil
}

// clockLiteral renders ts, in UTC and to the microsecond as DuckDB keeps it,
// as a typed literal of kind.
func clockLiteral(kind timeKind, ts time.Time) string {
	ts = ts.UTC().Truncate(time.Microsecond)
	switch kind {
	case timeTZ:
		return "TIMESTAMPTZ '" + ts.Format("2006-01-02 15:04:05.000000") + "+00'"
	case timeLocal:
		return "TIMESTAMP '" + ts.Format("2006-01-02 15:04:05.000000") + "'"
	case timeDate:
		return "DATE '" + ts.Format("2006-01-02") + "'"
	case timeOfDayTZ:
		return "TIMETZ '" + ts.Format("15:04:05.000000") + "+00'"
	}
	return "TIME '" + ts.Format("15:04:05.000000") + "'"
}

// createTableAs reports whether the CREATE at significant token v is
// CREATE TABLE … AS query: an AS outside any parentheses.
func (s *stmt) createTableAs(v int) bool {
	if !s.createsTable(v) {
		return false
	}
	depth := 0
	for k := v + 1; k < len(s.sig); k++ {
		switch {
		case s.punct(k, '('):
			depth++
		case s.punct(k, ')'):
			depth--
		case depth == 0 && s.word(k, "as"):
			return true
		}
	}
	return false
}

// createsTable reports whether the CREATE at v creates a table.
func (s *stmt) createsTable(v int) bool {
	for k := v + 1; k < len(s.sig) && k <= v+4; k++ {
		if s.word(k, "table") {
			return true
		}
	}
	return false
}

// splitInsert splits the INSERT at significant token v into target and
// source, refusing the forms whose meaning a plain append cannot keep.
func (s *stmt) splitInsert(v int, f findings) (*Materialize, error) {
	why := f.volatile + "()"
	if f.volatile == "" {
		why = f.nodeLocal
	}
	if f.sequence {
		return nil, refuse("%s must be evaluated once on the leader, but nextval()/currval() in the same INSERT must run on every replica; give the sequence column DEFAULT nextval('seq') and leave it out of the INSERT's column list", why)
	}
	k := v + 1
	if s.word(k, "or") {
		return nil, refuse("%s in INSERT OR %s: duckraft evaluates it once on the leader only for plain INSERT … SELECT/VALUES; compute the values in the client or use a plain INSERT", why, strings.ToUpper(s.at(k+1).Text))
	}
	if s.word(k, "into") {
		k++
	}
	m := &Materialize{}
	first := k
	for s.at(k).Kind == TokIdent || s.at(k).Kind == TokQuotedIdent {
		if !s.punct(k+1, '.') {
			break
		}
		k += 2
	}
	if t := s.at(k); t.Kind != TokIdent && t.Kind != TokQuotedIdent {
		return nil, fmt.Errorf("sqltext: INSERT without a table name at offset %d", t.Pos)
	}
	m.Table = s.sql[s.at(first).Pos:s.end(k)]
	k++
	if s.word(k, "as") || s.word(k, "by") {
		return nil, refuse("%s in INSERT with %s %s: duckraft evaluates it once on the leader only for plain INSERT INTO t [(columns)] SELECT/VALUES; drop the %s clause", why, strings.ToUpper(s.at(k).Text), s.at(k+1).Text, strings.ToUpper(s.at(k).Text))
	}
	if s.punct(k, '(') && !startsQuery(s.at(k+1)) {
		m.Columns = []string{}
		for k++; !s.punct(k, ')'); k++ {
			t := s.at(k)
			if t.Kind != TokIdent && t.Kind != TokQuotedIdent {
				return nil, fmt.Errorf("sqltext: unexpected %q in INSERT column list at offset %d", t.Text, t.Pos)
			}
			m.Columns = append(m.Columns, t.Text)
			if k++; !s.punct(k, ',') && !s.punct(k, ')') {
				return nil, fmt.Errorf("sqltext: unexpected %q in INSERT column list at offset %d", s.at(k).Text, s.at(k).Pos)
			}
			if s.punct(k, ')') {
				break
			}
		}
		k++
	}
	src := k
	if !startsQuery(s.at(src)) {
		return nil, refuse("%s in INSERT … %s: duckraft evaluates it once on the leader only for INSERT … SELECT/VALUES", why, strings.ToUpper(s.at(src).Text))
	}
	end := len(s.sig)
	for k = src; k < end; k++ {
		if s.punct(k, ';') {
			end = k
		}
	}
	depth := 0
	for k = src; k < end; k++ {
		switch {
		case s.punct(k, '('):
			depth++
		case s.punct(k, ')'):
			depth--
		case depth > 0:
		case s.word(k, "returning"), s.word(k, "on") && s.word(k+1, "conflict"):
			return nil, refuse("%s in INSERT … %s: duckraft evaluates it once on the leader only for plain INSERT … SELECT/VALUES; compute the values in the client, or drop the %s clause", why, strings.ToUpper(s.at(k).Text), strings.ToUpper(s.at(k).Text))
		}
		if s.word(k, "default") && s.word(src, "values") {
			return nil, refuse("%s in INSERT … VALUES with DEFAULT: duckraft evaluates the values once on the leader, where it cannot apply column defaults; list the columns you give instead", why)
		}
	}
	query := s.sql[s.at(src).Pos:s.end(end-1)]
	if v > 0 { // a WITH clause before INSERT belongs to the query
		if s.word(src, "values") {
			query = "SELECT * FROM (" + query + ")"
		}
		query = strings.TrimSpace(s.sql[s.at(0).Pos:s.at(v).Pos]) + " " + query
	}
	m.Query = query
	return m, nil
}

// startsQuery reports whether t can start the source query of an INSERT.
func startsQuery(t Token) bool {
	for _, w := range []string{"select", "values", "from", "with", "table", "pivot", "unpivot"} {
		if t.Is(w) {
			return true
		}
	}
	return t.IsPunct('(')
}

// Verb returns a statement's main keyword in lower case and its index among
// the significant tokens: the first word, except that WITH … is looked
// through to the SELECT, INSERT, UPDATE, DELETE or MERGE it introduces, and
// a statement that opens with a parenthesis is a "select". It returns ""
// for a statement without words. toks may be a statement's tokens or only
// its significant ones.
func Verb(toks []Token) (string, int) { return verbOf(SignificantTokens(toks)) }

// verbOf is Verb on significant tokens.
func verbOf(sig []Token) (string, int) {
	k := 0
	if len(sig) == 0 {
		return "", -1
	}
	if sig[0].IsPunct('(') {
		return "select", 0
	}
	if sig[0].Kind != TokIdent {
		return "", -1
	}
	if !sig[0].Is("with") {
		return strings.ToLower(sig[0].Text), 0
	}
	depth := 0
	for k = 1; k < len(sig); k++ {
		t := sig[k]
		switch {
		case t.IsPunct('('):
			depth++
		case t.IsPunct(')'):
			depth--
		case depth == 0 && t.Kind == TokIdent:
			switch w := strings.ToLower(t.Text); w {
			case "select", "insert", "update", "delete", "merge", "from", "values", "table", "pivot", "unpivot":
				return w, k
			}
		}
	}
	return "with", 0
}

// FuncClass is what calling a function means for a replicated write
// (docs/determinism.md): the rules of Deterministic, by function name, for
// callers that find the calls another way (DuckDB's binder, package
// routing/analyze).
type FuncClass uint8

// Function classes.
const (
	// FuncPlain gives the same result on every replica.
	FuncPlain FuncClass = iota
	// FuncClock reads the clock (now(), current_date, …).
	FuncClock
	// FuncSequence reads or advances a sequence: replicated in log order.
	FuncSequence
	// FuncSession depends on the client's session (setseed, getvariable,
	// current_setting).
	FuncSession
	// FuncNodeLocal reads files, the network or the node's configuration.
	FuncNodeLocal
	// FuncVolatile differs between calls (random, uuid, …).
	FuncVolatile
)

// ClassifyFunction returns the class of the function with the given name
// (any case), with volatile as DuckDB lists it.
func ClassifyFunction(name string, volatile Volatile) FuncClass {
	name = strings.ToLower(name)
	switch {
	case clockFuncs[name] != 0:
		return FuncClock
	case sequenceFuncs[name]:
		return FuncSequence
	case sessionFuncs[name]:
		return FuncSession
	case isNodeLocal(name):
		return FuncNodeLocal
	case volatile[name] || moreVolatile[name]:
		return FuncVolatile
	}
	return FuncPlain
}

// Materialized returns the Materialize plan of an INSERT whose values must
// be computed once on the leader although its text shows no reason to,
// because DuckDB's binder found one (a macro or view hiding random(), a
// sample, rowid): why says which, for the refusals of the forms a plain
// append cannot keep. sequence is set when the statement also calls
// nextval or currval, which must run on every replica instead.
func Materialized(st Statement, ts time.Time, why string, sequence bool) (Plan, error) {
	if err := st.Err(); err != nil {
		return Plan{}, fmt.Errorf("sqltext: %w", err)
	}
	s := newStmt(st)
	if n := s.statements(); n != 1 {
		return Plan{}, fmt.Errorf("sqltext: Materialized takes one statement, got %d", n)
	}
	verb, v := st.Verb()
	if verb != "insert" {
		return Plan{}, fmt.Errorf("sqltext: Materialized takes an INSERT, not %s", strings.ToUpper(verb))
	}
	m, err := s.splitInsert(v, findings{nodeLocal: why, sequence: sequence})
	if err != nil {
		return Plan{}, err
	}
	if m.Query, err = rewriteClock(m.Query, ts); err != nil {
		return Plan{}, err
	}
	return Plan{Materialize: m}, nil
}

// rowWords are the words that let a write read rows: a query (SELECT,
// FROM, TABLE u, PIVOT), a change of existing rows (UPDATE, DELETE, MERGE)
// or ALTER TABLE (ADD COLUMN … DEFAULT fills every row).
var rowWords = map[string]bool{
	"select": true, "from": true, "table": true, "pivot": true, "unpivot": true,
	"update": true, "delete": true, "merge": true,
}

// namingTable are the words before a TABLE that only names the table a
// statement creates, drops, truncates or comments on.
var namingTable = map[string]bool{
	"create": true, "replace": true, "temp": true, "temporary": true, "drop": true,
	"truncate": true, "on": true,
}

// ReadsRows reports whether a write may read rows while it writes, by its
// words: the applier then runs it on one DuckDB thread, so that nextval
// hands out values, and floating-point sums add up, in the same order on
// every node (docs/determinism.md, rule 2). A macro can hide a query from
// it; the leader's binder (routing/analyze) makes such a write one the
// leader evaluates, or refuses it. Text the lexer cannot split counts as
// reading rows.
func (s Statement) ReadsRows() bool {
	if s.err != nil {
		return true
	}
	sig := s.sig
	for k, t := range sig {
		if t.Kind != TokIdent || !rowWords[strings.ToLower(t.Text)] {
			continue
		}
		if t.Is("table") && k > 0 && sig[k-1].Kind == TokIdent && namingTable[strings.ToLower(sig[k-1].Text)] {
			continue
		}
		return true
	}
	return false
}

// Names lists, lower-cased and without repeats, the functions the
// statement calls (clock keywords written without parentheses included)
// and every word of it that may name a view or macro. Callers look those
// definitions up: DuckDB 2.0's binder folds a call whose arguments are
// constant into a constant, so a bound plan no longer shows a clock or
// session function hidden in a macro or view (routing/analyze). Text the
// lexer cannot split gives its error.
func (s Statement) Names() (calls, words []string, err error) {
	if s.err != nil {
		return nil, nil, s.err
	}
	sig := s.sig
	for k, t := range sig {
		if t.Kind != TokIdent && t.Kind != TokQuotedIdent {
			continue
		}
		name := funcName(t)
		isCall := k+1 < len(sig) && sig[k+1].IsPunct('(')
		if (isCall || (t.Kind == TokIdent && clockKeywords[name])) && !slices.Contains(calls, name) {
			calls = append(calls, name)
		}
		if !slices.Contains(words, name) {
			words = append(words, name)
		}
	}
	return calls, words, nil
}

// Returns reports whether the statement has a RETURNING clause: the word
// outside strings, comments and quoted names (DuckDB reserves it). Text the
// lexer cannot split counts as returning rows.
func (s Statement) Returns() bool {
	if s.err != nil {
		return true
	}
	for _, t := range s.sig {
		if t.Kind == TokIdent && t.Is("returning") {
			return true
		}
	}
	return false
}
