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

func TestSplitStatements(t *testing.T) {
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
		got, err := SplitStatements(tt.sql)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitStatements(%q) = %q, %v; want %q", tt.sql, got, err, tt.want)
		}
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
// non-empty tokens at the right offsets, and that splitting and
// Deterministic never panic on what it lexes.
func FuzzLex(f *testing.F) {
	for _, s := range []string{
		"SELECT now(), 'now()', \"now\" -- now()\n/* /* now() */ */ FROM t",
		"INSERT INTO t (a, b) VALUES (random(), $1) ON CONFLICT DO NOTHING RETURNING *",
		"SELECT $$a$$, $x$b$x$, E'\\'', x'ff', 1.5e-3, .5, l[1:2], {'a': 1}::STRUCT(a INT)",
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
		SplitStatements(sql)
		Deterministic(sql, leaderTime, testVolatile)
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
