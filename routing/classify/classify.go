// Package classify tells what each statement of a client's text does
// (reads, writes, transaction control or session settings), which decides
// where routing runs it. DuckDB's own parser decides (duckdb.go), the lexer
// of package node/sqltext splits the text and answers where the parser
// cannot, and results are cached by text (cache.go). routing/DESIGN.md
// describes the rules and their limits.
package classify

import (
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/sqltext"
)

// Class says what a statement does, which decides where it runs.
type Class uint8

// Statement classes.
const (
	// Read changes nothing and may run on any node fresh enough.
	Read Class = iota + 1
	// Write changes database state and goes through the leader and
	// the Raft log (sqltext.Deterministic may still refuse it).
	Write
	Begin
	Commit
	Rollback
	// Session changes only the client's session or this node (a listed
	// session setting, USE, PREPARE, CHECKPOINT); it is not replicated.
	Session
	// Node reconfigures the node it runs on for every session there (SET
	// GLOBAL, DuckDB's logging, the PEG parser): one node would then
	// differ from the others, and its own replication would run under the
	// new configuration, so routing refuses it.
	Node
	// Refused is a SET, RESET or PRAGMA of a setting outside the
	// allow-list of session settings (settings.go), which routing
	// refuses: DuckDB applies many settings to the whole node even
	// without GLOBAL.
	Refused
)

