package sqltext

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestLex(t *testing.T) {
	type tok struct {
		kind TokenKind
		text string
	}
	tests := []struct {
		sql  string
		want []tok
	}{
		{"SELECT now()", []tok{{TokIdent, "SELECT"}, {TokSpace, " "}, {TokIdent, "now"}, {TokPunct, "("}, {TokPunct, ")"}}},
		{"'it''s now()'", []tok{{TokString, "'it''s now()'"}}},
		{`E'a\'b' x`, []tok{{TokString, `E'a\'b'`}, {TokSpace, " "}, {TokIdent, "x"}}},
		{`'a\'`, []tok{{TokString, `'a\'`}}},
		{`"now"()`, []tok{{TokQuotedIdent, `"now"`}, {TokPunct, "("}, {TokPunct, ")"}}},
		{`"a""b"`, []tok{{TokQuotedIdent, `"a""b"`}}},
		{"$$ now() $$", []tok{{TokString, "$$ now() $$"}}},
		{"$q$ a $$ b $q$+", []tok{{TokString, "$q$ a $$ b $q$"}, {TokOp, "+"}}},
		{"$1 $name ? ?2", []tok{{TokParam, "$1"}, {TokSpace, " "}, {TokParam, "$name"}, {TokSpace, " "}, {TokParam, "?"}, {TokSpace, " "}, {TokParam, "?2"}}},
		{"-- now()\nx", []tok{{TokComment, "-- now()\n"}, {TokIdent, "x"}}},
		{"/* a /* now() */ b */x", []tok{{TokComment, "/* a /* now() */ b */"}, {TokIdent, "x"}}},
		{"a::DATE", []tok{{TokIdent, "a"}, {TokOp, "::"}, {TokIdent, "DATE"}}},
		{"1.5e-3+.5", []tok{{TokNumber, "1.5e-3"}, {TokOp, "+"}, {TokNumber, ".5"}}},
		{"0xff 1_000", []tok{{TokNumber, "0xff"}, {TokSpace, " "}, {TokNumber, "1_000"}}},
		// DuckDB reads 1x$a$ as 1 AS x$a$: no dollar quote opens there, nor
		// after 1_, 1.e or a second exponent; it does after digits.
		{"1x$a$;", []tok{{TokNumber, "1x$a$"}, {TokPunct, ";"}}},
		{"1_$a$;", []tok{{TokNumber, "1_$a$"}, {TokPunct, ";"}}},
		{"1.e$a$;", []tok{{TokNumber, "1.e$a$"}, {TokPunct, ";"}}},
		{"1e5e5$a$;", []tok{{TokNumber, "1e5e5$a$"}, {TokPunct, ";"}}},
		{"1$a$;$a$", []tok{{TokNumber, "1"}, {TokString, "$a$;$a$"}}},
		{"1e5$a$;$a$", []tok{{TokNumber, "1e5"}, {TokString, "$a$;$a$"}}},
		{"1.5e-3$a$;$a$", []tok{{TokNumber, "1.5e-3"}, {TokString, "$a$;$a$"}}},
		{"1e5.5", []tok{{TokNumber, "1e5"}, {TokNumber, ".5"}}},
		{"l[1:2]", []tok{{TokIdent, "l"}, {TokPunct, "["}, {TokNumber, "1"}, {TokOp, ":"}, {TokNumber, "2"}, {TokPunct, "]"}}},
		{"a-->b", []tok{{TokIdent, "a"}, {TokComment, "-->b"}}},
		{"a+-- c", []tok{{TokIdent, "a"}, {TokOp, "+"}, {TokComment, "-- c"}}},
		{"t.x", []tok{{TokIdent, "t"}, {TokPunct, "."}, {TokIdent, "x"}}},
		{"größe", []tok{{TokIdent, "größe"}}},
		{"x'ff'", []tok{{TokString, "x'ff'"}}},
	}
	for _, tt := range tests {
		toks, err := Lex(tt.sql)
		if err != nil {
			t.Errorf("Lex(%q): %v", tt.sql, err)
			continue
		}
		var got []tok
		for _, k := range toks {
			got = append(got, tok{k.Kind, k.Text})
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Lex(%q)\n got %v\nwant %v", tt.sql, got, tt.want)
		}
	}
}

