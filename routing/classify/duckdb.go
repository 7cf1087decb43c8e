package classify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
)

// parser is the process's DuckDB parser (engine.Parser: an in-memory
// database that parses without binding), opened on first use.
var parser struct {
	once sync.Once
	p    *engine.Parser
	err  error
	// effects are the functions DuckDB lists as VOLATILE with side
	// effects (duckdb_functions()).
	effects map[string]bool
}

// sqlParser returns the process's parser, or nil if it cannot be opened:
// classification then uses the lexer alone.
func sqlParser() *engine.Parser {
	parser.once.Do(func() {
		p, err := engine.NewParser()
		if err != nil {
			parser.err = err
			return
		}
		names, err := p.SideEffectFunctions()
		if err != nil {
			p.Close()
			parser.err = err
			return
		}
		parser.effects = make(map[string]bool, len(names))
		for _, n := range names {
			parser.effects[n] = true
		}
		parser.p = p
	})
	return parser.p
}

// callClasses are the calls that make a query more than a read: the
// reviewed VOLATILE functions with side effects and the table functions
// that change state.
var callClasses = map[string]Class{
	// nextval advances a sequence and setval (DuckDB 2.0) sets it:
	// replicated state.
	"nextval": Write, "setval": Write,
	// setseed seeds the session's random().
	"setseed": Session,
	// dbgen and dsdgen (tpch, tpcds extensions) create and fill tables.
	"dbgen": Write, "dsdgen": Write,
	// json_execute_serialized_sql runs a statement hidden in its argument.
	"json_execute_serialized_sql": Write,
	// These act on the node or the session, like CHECKPOINT and SET.
	"checkpoint": Session, "force_checkpoint": Session,
	"enable_profiling": Session, "disable_profiling": Session,
	// These reconfigure the whole node (DuckDB's log, its parser).
	"enable_logging": Node, "disable_logging": Node, "truncate_duckdb_logs": Node,
	"enable_peg_parser": Node, "disable_peg_parser": Node,
}

// readEffects are the VOLATILE functions with side effects that change
// nothing another node or a later statement sees: their side effect is a
// different answer per call (random, uuid), reading the session (currval,
// current_query), raising an error, sleeping or logging on this node, or
// reporting how DuckDB holds a value in memory (vector_type).
var readEffects = map[string]bool{
	"random": true, "uuid": true, "gen_random_uuid": true, "uuidv4": true, "uuidv7": true,
	"currval": true, "current_connection_id": true, "current_query": true, "current_query_id": true,
	"current_transaction_id": true, "error": true, "sleep_ms": true, "stats": true, "write_log": true,
	"vector_type": true,
}

// callClass is the class a call of name gives its query. A VOLATILE
// function with side effects that is in neither list (one a later DuckDB
// adds) makes a write, so that the leader decides.
func callClass(name string) Class {
	if c, ok := callClasses[name]; ok {
		return c
	}
	if parser.effects[name] && !readEffects[name] {
		return Write
	}
	return Read
}

// queryVerbs are the verbs (sqltext.Verb) of statements DuckDB may parse as
// SELECT statements; their parse tree is serialized. Other statements are
// only counted, and their class comes from the lexer.
var queryVerbs = map[string]bool{
	"select": true, "from": true, "values": true, "table": true, "pivot": true, "unpivot": true,
	"with": true, "describe": true, "desc": true, "show": true, "summarize": true, "": true,
}

// nonQueryReads are the verbs of statements DuckDB does not parse as
// SELECT that may still be reads.
var nonQueryReads = map[string]bool{
	"explain": true, "copy": true, "call": true, "pragma": true, "export": true, "pivot": true, "unpivot": true,
}

// maxDepth bounds the nesting of statements classified inside others
// (EXPLAIN ANALYZE, COPY (…) TO, query('…')).
const maxDepth = 4

// errSplit reports a text that DuckDB and the lexer split differently.
var errSplit = errors.New("classify: DuckDB splits this text into statements differently than the router's lexer; send its statements one at a time")

// classifyTexts classifies the statements that the lexer split sql into.
// With no parser, the lexer decides alone.
func classifyTexts(p *engine.Parser, sql string, stmts []sqltext.Statement) ([]Statement, error) {
	out := make([]Statement, 0, len(stmts))
	total, known := 0, true
	for _, st := range stmts {
		parseText := st.Text
		if len(stmts) == 1 {
			// DuckDB sees the client's text as it is, which checks
			// that what the lexer dropped around it is empty.
			parseText = sql
		}
		class, n, err := classifyStatement(p, st, parseText, 0)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			known = false
		}
		total += n
		out = append(out, Statement{Statement: st, Class: class})
	}
	if len(stmts) > 1 && known {
		// Each statement is one to DuckDB; so must the whole be.
		if n, err := p.Count(sql); err == nil && n != total {
			return nil, fmt.Errorf("%w (%d, not %d)", errSplit, n, total)
		}
	}
	return out, nil
}

