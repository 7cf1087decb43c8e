// Package access keeps a client's statements away from what belongs to the
// node rather than to the database: the applier's schema (_duckraft: the
// applied index, other clients' write results, staged rows) and the node's
// own files (its DuckDB file and WAL, the Raft data, tokens, keys). Both are
// reachable through DuckDB by a name in a string as well as by an
// identifier, and by a name computed while the statement runs; DuckDB
// itself keeps the database file and its WAL readable even with
// enable_external_access off (it puts them in allowed_paths). A Guard
// judges a statement, before it runs anywhere, by its tokens (a
// sqltext.Statement), so it sees every kind of statement alike.
package access

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqltext"
)

// ErrHiddenSchema refuses a statement that names a schema the node keeps
// for itself.
var ErrHiddenSchema = errors.New("duckraft: this schema holds the node's own bookkeeping (the applied index, " +
	"other clients' write results); no client may read or change it")

// ErrComputedName refuses a statement that passes a table, schema, query
// or file name computed while it runs ('a' || 'b', a parameter, a column,
// a subquery): what it would name cannot be checked before it runs.
var ErrComputedName = errors.New("duckraft: a table, schema, query or file name must be written as a string " +
	"literal here, not computed while the statement runs, so that the node can check what it names")

// ErrProtectedFile refuses a statement that reads or writes one of the
// node's own files.
var ErrProtectedFile = errors.New("duckraft: this file belongs to the node (its database, WAL, Raft data, tokens " +
	"or keys); no client may read or write it")

// Names is what a statement's text names that a Guard judges.
type Names struct {
	// Identifiers are the identifiers, bare or quoted (unquoted,
	// lower-cased), and the strings DuckDB takes as names of tables,
	// schemas or queries (the arguments of query_table(), of the pragma_*
	// functions, of SET search_path, …), decoded.
	Identifiers []string
	// Strings are the decoded string literals DuckDB takes as names or
	// SQL text, adjacent literals joined as the parser joins them.
	Strings []string
	// Computed names the call or setting that takes a name computed while
	// the statement runs, or is empty.
	Computed string
	// Paths are the local file paths the text names as files, as written
	// (decoded): the path arguments of file readers, strings in table
	// position (FROM 'x.csv'), the files of COPY, EXPORT, IMPORT, ATTACH,
	// INSTALL and LOAD.
	Paths []string
}

// maxDepth bounds the nesting of query('…') texts inspected inside others.
const maxDepth = 4

// Inspect lists what st, one or more statements, names. Text the lexer
// cannot split is an error.
func Inspect(st sqltext.Statement) (Names, error) {
	var n Names
	if err := inspect(st, &n, 0); err != nil {
		return Names{}, err
	}
	return n, nil
}

// fileFunctions are table functions whose first argument is a file path
// or a list of them, besides read_* and *_scan.
var fileFunctions = map[string]bool{
	"glob": true, "sniff_csv": true, "parquet_metadata": true, "parquet_schema": true, "parquet_file_metadata": true,
	"parquet_kv_metadata": true, "parquet_bloom_probe": true, "parquet_full_metadata": true,
}

// isFileFunction reports whether a call of name reads files named by its
// first argument.
func isFileFunction(name string) bool {
	return fileFunctions[name] || strings.HasPrefix(name, "read_") || strings.HasSuffix(name, "_scan")
}

// nameFunctions take the name of a table, schema, sequence or database,
// or a query, as their first argument: query_table and DuckDB's own
// histogram macros over it read a table, or a file by a name with a
// slash; the pragma_* functions report on a table; query runs its text.
var nameFunctions = map[string]bool{
	"query": true, "query_table": true, "histogram": true, "histogram_values": true,
	"pragma_table_info": true, "pragma_storage_info": true, "pragma_show": true, "pragma_metadata_info": true,
	"duckdb_table_sample": true, "checkpoint": true, "force_checkpoint": true,
	"nextval": true, "currval": true, "setval": true,
}

// opaqueFunctions run a statement hidden in their argument in a form the
// guard does not read (a serialized parse tree).
var opaqueFunctions = map[string]bool{"json_execute_serialized_sql": true}