func TestLexUnterminated(t *testing.T) {
	for _, sql := range []string{"'abc", `"abc`, "/* a /* b */", "$$ x", "$t$ x $$", `E'\'`} {
		toks, err := Lex(sql)
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Lex(%q) error = %v, want ErrSyntax", sql, err)
		}
		if got := concat(toks); got != sql {
			t.Errorf("Lex(%q) tokens concatenate to %q", sql, got)
		}
	}
}

// The zero Statement reads as an empty text, as Parse("") does.
func TestZeroStatement(t *testing.T) {
	var zero Statement
	empty := Parse("")
	if v, k := zero.Verb(); v != "" || k != -1 || len(zero.Tokens()) != 0 || zero.Err() != nil {
		t.Errorf("zero Statement: verb %q at %d, %d tokens, error %v", v, k, len(zero.Tokens()), zero.Err())
	}
	if v, k := empty.Verb(); v != "" || k != -1 {
		t.Errorf(`Parse(""): verb %q at %d`, v, k)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		sql  string
		want []string
	}{
		{"SELECT 1", []string{"SELECT 1"}},
		{"SELECT 1; SELECT ';'; -- x;\n", []string{"SELECT 1", "SELECT ';'"}},
		{" ; ;\n", nil},
		{"BEGIN; INSERT INTO t VALUES (1); COMMIT;", []string{"BEGIN", "INSERT INTO t VALUES (1)", "COMMIT"}},
		{"SELECT $$;$$ /* ; */; SELECT \";\"", []string{"SELECT $$;$$ /* ; */", `SELECT ";"`}},
	}
	for _, tt := range tests {
		stmts, err := Split(tt.sql)
		var got []string
		for _, st := range stmts {
			checkStatement(t, st, st.Text)
			got = append(got, st.Text)
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tt.sql, got, err, tt.want)
		}
	}
}

// Split cuts a statement's tokens out of the text's; where trimming the
// statement's space cuts into a token (a line comment's newline, U+0085,
// which the lexer reads as a letter, U+200B, which it reads as space), the
// statement is lexed alone. Either way its tokens are what Lex makes of its
// text.
func TestSplitTrimmed(t *testing.T) {
	for _, sql := range []string{
		"SELECT 1 -- c\n;", "SELECT 1 -- c\n", "SELECT x\u0085; SELECT 2", "\u0085SELECT 1", "\u0085",
		"\u200b SELECT 1 \u200b", "SELECT 1;\u2028", "\u2028;SELECT 'a'\u00a0", "/* c */ SELECT 1 /* d */ ;  ",
	} {
		stmts, err := Split(sql)
		want, _ := splitTexts(sql)
		if err != nil || len(stmts) != len(want) {
			t.Fatalf("Split(%q) = %d statements, %v; want %q", sql, len(stmts), err, want)
		}
		for i, st := range stmts {
			checkStatement(t, st, want[i])
		}
	}
}

// splitTexts is how statements were split before Split cut them from the
// text's tokens, kept as the reference Split must agree with: the trimmed
// text between top-level semicolons of every statement with more than
// space and comments.
func splitTexts(sql string) ([]string, error) {
	toks, err := Lex(sql)
	if err != nil {
		return nil, err
	}
	var out []string
	start, depth, significant := 0, 0, false
	flush := func(end int) {
		if significant {
			out = append(out, strings.TrimSpace(sql[start:end]))
		}
	}
	for _, t := range toks {
		switch {
		case t.IsPunct('(') || t.IsPunct('[') || t.IsPunct('{'):
			depth++
		case t.IsPunct(')') || t.IsPunct(']') || t.IsPunct('}'):
			depth = max(depth-1, 0)
		case t.IsPunct(';') && depth == 0:
			flush(t.Pos)
			start, significant = t.Pos+1, false
			continue
		}
		if t.Significant() {
			significant = true
		}
	}
	flush(len(sql))
	return out, nil
}