// classifyStatement classifies st, one statement to the lexer, from
// DuckDB's parse of parseText (st's text itself, or the whole client text
// around it). It returns the number of statements DuckDB makes of
// parseText, or -1 when DuckDB's parser rejects it or there is no parser.
func classifyStatement(p *engine.Parser, st sqltext.Statement, parseText string, depth int) (Class, int, error) {
	if err := st.Err(); err != nil {
		return 0, 0, fmt.Errorf("classify: %w", err)
	}
	text := st.Text
	lexed := lexClass(st)
	if p == nil {
		return lexed, -1, nil
	}
	verb, _ := st.Verb()
	var err error
	var parsed engine.Parsed
	if queryVerbs[verb] {
		parsed, err = p.Parse(parseText)
	} else {
		parsed.Statements, err = p.Count(parseText)
	}
	if err != nil {
		// DuckDB's parser rejects the statement. Every node runs the
		// same parser, so it fails wherever it is sent. A write is
		// answered DuckDB's own error here: sent on, the leader's rules
		// would refuse a verb they do not know ("SELEC") as
		// nondeterministic, which says nothing of the typo. A read keeps
		// the lexer's class and meets the same error where it runs.
		var perr *engine.Error
		if lexed == Write && errors.As(err, &perr) && perr.Type == "Parser" {
			return 0, 0, perr
		}
		return lexed, -1, nil
	}
	n := parsed.Statements
	expanded := false
	switch {
	case n == 1:
	case n > 1 && !parsed.Select && !strings.Contains(text, ";") && (parseText == text || countIs(p, text, n)):
		// DuckDB splits text only at semicolons, so the extra statements
		// are its own: a PIVOT without an IN list first creates a
		// temporary ENUM type of the pivoted values.
		expanded = true
	default:
		return 0, 0, fmt.Errorf("%w (%d statements in %.60q)", errSplit, n, text)
	}
	if parsed.Select {
		return selectClass(p, parsed, depth), n, nil
	}
	return nonSelectClass(p, st, lexed, expanded, depth), n, nil
}

func countIs(p *engine.Parser, text string, n int) bool {
	m, err := p.Count(text)
	return err == nil && m == n
}

// selectClass classifies a SELECT statement from the functions it calls.
func selectClass(p *engine.Parser, parsed engine.Parsed, depth int) Class {
	class := Read
	for _, f := range parsed.Functions {
		c := callClass(f)
		if f == "query" {
			c = queryCalls(p, parsed.JSON, depth)
		}
		class = worse(class, c)
	}
	return class
}

// queryCalls classifies the SQL text that query('…') table functions run:
// a constant is classified like a client's text, anything else makes a
// write.
func queryCalls(p *engine.Parser, tree string, depth int) Class {
	var root any
	if err := json.Unmarshal([]byte(tree), &root); err != nil {
		return Write
	}
	class := Read
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if name, ok := v["function_name"].(string); ok && strings.EqualFold(name, "query") {
				class = worse(class, classifyQueryArg(p, v, depth))
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(root)
	return class
}

// classifyQueryArg classifies the first argument of a query('…') call.
func classifyQueryArg(p *engine.Parser, call map[string]any, depth int) Class {
	args, _ := call["arguments"].([]any)
	if len(args) == 0 {
		return Write
	}
	arg, _ := args[0].(map[string]any)
	expr, _ := arg["expression"].(map[string]any)
	literal, _ := expr["literal"].(map[string]any)
	text, ok := literal["text"].(string)
	if arg["name"] != "" || expr["class"] != "CONSTANT" || literal["kind"] != "STRING" || !ok {
		return Write
	}
	return classifyInner(p, text, depth)
}

// classifyInner classifies statements nested in another one, which run
// when it runs. Anything that cannot be classified makes a write.
func classifyInner(p *engine.Parser, sql string, depth int) Class {
	if depth+1 >= maxDepth {
		return Write
	}
	stmts, err := sqltext.Split(sql)
	if err != nil {
		return Write
	}
	class := Read
	for _, st := range stmts {
		c, _, err := classifyStatement(p, st, st.Text, depth+1)
		if err != nil {
			return Write
		}
		class = worse(class, c)
	}
	return class
}

// nonSelectClass classifies a statement that DuckDB parses but not as a
// SELECT statement (or expands into several). Its kind comes from the
// lexer; what it runs inside is classified from DuckDB's parse.
func nonSelectClass(p *engine.Parser, st sqltext.Statement, lexed Class, expanded bool, depth int) Class {
	text, sig := st.Text, st.Significant()
	verb, v := st.Verb()
	switch verb {
	case "explain":
		k, analyze := explainTarget(sig, v)
		if !analyze {
			return Read
		}
		if k >= len(sig) || classifyInner(p, text[sig[k].Pos:], depth) != Read {
			return Write
		}
		return Read
	case "copy":
		if lexed != Read {
			return lexed
		}
		if len(sig) > 1 && sig[1].IsPunct('(') {
			if end := sqltext.Closing(sig, 1); end < 0 || classifyInner(p, text[sig[1].Pos+1:sig[end].Pos], depth) != Read {
				return Write
			}
		}
		return Read
	case "call":
		// CALL f(…) runs the table function as SELECT * FROM f(…) does.
		if len(sig) > v+1 {
			q := "SELECT * FROM " + text[sig[v+1].Pos:]
			if c, _, err := classifyStatement(p, sqltext.Parse(q), q, depth+1); err == nil {
				return c
			}
		}
		return lexed
	}
	if lexed == Read && !expanded && !nonQueryReads[verb] {
		// The lexer reads a query where DuckDB parses something else.
		return Write
	}
	return lexed
}