// namedSettings are the settings whose value names schemas.
var namedSettings = map[string]bool{"search_path": true, "schema": true}

func inspect(st sqltext.Statement, n *Names, depth int) error {
	if err := st.Err(); err != nil {
		return fmt.Errorf("access: %w", err)
	}
	for _, stmt := range splitStatements(st.Significant()) {
		if err := inspectStatement(stmt, n, depth); err != nil {
			return err
		}
	}
	return nil
}

// splitStatements splits significant tokens at semicolons outside
// parentheses.
func splitStatements(sig []sqltext.Token) [][]sqltext.Token {
	var out [][]sqltext.Token
	start, depth := 0, 0
	for k, t := range sig {
		switch {
		case t.IsPunct('('):
			depth++
		case t.IsPunct(')'):
			depth--
		case t.IsPunct(';') && depth <= 0:
			if k > start {
				out = append(out, sig[start:k])
			}
			start = k + 1
		}
	}
	if start < len(sig) {
		out = append(out, sig[start:])
	}
	return out
}

func inspectStatement(sig []sqltext.Token, n *Names, depth int) error {
	tables := tablePositions(sig)
	for k := 0; k < len(sig); k++ {
		t := sig[k]
		switch t.Kind {
		case sqltext.TokIdent, sqltext.TokQuotedIdent:
			n.Identifiers = append(n.Identifiers, t.Name())
			if k+1 < len(sig) && sig[k+1].IsPunct('(') {
				if err := inspectCall(sig, k, n, depth); err != nil {
					return err
				}
			}
			// DuckDB reads a quoted name in table position as a file
			// when it looks like one ("dir/x.csv").
			if t.Kind == sqltext.TokQuotedIdent && tables[k] && strings.ContainsRune(t.Name(), '/') {
				n.Paths = append(n.Paths, t.Name())
			}
		case sqltext.TokString:
			s, next := joinedString(sig, k)
			if tables[k] {
				n.Paths = append(n.Paths, s)
			}
			k = next - 1
		}
	}
	// EXPLAIN ANALYZE runs the statement it explains.
	sig = explained(sig)
	verb := ""
	if len(sig) > 0 && sig[0].Kind == sqltext.TokIdent {
		verb = strings.ToLower(sig[0].Text)
	}
	switch verb {
	case "set", "reset", "pragma", "use", "call":
		// Their strings are names of settings' values, tables, schemas.
		for k := 0; k < len(sig); k++ {
			if sig[k].Kind == sqltext.TokString {
				s, next := joinedString(sig, k)
				n.Strings = append(n.Strings, s)
				k = next - 1
			}
		}
		if verb == "set" || verb == "reset" {
			inspectSetting(sig, n)
		}
	case "copy", "export", "import", "attach", "install", "load":
		// Their strings and quoted names outside parentheses are files;
		// inside them are a COPY's query and its options.
		depth := 0
		for k := 0; k < len(sig); k++ {
			switch {
			case sig[k].IsPunct('('):
				depth++
			case sig[k].IsPunct(')'):
				depth--
			case depth != 0:
			case sig[k].Kind == sqltext.TokString:
				s, next := joinedString(sig, k)
				n.Paths = append(n.Paths, s)
				n.Strings = append(n.Strings, s)
				k = next - 1
			case sig[k].Kind == sqltext.TokQuotedIdent && strings.ContainsRune(sig[k].Name(), '/'):
				n.Paths = append(n.Paths, sig[k].Name())
			}
		}
	}
	return nil
}

// explained returns the statement an EXPLAIN explains (past ANALYZE and an
// option list), or sig itself.
func explained(sig []sqltext.Token) []sqltext.Token {
	if len(sig) == 0 || !sig[0].Is("explain") {
		return sig
	}
	k := 1
	if k < len(sig) && (sig[k].Is("analyze") || sig[k].Is("analyse")) {
		k++
	} else if k < len(sig) && sig[k].IsPunct('(') {
		if end := sqltext.Closing(sig, k); end > 0 {
			k = end + 1
		}
	}
	return sig[k:]
}