// checkStatement checks that st is the statement text, as Parse makes it.
func checkStatement(t *testing.T, st Statement, text string) {
	t.Helper()
	want := Parse(text)
	if st.Text != text || !reflect.DeepEqual(st.Tokens(), want.Tokens()) || !reflect.DeepEqual(st.Significant(), want.Significant()) ||
		(st.Err() == nil) != (want.Err() == nil) {
		t.Fatalf("statement %q, tokens %+v, error %v; want %q, tokens %+v, error %v", st.Text, st.Tokens(), st.Err(), text, want.Tokens(), want.Err())
	}
	if v, k := st.Verb(); v != want.verb || k != want.verbAt {
		t.Fatalf("statement %q: verb %q at %d, want %q at %d", text, v, k, want.verb, want.verbAt)
	}
	if wv, wk := Verb(want.Tokens()); wv != want.verb || wk != want.verbAt {
		t.Fatalf("statement %q: Parse's verb %q at %d, Verb's %q at %d", text, want.verb, want.verbAt, wv, wk)
	}
}

func concat(toks []Token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.Text)
	}
	return b.String()
}

// FuzzLex checks that Lex never panics, covers its input exactly with
// non-empty tokens at the right offsets, that Split's statements are what
// splitting the text by its tokens and lexing each statement alone gives,
// and that Deterministic never panics on what it lexes.
func FuzzLex(f *testing.F) {
	for _, s := range []string{
		"SELECT now(), 'now()', \"now\" -- now()\n/* /* now() */ */ FROM t",
		"INSERT INTO t (a, b) VALUES (random(), $1) ON CONFLICT DO NOTHING RETURNING *",
		"SELECT $$a$$, $x$b$x$, E'\\'', x'ff', 1.5e-3, .5, l[1:2], {'a': 1}::STRUCT(a INT)",
		"SELECT 1 -- c\n; SELECT x\u0085; \u200b SELECT 2 \u200b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		toks, _ := Lex(sql)
		pos := 0
		for _, tok := range toks {
			if tok.Text == "" || tok.Pos != pos {
				t.Fatalf("token %+v at offset %d", tok, pos)
			}
			pos += len(tok.Text)
		}
		if got := concat(toks); got != sql {
			t.Fatalf("tokens concatenate to %q, want %q", got, sql)
		}
		stmts, err := Split(sql)
		want, wantErr := splitTexts(sql)
		if (err == nil) != (wantErr == nil) || len(stmts) != len(want) {
			t.Fatalf("Split(%q) = %d statements, %v; want %q, %v", sql, len(stmts), err, want, wantErr)
		}
		for i, st := range stmts {
			checkStatement(t, st, want[i])
		}
		Deterministic(Parse(sql), leaderTime, testVolatile)
	})
}

func TestSignificantTokens(t *testing.T) {
	toks, err := Lex("/* c */ SET x -- d\n = 'a' ;")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tok := range SignificantTokens(toks) {
		got = append(got, tok.Text)
	}
	if want := []string{"SET", "x", "=", "'a'", ";"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SignificantTokens = %q, want %q", got, want)
	}
	if sig := SignificantTokens(nil); sig != nil {
		t.Errorf("SignificantTokens(nil) = %v", sig)
	}
}

func TestTokenName(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{`Foo`, `Foo`},
		{`"Foo"`, `Foo`},
		{`"a""b"`, `a"b`},
		{`"a"""`, `a"`},
	} {
		toks, err := Lex(c.sql)
		if err != nil {
			t.Fatal(err)
		}
		if got := toks[0].Name(); got != c.want {
			t.Errorf("Name of %s = %q, want %q", c.sql, got, c.want)
		}
	}
}

func TestClosing(t *testing.T) {
	toks, err := Lex("f(a, g(b), (c)) d (e")
	if err != nil {
		t.Fatal(err)
	}
	sig := SignificantTokens(toks)
	if got := Closing(sig, 1); got == -1 || sig[got].Pos != len("f(a, g(b), (c)") {
		t.Errorf("Closing of the first ( = %d", got)
	}
	if got := Closing(sig, len(sig)-2); got != -1 {
		t.Errorf("Closing of an unclosed ( = %d, want -1", got)
	}
}
