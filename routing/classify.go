package routing

import (
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/wal"
)

// Class says what a statement does, which decides where it runs.
type Class uint8

// Statement classes.
const (
	// ClassRead changes nothing and may run on any node fresh enough.
	ClassRead Class = iota + 1
	// ClassWrite changes database state and goes through the leader and
	// the Raft log (wal.Deterministic may still refuse it).
	ClassWrite
	ClassTxnBegin
	ClassTxnCommit
	ClassTxnRollback
	// ClassSession changes only the client's session or this node (SET,
	// USE, PRAGMA settings, CHECKPOINT); it is not replicated.
	ClassSession
)

func (c Class) String() string {
	switch c {
	case ClassRead:
		return "read"
	case ClassWrite:
		return "write"
	case ClassTxnBegin:
		return "begin"
	case ClassTxnCommit:
		return "commit"
	case ClassTxnRollback:
		return "rollback"
	case ClassSession:
		return "session"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Statement is one statement of a client's text and its class.
type Statement struct {
	SQL   string
	Class Class
}

// Classify splits sql into statements and classifies each one with
// DuckDB's own parser (classify_duckdb.go): the lexer of package wal splits
// the text, DuckDB's parser must agree on every statement, and its parse
// tree decides a query's class from the functions the query calls. A text
// DuckDB splits differently is refused; a statement DuckDB's parser rejects
// keeps the lexer's class (it fails on every node alike). Empty statements
// are dropped; the error is a lexing error (an unterminated string or
// comment) or a split mismatch. Results are cached by text (see
// classify_cache.go), and a query with no parenthesis at all is classified
// without DuckDB (plainRead).
func Classify(sql string) ([]Statement, error) {
	if stmts, ok := classCache.get(sql); ok {
		return stmts, nil
	}
	texts, err := wal.SplitStatements(sql)
	if err != nil {
		return nil, fmt.Errorf("classify: %w", err)
	}
	if len(texts) == 1 && plainRead(sql) {
		return []Statement{{SQL: texts[0], Class: ClassRead}}, nil
	}
	out, err := classifyTexts(sqlParser(), sql, texts)
	if err != nil {
		return nil, err
	}
	classCache.put(sql, out)
	return out, nil
}

// plainRead reports whether sql is certainly one read that calls no
// function, without parsing it: it starts with SELECT, FROM, TABLE, SHOW,
// DESCRIBE or SUMMARIZE, has no parenthesis anywhere and no semicolon but
// trailing ones. DuckDB splits statements only at semicolons, so it is one
// statement; its first word is not inside a string or comment, so it is a
// query; and every call, table function and macro needs a parenthesis (the
// clock keywords such as CURRENT_DATE, which need none, change nothing).
// Such texts skip DuckDB's parser and the cache: point queries with
// changing literals would only churn it.
func plainRead(sql string) bool {
	s := strings.TrimLeft(strings.TrimRight(sql, " \t\n\r\f\v;"), " \t\n\r\f\v")
	if strings.ContainsAny(s, "(;") {
		return false
	}
	end := 0
	for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z') {
		end++
	}
	if end == len(s) || isWordByte(s[end]) {
		return false
	}
	switch strings.ToLower(s[:end]) {
	case "select", "from", "table", "show", "describe", "summarize":
		return true
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// readPragmas are the PRAGMAs that only report; every other PRAGMA changes a
// setting of the session or the node.
var readPragmas = map[string]bool{
	"table_info": true, "storage_info": true, "show_tables": true, "show_tables_expanded": true,
	"show_databases": true, "database_list": true, "database_size": true, "version": true,
	"platform": true, "functions": true, "collations": true, "show": true, "metadata_info": true,
	"user_agent": true, "table_storage_info": true, "extension_versions": true,
}

// lexClass classifies one statement from its tokens alone: the answer
// where DuckDB's parser does not decide (a statement it rejects, a
// statement it does not serialize) and the whole answer when no parser
// could be opened. Unknown statements are writes: the leader then decides,
// and refuses what it cannot replicate.
func lexClass(toks []wal.Token) Class {
	var sig []wal.Token
	for _, t := range toks {
		if t.Significant() {
			sig = append(sig, t)
		}
	}
	word := func(k int, w string) bool { return k < len(sig) && sig[k].Is(w) }
	verb, v := wal.Verb(toks)
	switch verb {
	case "select", "from", "values", "table", "pivot", "unpivot", "describe", "desc", "show", "summarize":
		return classifyQuery(sig)
	case "", "export":
		return ClassRead
	case "begin", "start":
		return ClassTxnBegin
	case "commit", "end":
		return ClassTxnCommit
	case "rollback", "abort":
		return ClassTxnRollback
	case "set", "reset", "use", "prepare", "deallocate", "checkpoint", "vacuum", "analyze":
		return ClassSession
	case "force":
		if word(v+1, "checkpoint") {
			return ClassSession
		}
	case "update":
		if word(v+1, "extensions") {
			return ClassSession
		}
	case "create":
		for k := v + 1; k <= v+4; k++ {
			if word(k, "secret") {
				return ClassSession
			}
		}
	case "copy":
		if copyTo(sig) {
			return ClassRead
		}
	case "explain":
		// EXPLAIN ANALYZE runs the statement, so a write stays a write.
		if k, analyze := explainTarget(sig, v); analyze &&
			(k >= len(sig) || lexClass(toks[indexOf(toks, sig[k]):]) != ClassRead) {
			return ClassWrite
		}
		return ClassRead
	case "pragma":
		if len(sig) > v+1 && readPragmas[strings.ToLower(sig[v+1].Text)] && !hasOp(sig, "=") {
			return ClassRead
		}
		return ClassSession
	case "call":
		if len(sig) > v+1 {
			return classifyQuery(sig[v+1:])
		}
		return ClassRead
	}
	return ClassWrite
}

// explainTarget returns the index in sig of the statement an EXPLAIN at
// sig[v] explains, and whether EXPLAIN runs it: EXPLAIN ANALYZE and an
// option list naming ANALYZE do, whatever its value (DuckDB 1.5 runs
// EXPLAIN (ANALYZE false) too).
func explainTarget(sig []wal.Token, v int) (int, bool) {
	k := v + 1
	if k < len(sig) && (sig[k].Is("analyze") || sig[k].Is("analyse")) {
		return k + 1, true
	}
	if k >= len(sig) || !sig[k].IsPunct('(') {
		return k, false
	}
	end := closing(sig, k)
	if end < 0 {
		return len(sig), true
	}
	for _, t := range sig[k+1 : end] {
		if t.Is("analyze") || t.Is("analyse") {
			return end + 1, true
		}
	}
	return end + 1, false
}

// classifyQuery classifies a query from the names it calls (callClass):
// nextval() advances a sequence, so a query calling it is a write;
// setseed() seeds the session's random(). A name counts as a call when a
// parenthesis follows it, quoted or qualified ('s'.nextval() chains a call
// in DuckDB), which errs on the side of writes.
func classifyQuery(sig []wal.Token) Class {
	class := ClassRead
	for k := 0; k+1 < len(sig); k++ {
		if !sig[k+1].IsPunct('(') {
			continue
		}
		switch sig[k].Kind {
		case wal.TokIdent:
			class = worse(class, callClass(strings.ToLower(sig[k].Text)))
		case wal.TokQuotedIdent:
			name := strings.ReplaceAll(sig[k].Text[1:len(sig[k].Text)-1], `""`, `"`)
			class = worse(class, callClass(strings.ToLower(name)))
		}
	}
	return class
}

// worse combines the classes of two parts of one statement: a write
// anywhere makes a write, else a session change makes a session
// statement.
func worse(a, b Class) Class {
	switch {
	case a == ClassWrite || b == ClassWrite:
		return ClassWrite
	case a == ClassSession || b == ClassSession:
		return ClassSession
	}
	return a
}

// copyTo reports whether a COPY statement writes out (COPY … TO), rather
// than loading (COPY … FROM) or copying a database (COPY FROM DATABASE).
func copyTo(sig []wal.Token) bool {
	depth := 0
	for k := 1; k < len(sig); k++ {
		switch {
		case sig[k].IsPunct('('):
			depth++
		case sig[k].IsPunct(')'):
			depth--
		case depth == 0 && sig[k].Is("to"):
			return true
		case depth == 0 && sig[k].Is("from"):
			return false
		}
	}
	return false
}

func hasOp(sig []wal.Token, op string) bool {
	for _, t := range sig {
		if t.Kind == wal.TokOp && t.Text == op {
			return true
		}
	}
	return false
}

// indexOf returns the index of t in toks, matched by offset.
func indexOf(toks []wal.Token, t wal.Token) int {
	for i, x := range toks {
		if x.Pos == t.Pos {
			return i
		}
	}
	return len(toks)
}

// Confirm checks a statement's class against DuckDB's own statement type
// for it (from a prepared statement or a Result, which bind the statement:
// tests use it). The class is finer than the type: a SELECT calling
// nextval() is a write, one calling setseed() a session statement, and
// COPY is a read when it only exports.
func Confirm(c Class, t engine.StatementType) error {
	var ok bool
	switch t {
	case engine.StatementTransaction:
		ok = c == ClassTxnBegin || c == ClassTxnCommit || c == ClassTxnRollback
	case engine.StatementSelect, engine.StatementRelation:
		ok = c == ClassRead || c == ClassWrite || c == ClassSession
	case engine.StatementExplain, engine.StatementCopy:
		ok = c == ClassRead || c == ClassWrite
	case engine.StatementCall: // CHECKPOINT runs as CALL checkpoint()
		ok = c == ClassRead || c == ClassWrite || c == ClassSession
	case engine.StatementExport:
		ok = c == ClassRead
	case engine.StatementPragma:
		ok = c == ClassRead || c == ClassSession
	case engine.StatementPrepare, engine.StatementVariableSet, engine.StatementSet,
		engine.StatementVacuum, engine.StatementAnalyze, engine.StatementUpdateExtensions:
		ok = c == ClassSession
	case engine.StatementCreate, engine.StatementDrop:
		// CREATE SECRET is node-local; DEALLOCATE runs as a DROP.
		ok = c == ClassWrite || c == ClassSession
	default:
		ok = c == ClassWrite
	}
	if !ok {
		return fmt.Errorf("routing: classified as %s but DuckDB parses a %s statement", c, t)
	}
	return nil
}