// tablePositions marks the tokens of sig that stand where a table does,
// where DuckDB reads a string as a file: right after FROM, JOIN, USING or
// a tableVerb, or after a comma of a FROM list (FROM t, 'x.csv').
func tablePositions(sig []sqltext.Token) []bool {
	out := make([]bool, len(sig))
	var inFrom []bool // per parenthesis depth
	depth := 0
	set := func(v bool) {
		for len(inFrom) <= depth {
			inFrom = append(inFrom, false)
		}
		inFrom[depth] = v
	}
	for k, t := range sig {
		switch {
		case t.IsPunct('('):
			depth++
			set(false)
			continue
		case t.IsPunct(')'):
			if depth > 0 {
				depth--
			}
			continue
		}
		if k+1 >= len(sig) {
			break
		}
		switch {
		case t.Is("from") || t.Is("join") || t.Is("using"):
			set(t.Is("from") || t.Is("join"))
			out[k+1] = true
		case tableVerbs[strings.ToLower(t.Text)] && t.Kind == sqltext.TokIdent:
			out[k+1] = true
		case t.IsPunct(',') && depth < len(inFrom) && inFrom[depth]:
			out[k+1] = true
		case t.Kind == sqltext.TokIdent && clauseWords[strings.ToLower(t.Text)]:
			set(false)
		}
	}
	return out
}

// tableVerbs are the words a table follows as it follows FROM:
// SUMMARIZE 'x.csv', DESCRIBE, PIVOT … (a backup, being a DuckDB file, is
// read whole that way).
var tableVerbs = map[string]bool{
	"describe": true, "desc": true, "summarize": true, "pivot": true, "unpivot": true, "table": true, "show": true,
}

// clauseWords end a FROM list.
var clauseWords = map[string]bool{
	"where": true, "group": true, "having": true, "qualify": true, "window": true, "order": true, "limit": true,
	"offset": true, "union": true, "except": true, "intersect": true, "returning": true, "select": true, "on": true,
	"set": true, "values": true, "using": true, "pivot": true, "unpivot": true,
}

// inspectCall judges the call at sig[k] (a name followed by a
// parenthesis): the names, queries and files its arguments give.
func inspectCall(sig []sqltext.Token, k int, n *Names, depth int) error {
	name := strings.ToLower(sig[k].Name())
	file, named := isFileFunction(name), nameFunctions[name]
	if opaqueFunctions[name] {
		n.Computed = firstNonEmpty(n.Computed, name+"()")
		return nil
	}
	if !file && !named {
		return nil
	}
	end := sqltext.Closing(sig, k+1)
	if end < 0 {
		end = len(sig)
	}
	args := sig[k+2 : end]
	first := firstArgument(args)
	values, ok := literals(first)
	if !ok && (name == "histogram" || name == "histogram_values") && identifierChain(first) {
		// DuckDB's histogram macros name their table by an identifier
		// (histogram(s.t, col)), which is among the identifiers judged.
		// Elsewhere a bare name there is a column or a macro's parameter,
		// which stands for whatever the caller passes.
		values, ok = nil, true
	}
	if !ok {
		n.Computed = firstNonEmpty(n.Computed, name+"()")
		return nil
	}
	// Every string of the call may name something: query_table(['a', 'b']),
	// pragma_table_info('s.t').
	for j := 0; j < len(args); j++ {
		if args[j].Kind == sqltext.TokString {
			s, next := joinedString(args, j)
			n.Strings = append(n.Strings, s)
			j = next - 1
		}
	}
	for _, v := range values {
		switch {
		case file:
			n.Paths = append(n.Paths, v)
		case name == "query":
			if depth+1 >= maxDepth {
				n.Computed = firstNonEmpty(n.Computed, "query() nested too deep")
				continue
			}
			if err := inspect(sqltext.Parse(v), n, depth+1); err != nil {
				return err
			}
		case name == "query_table" || name == "histogram" || name == "histogram_values":
			n.Identifiers = append(n.Identifiers, nameParts(v)...)
			if strings.ContainsRune(v, '/') {
				n.Paths = append(n.Paths, v)
			}
		default:
			n.Identifiers = append(n.Identifiers, nameParts(v)...)
		}
	}
	return nil
}

