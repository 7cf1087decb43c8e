package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/wire"
)

// Parser runs DuckDB's own parser over SQL text without binding it: no
// table, function or file is looked up and nothing in the text runs, so it
// answers the same on a node that lacks the tables and on a data-less
// router. It owns a small in-memory database (one thread, no external
// access) and is safe for concurrent use.
//
// The C API splits text into statements (duckdb_extract_statements) but
// gives a statement's type only once it is prepared, which binds it. The
// json_serialize_sql scalar function parses without binding and returns
// the parse tree of SELECT statements; it refuses, after parsing, any
// other statement. Parse uses both.
type Parser struct {
	db    *DB
	conns idlePool[*parseConn]
}

// maxIdleParseConns bounds the connections a Parser keeps between calls;
// more exist while more calls run at once.
const maxIdleParseConns = 8

// parseConn is one connection of a Parser with its prepared
// json_serialize_sql call.
type parseConn struct {
	c      *Conn
	stmt   bindings.PreparedStatement
	reader *reader
}

// Parsed is DuckDB's parse of a text.
type Parsed struct {
	// Statements is the number of statements DuckDB makes of the text:
	// one per statement between semicolons (0 for a text of only comments
	// and semicolons), plus one for each PIVOT without an IN list, which
	// DuckDB precedes with a statement creating a temporary ENUM type.
	Statements int
	// Select reports whether DuckDB's parser made every statement a
	// SELECT statement. Besides SELECT that includes FROM-first queries,
	// VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE and PIVOT with an IN list;
	// it excludes EXPLAIN, COPY, CALL, PRAGMA and every write.
	Select bool
	// Functions are, when Select, the names of the functions the
	// statements call anywhere (scalar, aggregate, window and table
	// functions, macros, and operators such as "+"), lower-cased, each
	// once, in order of appearance.
	Functions []string
	// JSON is, when Select, json_serialize_sql's parse tree:
	// {"error":false,"statements":[{"node":…},…]}.
	JSON string
}

// NewParser opens a Parser.
func NewParser() (*Parser, error) {
	db, err := Open("", Options{Threads: 1, MemoryLimit: "64MB"})
	if err != nil {
		return nil, fmt.Errorf("parser: %w", err)
	}
	return &Parser{db: db, conns: idlePool[*parseConn]{
		max:   maxIdleParseConns,
		open:  func() (*parseConn, error) { return openParseConn(db) },
		close: (*parseConn).close,
	}}, nil
}

// Close closes the Parser; calls made after it fail.
func (p *Parser) Close() error {
	p.conns.shut()
	return p.db.Close()
}

// errNUL refuses text with a NUL byte: the C API would cut it there.
var errNUL = &Error{Type: "Invalid Input", Message: "Invalid Input Error: the text contains a NUL byte"}

// Parse parses sql. When DuckDB's parser rejects it, the error is an
// *Error of type "Parser" with DuckDB's message.
func (p *Parser) Parse(sql string) (Parsed, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return Parsed{}, errNUL
	}
	pc, err := p.get()
	if err != nil {
		return Parsed{}, err
	}
	defer p.conns.put(pc)
	text, err := pc.serialize(sql)
	if err != nil {
		return Parsed{}, err
	}
	if out, ok := skim(text); ok {
		return out, nil
	}
	var s struct {
		Error      bool              `json:"error"`
		ErrorType  string            `json:"error_type"`
		Message    string            `json:"error_message"`
		Statements []json.RawMessage `json:"statements"`
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return Parsed{}, fmt.Errorf("parser: json_serialize_sql: %w", err)
	}
	switch {
	case !s.Error:
		// Unexpected layout; skim failed only on the prefix.
		return Parsed{}, fmt.Errorf("parser: json_serialize_sql: unexpected output %.40q", text)
	case s.ErrorType == "parser":
		return Parsed{}, &Error{Type: "Parser", Message: "Parser Error: " + s.Message}
	}
	// Parsed, but not only SELECT statements.
	n, err := pc.count(sql)
	return Parsed{Statements: n}, err
}

// Count returns the number of statements DuckDB's parser splits sql into
// (duckdb_extract_statements). Errors are those of Parse.
func (p *Parser) Count(sql string) (int, error) {
	if strings.IndexByte(sql, 0) >= 0 {
		return 0, errNUL
	}
	pc, err := p.get()
	if err != nil {
		return 0, err
	}
	defer p.conns.put(pc)
	return pc.count(sql)
}

