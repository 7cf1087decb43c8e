package sqlquote

import (
	"slices"
	"testing"
)

func TestIdent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"t", `"t"`},
		{"Mixed Case", `"Mixed Case"`},
		{"select", `"select"`},
		{`a"b`, `"a""b"`},
		{`"`, `""""`},
		{`""`, `""""""`},
		{"it's", `"it's"`},
		{`back\slash`, `"back\slash"`},
		{"ünïcode", `"ünïcode"`},
		{"new\nline", "\"new\nline\""},
	}
	for _, tt := range tests {
		if got := Ident(tt.in); got != tt.want {
			t.Errorf("Ident(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLiteral(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `''`},
		{"duck", `'duck'`},
		{"it's", `'it''s'`},
		{"'", `''''`},
		{"''", `''''''`},
		{`say "hi"`, `'say "hi"'`},
		{`back\slash`, `'back\slash'`},
		{"ünïcode", `'ünïcode'`},
		{"new\nline", "'new\nline'"},
		{"x'); DROP TABLE t; --", `'x''); DROP TABLE t; --'`},
	}
	for _, tt := range tests {
		if got := Literal(tt.in); got != tt.want {
			t.Errorf("Literal(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPath(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"t"}, `"t"`},
		{[]string{"main", "t"}, `"main"."t"`},
		{[]string{"a", "b", "t"}, `"a"."b"."t"`},
		{[]string{"a.b", `c"d`, "t"}, `"a.b"."c""d"."t"`},
	}
	for _, tt := range tests {
		if got := Path(tt.in); got != tt.want {
			t.Errorf("Path(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSplitPath(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"t", []string{"t"}},
		{" main . t ", []string{"main", "t"}},
		{`a."b.c".d`, []string{"a", "b.c", "d"}},
		{`"x""y"."t t"`, []string{`x"y`, "t t"}},
		{"a.b.c.t", []string{"a", "b", "c", "t"}},
		{"", []string{""}},
	}
	for _, tt := range tests {
		if got := SplitPath(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("SplitPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, p := range [][]string{{"a"}, {"a.b", `c"d`, " t "}} {
		if got := SplitPath(Path(p)); !slices.Equal(got, p) {
			t.Errorf("SplitPath(Path(%q)) = %q", p, got)
		}
	}
}