// inspectSetting notes a SET or RESET of a setting that names schemas
// whose value is not one literal word or string.
func inspectSetting(sig []sqltext.Token, n *Names) {
	set, _ := sqltext.ReadSetting(sig)
	setting := strings.ToLower(set.Name.Name())
	if set.Name.Kind == 0 || !namedSettings[setting] {
		return
	}
	value := set.Value
	for len(value) > 0 && value[len(value)-1].IsPunct(';') {
		value = value[:len(value)-1]
	}
	if len(value) == 0 {
		return // RESET, or SET without a value, which DuckDB refuses
	}
	switch {
	case len(value) == 1 && value[0].Kind == sqltext.TokString:
		s, _ := joinedString(value, 0)
		n.Identifiers = append(n.Identifiers, schemaList(s)...)
	case identifierChain(value):
		// SET schema = memory.s: the names are among the identifiers.
	default:
		n.Computed = firstNonEmpty(n.Computed, "SET "+setting)
	}
}

// schemaList splits a search_path value ('main,"s.x",memory.s') into the
// identifiers it names.
func schemaList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		out = append(out, nameParts(strings.TrimSpace(part))...)
	}
	return out
}

// nameParts splits a qualified name as DuckDB writes it in a string
// (catalog.schema.table, parts possibly double-quoted) into its parts,
// lower-cased.
func nameParts(s string) []string {
	var out []string
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' && inQuote && i+1 < len(s) && s[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			inQuote = !inQuote
		case c == '.' && !inQuote:
			out = append(out, strings.ToLower(strings.TrimSpace(b.String())))
			b.Reset()
		default:
			b.WriteByte(c)
		}
	}
	return append(out, strings.ToLower(strings.TrimSpace(b.String())))
}

// firstArgument returns the tokens of the first argument in args (a call's
// tokens between its parentheses): up to the first comma outside inner
// brackets.
func firstArgument(args []sqltext.Token) []sqltext.Token {
	depth := 0
	for j, t := range args {
		switch {
		case t.IsPunct('(') || t.IsPunct('[') || t.IsPunct('{'):
			depth++
		case t.IsPunct(')') || t.IsPunct(']') || t.IsPunct('}'):
			depth--
		case t.IsPunct(',') && depth == 0:
			return args[:j]
		}
	}
	return args
}

// literals returns the strings an argument gives when it is one string
// literal or a list of string literals, and false when it is anything
// else: an expression, a parameter, a column, a subquery, or two adjacent
// literals (which the parser joins).
func literals(arg []sqltext.Token) ([]string, bool) {
	if len(arg) == 1 && arg[0].Kind == sqltext.TokString {
		s, ok := stringValue(arg[0])
		return []string{s}, ok
	}
	if len(arg) < 2 || !arg[0].IsPunct('[') || !arg[len(arg)-1].IsPunct(']') {
		return nil, false
	}
	var out []string
	inner := arg[1 : len(arg)-1]
	for j := 0; j < len(inner); j++ {
		if inner[j].Kind != sqltext.TokString || j+1 < len(inner) && !inner[j+1].IsPunct(',') {
			return nil, false
		}
		s, ok := stringValue(inner[j])
		if !ok {
			return nil, false
		}
		out = append(out, s)
		j++
	}
	return out, len(out) > 0
}

// identifierChain reports whether arg is a name, qualified or not:
// words and quoted identifiers joined by dots.
func identifierChain(arg []sqltext.Token) bool {
	if len(arg)%2 == 0 {
		return false
	}
	for j, t := range arg {
		if j%2 == 1 && !t.IsPunct('.') || j%2 == 0 && t.Kind != sqltext.TokIdent && t.Kind != sqltext.TokQuotedIdent {
			return false
		}
	}
	return true
}

// joinedString returns the value of the string literal at sig[k] joined
// with the literals right after it (the parser joins 'a' 'b' when a line
// break separates them; joined regardless here, which only names more),
// and the index past them.
func joinedString(sig []sqltext.Token, k int) (string, int) {
	var b strings.Builder
	j := k
	for ; j < len(sig) && sig[j].Kind == sqltext.TokString; j++ {
		s, _ := stringValue(sig[j])
		b.WriteString(s)
	}
	return b.String(), j
}

