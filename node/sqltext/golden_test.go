package sqltext

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The lexer's output is part of the replicated state machine: every
// replica's applier and the leader's rules read a log entry's text through
// it, so a change in how it splits a text is a change in how a log written
// before it applies. The golden files pin its output, and the text rules'
// results, over testdata/sql.corpus byte for byte. Regenerate them with
// -update only to add entries to the corpus: the diff must show nothing
// but additions.
var update = flag.Bool("update", false, "rewrite the golden files from the current code")

// pkgPrefix is the package prefix of the rules' own errors, left out of
// the golden files: they pin what the rules decide, not where they live.
const pkgPrefix = "sqltext: "

// goldenTime is the leader's timestamp of the rules' golden file.
var goldenTime = leaderTime

// readCorpus returns the texts of testdata/sql.corpus.
func readCorpus(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("testdata/sql.corpus")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := strconv.Unquote(line)
		if err != nil {
			t.Fatalf("testdata/sql.corpus:%d: %v", n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkGolden compares got with the golden file at path, or rewrites the
// file with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) && i < len(wl); i++ {
		if gl[i] != wl[i] {
			t.Fatalf("%s differs at line %d:\n got %s\nwant %s", path, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%s differs in length: got %d lines, want %d", path, len(gl), len(wl))
}

// kindCodes name the token kinds in the golden file.
var kindCodes = map[TokenKind]string{
	TokSpace: "s", TokComment: "c", TokIdent: "i", TokQuotedIdent: "q", TokString: "t",
	TokNumber: "n", TokParam: "p", TokPunct: "u", TokOp: "o",
}

// tokenLine renders toks as kind and length pairs ("i6 s1 n1"), after
// checking that they cover sql exactly: with that, the pairs are the whole
// of the lexer's output.
func tokenLine(t *testing.T, sql string, toks []Token) string {
	t.Helper()
	var b strings.Builder
	pos := 0
	for i, tok := range toks {
		if tok.Pos != pos || tok.Text == "" || !strings.HasPrefix(sql[pos:], tok.Text) {
			t.Fatalf("%q: token %d %+v does not continue at offset %d", sql, i, tok, pos)
		}
		pos += len(tok.Text)
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d", kindCodes[tok.Kind], len(tok.Text))
	}
	if pos != len(sql) {
		t.Fatalf("%q: tokens end at offset %d of %d", sql, pos, len(sql))
	}
	return b.String()
}

// errLine renders an error with what it wraps, for the golden files.
func errLine(err error) string {
	class := "other"
	switch {
	case errors.Is(err, ErrNondeterministic):
		class = "refused"
	case errors.Is(err, ErrSyntax):
		class = "syntax"
	}
	return "error " + class + " " + strconv.Quote(strings.TrimPrefix(err.Error(), pkgPrefix))
}

// TestLexGolden pins what Lex and Split make of every text of the corpus:
// the text's tokens, and each statement's range and tokens (what
// classification reads).
func TestLexGolden(t *testing.T) {
	var b bytes.Buffer
	for _, sql := range readCorpus(t) {
		fmt.Fprintf(&b, "%s\n", strconv.Quote(sql))
		toks, err := Lex(sql)
		fmt.Fprintf(&b, "lex %s\n", tokenLine(t, sql, toks))
		if err != nil {
			fmt.Fprintf(&b, "lex %s\n", errLine(err))
		}
		stmts, err := Split(sql)
		if err != nil {
			fmt.Fprintf(&b, "split %s\n", errLine(err))
			continue
		}
		pos := 0
		for _, st := range stmts {
			text := st.Text
			k := strings.Index(sql[pos:], text)
			if k < 0 {
				t.Fatalf("%q: statement %q is not a part of the text", sql, text)
			}
			pos += k
			fmt.Fprintf(&b, "stmt %d-%d", pos, pos+len(text))
			pos += len(text)
			if text != sql {
				fmt.Fprintf(&b, " %s", tokenLine(t, text, st.Tokens()))
				if err := st.Err(); err != nil {
					fmt.Fprintf(&b, " %s", errLine(err))
				}
			}
			b.WriteByte('\n')
		}
	}
	checkGolden(t, "testdata/lex.golden", b.Bytes())
}

// TestRulesGolden pins the text rules' answers over the corpus: the plan
// Deterministic makes of each text (the rewritten SQL, the materialized
// INSERT, or the refusal), what Materialized makes of it, and the word
// rules (Verb, ReadsRows, Returns, Samples, Names).
func TestRulesGolden(t *testing.T) {
	var b bytes.Buffer
	for _, sql := range readCorpus(t) {
		fmt.Fprintf(&b, "%s\n", strconv.Quote(sql))
		st := Parse(sql)
		verb, v := st.Verb()
		fmt.Fprintf(&b, "verb %q %d reads %t returns %t samples %t\n", verb, v, st.ReadsRows(), st.Returns(), st.Samples())
		calls, words, err := st.Names()
		if err != nil {
			fmt.Fprintf(&b, "names %s\n", errLine(err))
		} else {
			fmt.Fprintf(&b, "names %q %q\n", calls, words)
		}
		plan, err := Deterministic(st, goldenTime, testVolatile)
		fmt.Fprintf(&b, "deterministic %s\n", planLine(sql, plan, err))
		plan, err = Materialized(st, goldenTime, "a()", false)
		fmt.Fprintf(&b, "materialized %s\n", planLine(sql, plan, err))
	}
	checkGolden(t, "testdata/rules.golden", b.Bytes())
}

// planLine renders the plan made of sql, or the error in its place.
func planLine(sql string, plan Plan, err error) string {
	switch {
	case err != nil:
		return errLine(err)
	case plan.Materialize != nil:
		m := plan.Materialize
		cols := "all"
		if m.Columns != nil {
			cols = fmt.Sprintf("%q", m.Columns)
		}
		return fmt.Sprintf("table %q columns %s query %q", m.Table, cols, m.Query)
	case plan.SQL == sql:
		return "sql unchanged"
	}
	return fmt.Sprintf("sql %q", plan.SQL)
}
