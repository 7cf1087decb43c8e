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

// Classify splits sql on top-level semicolons and classifies each statement
// from its tokens. Empty statements are dropped; the error is a lexing error
// (an unterminated string or comment).
func Classify(sql string) ([]Statement, error) {
	texts, err := wal.SplitStatements(sql)
	if err != nil {
		return nil, fmt.Errorf("classify: %w", err)
	}
	out := make([]Statement, 0, len(texts))
	for _, text := range texts {
		toks, err := wal.Lex(text)
		if err != nil {
			return nil, fmt.Errorf("classify: %w", err)
		}
		out = append(out, Statement{SQL: text, Class: classify(toks)})
	}
	return out, nil
}

// readPragmas are the PRAGMAs that only report; every other PRAGMA changes a
// setting of the session or the node.
var readPragmas = map[string]bool{
	"table_info": true, "storage_info": true, "show_tables": true, "show_tables_expanded": true,
	"show_databases": true, "database_list": true, "database_size": true, "version": true,
	"platform": true, "functions": true, "collations": true, "show": true, "metadata_info": true,
	"user_agent": true, "table_storage_info": true, "extension_versions": true,
}

// writeCalls are table functions that create and fill tables.
var writeCalls = map[string]bool{"dbgen": true, "dsdgen": true}

// classify classifies one statement. Unknown statements are writes: the
// leader then decides, and refuses what it cannot replicate.
func classify(toks []wal.Token) Class {
	var sig []wal.Token
	for _, t := range toks {
		if t.Significant() {
			sig = append(sig, t)
		}
	}
	word := func(k int, w string) bool { return k < len(sig) && sig[k].Is(w) }
	verb, v := wal.Verb(toks)
	switch verb {
	case "select", "from", "values", "table", "pivot", "unpivot":
		return classifyQuery(sig)
	case "", "describe", "desc", "show", "summarize", "export":
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
		if (word(v+1, "analyze") || word(v+1, "analyse")) && len(sig) > v+2 &&
			classify(toks[indexOf(toks, sig[v+2]):]) != ClassRead {
			return ClassWrite
		}
		return ClassRead
	case "pragma":
		if len(sig) > v+1 && readPragmas[strings.ToLower(sig[v+1].Text)] && !hasOp(sig, "=") {
			return ClassRead
		}
		return ClassSession
	case "call":
		if len(sig) > v+1 && writeCalls[strings.ToLower(sig[v+1].Text)] {
			return ClassWrite
		}
		return ClassRead
	}
	return ClassWrite
}

// classifyQuery classifies a query: nextval() advances a sequence, so a
// query calling it is a write; setseed() seeds the session's random().
func classifyQuery(sig []wal.Token) Class {
	class := ClassRead
	for k := 0; k+1 < len(sig); k++ {
		if !sig[k+1].IsPunct('(') || k > 0 && sig[k-1].IsPunct('.') {
			continue
		}
		switch {
		case sig[k].Is("nextval"):
			return ClassWrite
		case sig[k].Is("setseed"):
			class = ClassSession
		}
	}
	return class
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

// Confirm checks the lexer's class of a statement against DuckDB's own
// statement type for it (from a prepared statement or a Result). The lexer
// is finer than the type: a SELECT calling nextval() is a write, one calling
// setseed() a session statement, and COPY is a read when it only exports.
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