// stringValue decodes a string literal token as DuckDB reads it: '…' with
// a doubled quote for one (N'…' likewise), E'…' with backslash escapes, $tag$…$tag$
// as written. Bit and hex strings (B'…', X'…') are not text; they give "".
// ok is false for a token the lexer left unterminated.
func stringValue(t sqltext.Token) (string, bool) {
	s := t.Text
	switch {
	case strings.HasPrefix(s, "$"):
		tagEnd := strings.IndexByte(s[1:], '$')
		if tagEnd < 0 {
			return "", false
		}
		tag := s[:tagEnd+2]
		if len(s) < 2*len(tag) || !strings.HasSuffix(s, tag) {
			return "", false
		}
		return s[len(tag) : len(s)-len(tag)], true
	case len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') && s[1] == '\'':
		return unescape(s[2:])
	case len(s) >= 2 && (s[0] == 'n' || s[0] == 'N') && s[1] == '\'':
		s = s[1:]
	case len(s) >= 2 && (s[0] == 'x' || s[0] == 'X' || s[0] == 'b' || s[0] == 'B') && s[1] == '\'':
		return "", true
	}
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), true
}

// unescape decodes the body of an E'…' string (after E', with its closing
// quote): \b \f \n \r \t, \xH[H], \o[o[o]], \uXXXX, \UXXXXXXXX, a
// backslash before any other character stands for it, and a doubled quote
// for one.
func unescape(body string) (string, bool) {
	if !strings.HasSuffix(body, "'") {
		return "", false
	}
	body = body[:len(body)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '\'' && i+1 < len(body) && body[i+1] == '\'' {
			b.WriteByte('\'')
			i++
			continue
		}
		if c != '\\' || i+1 >= len(body) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := body[i]; e {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			j := i + 1
			for j < len(body) && j < i+3 && isHex(body[j]) {
				j++
			}
			if v, err := strconv.ParseUint(body[i+1:j], 16, 8); err == nil {
				b.WriteByte(byte(v))
			}
			i = j - 1
		case 'u', 'U':
			width := 4
			if e == 'U' {
				width = 8
			}
			if i+width < len(body) {
				if v, err := strconv.ParseUint(body[i+1:i+1+width], 16, 32); err == nil && utf8.ValidRune(rune(v)) {
					b.WriteRune(rune(v))
					i += width
					continue
				}
			}
			b.WriteByte(e)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(body) && j < i+3 && body[j] >= '0' && body[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(body[i:j], 8, 16)
			b.WriteByte(byte(v))
			i = j - 1
		default:
			b.WriteByte(e)
		}
	}
	return b.String(), true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Guard judges client statements against the schemas and files a node
// keeps for itself. It is safe for concurrent use once made.
type Guard struct {
	hidden []string
	// roots are the protected paths, absolute and clean, each also with
	// its symlinks resolved, split into components.
	roots [][]string
	// dir is the working directory relative paths resolve under, home
	// what ~ stands for.
	dir, home string
}

// NewGuard returns a Guard refusing statements that name one of the
// schemas hidden (any case, bare or quoted, or in a string DuckDB takes as
// a name) or read or write a file at or under one of the paths protected.
// Relative paths resolve under the process's working directory, as DuckDB
// resolves them.
func NewGuard(hidden []string, protected []string) (*Guard, error) {
	g := &Guard{}
	for _, h := range hidden {
		g.hidden = append(g.hidden, strings.ToLower(h))
	}
	var err error
	if g.dir, err = os.Getwd(); err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	g.home, _ = os.UserHomeDir()
	for _, p := range protected {
		if p == "" {
			continue
		}
		abs := g.absolute(p)
		g.addRoot(abs)
		if real, err := evalExisting(abs); err == nil && real != abs {
			g.addRoot(real)
		}
	}
	return g, nil
}

func (g *Guard) addRoot(p string) {
	parts := components(p)
	if !slices.ContainsFunc(g.roots, func(r []string) bool { return slices.Equal(r, parts) }) {
		g.roots = append(g.roots, parts)
	}
}

// Check refuses st, one or more statements, when it names a hidden
// schema, a name computed while it runs, or a protected file. The error
// wraps ErrHiddenSchema, ErrComputedName or ErrProtectedFile, and clients
// see it as DuckDB's Permission Error.
func (g *Guard) Check(st sqltext.Statement) error {
	if !mayReach(st.Text) {
		return nil
	}
	n, err := Inspect(st)
	if err != nil {
		// The lexer cannot split the text: DuckDB's parser refuses it
		// wherever it goes, so it reaches nothing.
		return nil
	}
	for _, id := range n.Identifiers {
		if slices.Contains(g.hidden, strings.ToLower(id)) {
			return refused(fmt.Errorf("%w (schema %s)", ErrHiddenSchema, id))
		}
	}
	for _, s := range n.Strings {
		if h := g.namesHidden(s); h != "" {
			return refused(fmt.Errorf("%w (schema %s, named in the string %q)", ErrHiddenSchema, h, clip(s)))
		}
	}
	if n.Computed != "" {
		return refused(fmt.Errorf("%w: %s", ErrComputedName, n.Computed))
	}
	for _, p := range n.Paths {
		if g.Protects(p) {
			return refused(fmt.Errorf("%w: %q", ErrProtectedFile, clip(p)))
		}
	}
	return nil
}

// needles are the words without which a text reaches nothing a Guard
// judges: the hidden schema, every function that takes a name or a path
// (by a part of its name), the words before a table that DuckDB may read
// as a file, the settings that name schemas, and the statements that name
// files. Found anywhere, in comments and quoted names too, they can only
// send a text to the full inspection.
var needles = []string{
	"_duckraft", "query", "histogram", "pragma", "table_sample", "checkpoint", "nextval", "currval", "setval",
	"read_", "_scan", "glob", "sniff_csv", "parquet_", "json_execute", "search_path", "schema",
	"from", "join", "using", "copy", "export", "import", "attach", "install", "load",
	"desc", "summarize", "pivot", "table", "show",
}

// mayReach reports whether sql may name something a Guard judges: a
// pre-check that spares the lexing to a text without a needle outside its
// string literals, such as a bulk INSERT … VALUES (a megabyte costs about
// 200 ms to lex on a loaded 2-core machine: BenchmarkCheck). The strings'
// contents matter only where a needle outside them says so (FROM 'x.csv',
// query_table('…'), SET search_path = '…'), except for USE '…', which the
// word use sends to the inspection. Text with a byte outside ASCII is
// always inspected (Unicode case folding may make a needle of other
// letters), and so is text where a quote may not open a string (a
// comment, a quoted name, a dollar-quoted or E'…' string): there the
// needles are searched in the whole text.
func mayReach(sql string) bool {
	for i := 0; i < len(sql); i++ {
		if sql[i] >= utf8.RuneSelf {
			return true
		}
	}
	outside := sql
	if !strings.ContainsAny(sql, "\"$\\") && !strings.Contains(sql, "--") && !strings.Contains(sql, "/*") {
		outside = withoutStrings(sql)
	}
	lower := strings.ToLower(outside)
	for _, n := range needles {
		if strings.Contains(lower, n) {
			return true
		}
	}
	return hasWord(lower, "use")
}

// withoutStrings returns sql with the contents of its '…' literals left
// out, or sql itself when a literal is not closed.
func withoutStrings(sql string) string {
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		if sql[i] != '\'' {
			b.WriteByte(sql[i])
			continue
		}
		j := i + 1
		for ; j < len(sql); j++ {
			if sql[j] == '\'' {
				if j+1 < len(sql) && sql[j+1] == '\'' {
					j++
					continue
				}
				break
			}
		}
		if j >= len(sql) {
			return sql
		}
		b.WriteString("''")
		i = j
	}
	return b.String()
}

// hasWord reports whether lower holds w as a word of its own.
func hasWord(lower, w string) bool {
	for i := strings.Index(lower, w); i >= 0; {
		if (i == 0 || !wordByte(lower[i-1])) && (i+len(w) >= len(lower) || !wordByte(lower[i+len(w)])) {
			return true
		}
		j := strings.Index(lower[i+1:], w)
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// refusal is a Guard's refusal, which clients see as DuckDB's Permission
// Error (engine.ExceptionError) with the code forbidden (node.CodedError),
// as a statement their role does not allow.
type refusal struct{ err error }

func refused(err error) error { return &refusal{err} }

func (r *refusal) Error() string { return r.err.Error() }

func (r *refusal) Unwrap() error { return r.err }

// ExceptionType implements engine.ExceptionError.
func (r *refusal) ExceptionType() string { return "Permission" }

// ErrorCode implements node.CodedError.
func (r *refusal) ErrorCode() string { return string(outcome.Forbidden) }

// namesHidden returns the hidden schema s names as a word of its own (a
// name DuckDB may read from it), or "".
func (g *Guard) namesHidden(s string) string {
	lower := strings.ToLower(s)
	for _, h := range g.hidden {
		for i := strings.Index(lower, h); i >= 0; {
			before, after := i-1, i+len(h)
			if (before < 0 || !wordByte(lower[before])) && (after >= len(lower) || !wordByte(lower[after])) {
				return h
			}
			j := strings.Index(lower[i+1:], h)
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return ""
}

func wordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 0x80
}

// Protects reports whether a file path, as a client writes it for DuckDB,
// may name a protected file or a file under a protected directory: a
// relative path under the working directory, ~ under the home directory,
// file:// stripped, symlinks resolved as far as the path exists, and a
// glob pattern (*, ?, [...], {...}, **) counted if it could match one.
// Remote paths (s3://, http://, …) are not the node's files.
func (g *Guard) Protects(p string) bool {
	if rest, ok := cutPrefixFold(p, "file://"); ok {
		p = rest
	} else if rest, ok := cutPrefixFold(p, "file:"); ok {
		p = rest
	} else if strings.Contains(p, "://") {
		return false
	}
	if p == "" {
		return false
	}
	abs := g.absolute(p)
	candidates := [][]string{components(abs)}
	if !hasMeta(abs) {
		if real, err := evalExisting(abs); err == nil && real != abs {
			candidates = append(candidates, components(real))
		}
	} else if prefix := literalPrefix(abs); prefix != "" {
		// Resolve the part before the first pattern: /link/* matches
		// under the link's target.
		if real, err := evalExisting(prefix); err == nil && real != prefix {
			candidates = append(candidates, components(real+abs[len(prefix):]))
		}
	}
	for _, c := range candidates {
		for _, r := range g.roots {
			if couldMatch(c, r) {
				return true
			}
		}
	}
	return false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// absolute makes p absolute and clean, ~ expanded.
func (g *Guard) absolute(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(g.home, p[1:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(g.dir, p)
	}
	return filepath.Clean(p)
}

// evalExisting resolves the symlinks of the longest part of p that
// exists, and appends the rest.
func evalExisting(p string) (string, error) {
	rest := ""
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", fmt.Errorf("access: no part of %s exists", p)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func components(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

func hasMeta(p string) bool { return strings.ContainsAny(p, "*?[{") }

// literalPrefix is the directory part of a pattern before its first
// component with a pattern character.
func literalPrefix(p string) string {
	i := strings.IndexAny(p, "*?[{")
	if i < 0 {
		return p
	}
	return filepath.Dir(p[:i+1])
}

// couldMatch reports whether the pattern pat (path components, possibly
// with pattern characters, ** for any number of components) could match
// the protected path root or a path under it. A component whose pattern
// Go's path.Match does not read as DuckDB does ([!…], {a,b}) is taken to
// match anything.
func couldMatch(pat, root []string) bool {
	if len(root) == 0 {
		return true // at or under the root
	}
	if len(pat) == 0 {
		return false // ends above the root: a directory, which no reader reads as a file
	}
	p := pat[0]
	if strings.Contains(p, "**") {
		return couldMatch(pat[1:], root) || couldMatch(pat, root[1:])
	}
	if !componentMatch(p, root[0]) {
		return false
	}
	return couldMatch(pat[1:], root[1:])
}

func componentMatch(p, name string) bool {
	if !hasMeta(p) {
		return p == name
	}
	if strings.ContainsAny(p, "[{") {
		return true
	}
	ok, err := path.Match(p, name)
	return ok || err != nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 120 {
		n := 120
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n] + "…"
	}
	return s
}
