package sqlquote

import "testing"

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
