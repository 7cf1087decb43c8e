package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqltext"
)

// The CLI splits a text into statements as DuckDB does, and runs them one
// by one: node/sqltext's lexer (which reads strings, quoted identifiers,
// comments and dollar quotes as DuckDB's scanner does) finds the
// semicolons that end statements, and DuckDB's own parser
// (duckdb_extract_statements, through engine.Parser) must agree: it makes
// of the whole text as many statements as of its pieces together. DuckDB's
// C API gives no statement's text, only its count, hence the two.

// cliParser is the process's DuckDB parser, opened on first use.
var cliParser struct {
	once sync.Once
	p    *engine.Parser
	err  error
}

func duckdbParser() (*engine.Parser, error) {
	cliParser.once.Do(func() {
		cliParser.p, cliParser.err = engine.NewParser()
	})
	if cliParser.err != nil {
		return nil, fmt.Errorf("DuckDB's parser: %w", cliParser.err)
	}
	return cliParser.p, nil
}

// stmt is one statement of a text: its text, and DuckDB's parser error
// when DuckDB's parser rejects it (it is then reported, not sent).
type stmt struct {
	text     string
	parseErr error
}

// errSplitMismatch reports a text that DuckDB's parser and the lexer
// split differently; the CLI then runs none of it rather than guess.
var errSplitMismatch = errors.New("DuckDB's parser splits this text into statements differently than duckraft's lexer; send its statements one at a time")

// splitStatements splits text into its statements in order, dropping
// empty ones (only space, comments or semicolons). A text with an
// unterminated string, quoted identifier or comment is DuckDB's parser
// error for the whole text: nothing of it runs, as in DuckDB.
func splitStatements(text string) ([]stmt, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, errors.New("Invalid Input Error: the text contains a NUL byte")
	}
	p, err := duckdbParser()
	if err != nil {
		return nil, err
	}
	lexed, lexErr := sqltext.Split(text)
	if lexErr != nil {
		if _, err := p.Count(text); err != nil {
			return nil, err
		}
		// DuckDB's parser took what the lexer could not split: run it
		// as one text and let the server answer.
		return []stmt{{text: text}}, nil
	}
	out := make([]stmt, 0, len(lexed))
	sum, allParsed := 0, true
	for _, st := range lexed {
		n, err := p.Count(st.Text)
		if err != nil {
			allParsed = false
		}
		sum += n
		out = append(out, stmt{text: st.Text, parseErr: err})
	}
	if allParsed && len(out) > 1 {
		if n, err := p.Count(text); err == nil && n != sum {
			return nil, fmt.Errorf("%w (%d statements, not %d)", errSplitMismatch, n, sum)
		}
	}
	return out, nil
}

// complete reports whether buf, lines typed so far, ends a statement: its
// last significant token is a semicolon outside any string or comment, and
// DuckDB's parser does not find the text unterminated. A ';' inside a
// string or a comment, or followed by more of a statement, does not end
// one; a comment after the ';' does not keep it open. An unclosed
// parenthesis does not either, as in DuckDB's shell: the statement is
// sent, and DuckDB's parser error says what is wrong.
func complete(buf string) bool {
	toks, err := sqltext.Lex(buf)
	if err != nil {
		return false
	}
	ended := false
	for _, t := range toks {
		if t.Significant() {
			ended = t.IsPunct(';')
		}
	}
	if !ended {
		return false
	}
	p, err := duckdbParser()
	if err != nil {
		return true
	}
	_, err = p.Count(buf)
	return err == nil || !strings.Contains(err.Error(), "unterminated")
}