func (c Class) String() string {
	switch c {
	case Read:
		return "read"
	case Write:
		return "write"
	case Begin:
		return "begin"
	case Commit:
		return "commit"
	case Rollback:
		return "rollback"
	case Session:
		return "session"
	case Node:
		return "node"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Statement is one statement of a client's text, lexed once
// (sqltext.Statement: its text, tokens and verb), and its class. Routing
// reads the statement through it from here on.
type Statement struct {
	sqltext.Statement
	Class Class
}

// Statements splits sql into statements and classifies each one with
// DuckDB's own parser (duckdb.go): the lexer of package node/sqltext splits
// the text, DuckDB's parser must agree on every statement, and its parse
// tree decides a query's class from the functions the query calls. A text
// DuckDB splits differently is refused; a statement DuckDB's parser rejects
// keeps the lexer's class (it fails on every node alike). Empty statements
// are dropped; the error is a lexing error (an unterminated string or
// comment) or a split mismatch. The text is lexed once, and the classes
// are cached by text (see cache.go); a query with no parenthesis at all is
// classified without DuckDB (plainRead).
func Statements(sql string) ([]Statement, error) {
	lexed, err := sqltext.Split(sql)
	if err != nil {
		return nil, fmt.Errorf("classify: %w", err)
	}
	if classes, ok := classCache.get(sql); ok && len(classes) == len(lexed) {
		out := make([]Statement, len(lexed))
		for i, st := range lexed {
			out[i] = Statement{Statement: st, Class: classes[i]}
		}
		return out, nil
	}
	if len(lexed) == 1 && plainRead(sql) {
		return []Statement{{Statement: lexed[0], Class: Read}}, nil
	}
	if len(lexed) == 1 && plainInsert(sql, lexed[0]) {
		return []Statement{{Statement: lexed[0], Class: Write}}, nil
	}
	out, err := classifyTexts(sqlParser(), sql, lexed)
	if err != nil {
		return nil, err
	}
	classes := make([]Class, len(out))
	for i, st := range out {
		classes[i] = st.Class
	}
	classCache.put(sql, classes)
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
	s := bare(sql)
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

// bare is sql without the space around it and its trailing semicolons.
func bare(sql string) string {
	return strings.TrimLeft(strings.TrimRight(sql, " \t\n\r\f\v;"), " \t\n\r\f\v")
}

// plainInsert reports whether sql is st, a literal INSERT (an INSERT INTO
// t [(columns)] VALUES of numbers, '…' strings, parameters, NULL, TRUE and
// FALSE), with nothing around it but space and semicolons: a write, one
// statement to DuckDB, without parsing it. It admits no comment and no
// string but a plain '…' one, whose quotes DuckDB and the lexer read alike,
// so nothing can hide a semicolon from one of them. Such a text skips
// DuckDB's parser, which cost the leader 15% of its CPU at 64 clients
// (docs/benchmarks.md), and the cache, as plainRead's do; a text DuckDB
// would still reject (a reserved word for a table name) fails where it is
// applied, with the same error on every node.
func plainInsert(sql string, st sqltext.Statement) bool {
	if !st.LiteralInsert() {
		return false
	}
	if bare(sql) != st.Text {
		return false
	}
	for _, t := range st.Tokens() {
		if t.Kind == sqltext.TokComment || t.Kind == sqltext.TokString && !strings.HasPrefix(t.Text, "'") {
			return false
		}
	}
	return true
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// lexClass classifies one statement from its tokens alone: the answer
// where DuckDB's parser does not decide (a statement it rejects, a
// statement it does not serialize) and the whole answer when no parser
// could be opened. Unknown statements are writes: the leader then decides,
// and refuses what it cannot replicate.
func lexClass(st sqltext.Statement) Class { return sigClass(st.Significant()) }

// sigClass is lexClass on a statement's significant tokens.
func sigClass(sig []sqltext.Token) Class {
	word := func(k int, w string) bool { return k < len(sig) && sig[k].Is(w) }
	verb, v := sqltext.Verb(sig)
	switch verb {
	case "select", "from", "values", "table", "pivot", "unpivot", "describe", "desc", "show", "summarize":
		return classifyQuery(sig)
	case "", "export":
		return Read
	case "begin", "start":
		return Begin
	case "commit", "end":
		return Commit
	case "rollback", "abort":
		return Rollback
	case "set", "reset":
		return settingClass(sig)
	case "use", "prepare", "deallocate", "checkpoint", "vacuum", "analyze":
		return Session
	case "force":
		if word(v+1, "checkpoint") {
			return Session
		}
	case "update":
		// UPDATE EXTENSIONS replaces the node's extension files, for
		// every session there.
		if word(v+1, "extensions") {
			return Node
		}
	case "create":
		for k := v + 1; k <= v+4; k++ {
			if word(k, "secret") {
				// A persistent secret is written to the node's disk and
				// seen by every session there; a temporary one is the
				// session's.
				for j := v + 1; j < k; j++ {
					if word(j, "persistent") {
						return Node
					}
				}
				return Session
			}
		}
	case "copy":
		if copyTo(sig) {
			return Read
		}
	case "explain":
		// EXPLAIN ANALYZE runs the statement, so a write stays a write.
		if k, analyze := explainTarget(sig, v); analyze &&
			(k >= len(sig) || sigClass(sig[k:]) != Read) {
			return Write
		}
		return Read
	case "pragma":
		return pragmaClass(sig, v)
	case "call":
		if len(sig) > v+1 {
			return classifyQuery(sig[v+1:])
		}
		return Read
	}
	return Write
}

// explainTarget returns the index in sig of the statement an EXPLAIN at
// sig[v] explains, and whether EXPLAIN runs it: EXPLAIN ANALYZE and an
// option list naming ANALYZE do, whatever its value (DuckDB 1.5 runs
// EXPLAIN (ANALYZE false) too).
func explainTarget(sig []sqltext.Token, v int) (int, bool) {
	k := v + 1
	if k < len(sig) && (sig[k].Is("analyze") || sig[k].Is("analyse")) {
		return k + 1, true
	}
	if k >= len(sig) || !sig[k].IsPunct('(') {
		return k, false
	}
	end := sqltext.Closing(sig, k)
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
func classifyQuery(sig []sqltext.Token) Class {
	class := Read
	for k := 0; k+1 < len(sig); k++ {
		if !sig[k+1].IsPunct('(') {
			continue
		}
		switch sig[k].Kind {
		case sqltext.TokIdent:
			class = worse(class, callClass(strings.ToLower(sig[k].Text)))
		case sqltext.TokQuotedIdent:
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
	case a == Node || b == Node:
		return Node
	case a == Refused || b == Refused:
		return Refused
	case a == Write || b == Write:
		return Write
	case a == Session || b == Session:
		return Session
	}
	return a
}

// copyTo reports whether a COPY statement writes out (COPY … TO), rather
// than loading (COPY … FROM) or copying a database (COPY FROM DATABASE).
func copyTo(sig []sqltext.Token) bool {
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

func hasOp(sig []sqltext.Token, op string) bool {
	for _, t := range sig {
		if t.Kind == sqltext.TokOp && t.Text == op {
			return true
		}
	}
	return false
}