// SideEffectFunctions returns the lower-case names of the functions
// duckdb_functions() lists as VOLATILE with side effects (nextval, setseed,
// random, …): the calls that can make a query more than a read.
func (p *Parser) SideEffectFunctions() ([]string, error) {
	c, err := p.db.Connect()
	if err != nil {
		return nil, fmt.Errorf("parser: %w", err)
	}
	defer c.Close()
	out, err := c.QueryStrings(context.Background(), `SELECT DISTINCT lower(function_name) FROM duckdb_functions()
		WHERE stability = 'VOLATILE' AND has_side_effects ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("parser: %w", err)
	}
	return out, nil
}

// get returns an idle connection, or a new one; the caller puts it back
// into p.conns.
func (p *Parser) get() (*parseConn, error) {
	pc, err := p.conns.get()
	if err != nil {
		return nil, fmt.Errorf("parser: %w", err)
	}
	return pc, nil
}

// openParseConn connects to db and prepares the json_serialize_sql call.
func openParseConn(db *DB) (*parseConn, error) {
	c, err := db.Connect()
	if err != nil {
		return nil, err
	}
	pc := &parseConn{c: c}
	if bindings.Prepare(c.conn, "SELECT json_serialize_sql($1::VARCHAR)", &pc.stmt) == bindings.StateError {
		err := newError(bindings.PrepareError(pc.stmt), bindings.ErrorTypeInvalid)
		pc.close()
		return nil, err
	}
	if pc.reader, err = newReader(wire.LogicalType{ID: wire.TypeVarchar}); err != nil {
		pc.close()
		return nil, err
	}
	return pc, nil
}

func (pc *parseConn) close() {
	bindings.DestroyPrepare(&pc.stmt)
	pc.c.Close()
}

// count runs duckdb_extract_statements on sql.
func (pc *parseConn) count(sql string) (int, error) {
	ext, n, err := pc.c.extract(sql)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Type == "Invalid Input" {
			return 0, nil // only comments and semicolons
		}
		return 0, err
	}
	bindings.DestroyExtracted(&ext)
	return n, nil
}

// serialize runs the prepared json_serialize_sql call on sql.
func (pc *parseConn) serialize(sql string) (string, error) {
	if bindings.BindVarchar(pc.stmt, 1, sql) == bindings.StateError {
		return "", errors.New("parser: cannot bind the text")
	}
	var res bindings.Result
	if bindings.ExecutePrepared(pc.stmt, &res) == bindings.StateError {
		err := newError(bindings.ResultError(&res), bindings.ResultErrorType(&res))
		bindings.DestroyResult(&res)
		return "", fmt.Errorf("parser: %w", err)
	}
	defer bindings.DestroyResult(&res)
	chunk := bindings.FetchChunk(res)
	if chunk.Ptr == nil {
		return "", errors.New("parser: json_serialize_sql returned no row")
	}
	defer bindings.DestroyDataChunk(&chunk)
	if bindings.DataChunkGetSize(chunk) != 1 {
		return "", errors.New("parser: json_serialize_sql returned no row")
	}
	v := pc.reader.read(bindings.DataChunkGetVector(chunk, 0), 1)
	return string(v.Bytes[v.Offsets[0]:v.Offsets[1]]), nil
}

// skimPrefix starts json_serialize_sql's answer for SELECT statements.
const skimPrefix = `{"error":false,"statements":[`

// skim reads a successful json_serialize_sql answer in one pass, without
// decoding it: it counts the elements of "statements" and collects the
// string values of every "function_name" key. JSON escapes every '"' inside
// a string, so a quote outside an escape always delimits a string token and
// a key cannot be forged by string content. It reports false when the text
// does not start with skimPrefix or is malformed.
func skim(text string) (Parsed, bool) {
	if !strings.HasPrefix(text, skimPrefix) {
		return Parsed{}, false
	}
	out := Parsed{Select: true, JSON: text}
	depth := 0 // inside the statements array
	funcKey := false
	for i := len(skimPrefix); i < len(text); i++ {
		switch c := text[i]; c {
		case '"':
			end, escaped, ok := stringEnd(text, i)
			if !ok {
				return Parsed{}, false
			}
			raw := text[i+1 : end]
			isKey := end+1 < len(text) && text[end+1] == ':'
			switch {
			case isKey:
				funcKey = raw == "function_name"
			case funcKey:
				name := raw
				if escaped {
					if err := json.Unmarshal([]byte(text[i:end+1]), &name); err != nil {
						return Parsed{}, false
					}
				}
				name = strings.ToLower(name)
				if !slices.Contains(out.Functions, name) {
					out.Functions = append(out.Functions, name)
				}
				funcKey = false
			}
			i = end
		case '{', '[':
			if depth == 0 && c == '{' {
				out.Statements++
			}
			depth++
			funcKey = false
		case '}', ']':
			depth--
			if depth < 0 {
				return out, c == ']' && text[i+1:] == "}"
			}
		case ':', ',':
		default:
			funcKey = false
		}
	}
	return Parsed{}, false
}

// stringEnd returns the index of the quote closing the JSON string that
// opens at text[i], and whether the string has escapes.
func stringEnd(text string, i int) (int, bool, bool) {
	escaped := false
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, escaped, true
		}
	}
	return 0, false, false
}
