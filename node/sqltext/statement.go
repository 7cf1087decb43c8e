package sqltext

import (
	"slices"
	"strings"
	"unicode"
)

// Statement is one statement's text lexed once: the text, its tokens, the
// significant ones among them and its verb. Classification, routing, the
// leader's rules and the applier take a Statement instead of a string, so
// that a client's statement is read once on its way; where DuckDB needs the
// text, it gets Text. Make one with Parse or Split. The slices its methods
// return are shared by every copy of the Statement: callers read them and
// never change them.
type Statement struct {
	// Text is the statement as written: what Parse was given, or a
	// statement Split cut from a text, without the space around it.
	Text string

	toks   []Token
	sig    []Token
	verb   string
	verbAt int
	err    error
}

// Parse lexes text, one statement or any text to be read whole (a
// definition, a log entry's statement), into a Statement. It never fails:
// text the lexer cannot split safely still gives tokens that cover it (see
// Lex), and Err reports why.
func Parse(text string) Statement {
	toks, err := Lex(text)
	return newStatement(text, toks, err)
}

func newStatement(text string, toks []Token, err error) Statement {
	s := Statement{Text: text, toks: toks, err: err}
	for _, t := range toks {
		if t.Significant() {
			s.sig = append(s.sig, t)
		}
	}
	s.verb, s.verbAt = verbOf(s.sig)
	return s
}

// Tokens returns every token of the statement, space and comments
// included: they concatenate to Text.
func (s Statement) Tokens() []Token { return s.toks }

// Significant returns the tokens that carry meaning, in order: Tokens
// without space and comments.
func (s Statement) Significant() []Token { return s.sig }

// Verb returns the statement's main keyword in lower case and its index in
// Significant, as the function Verb finds them: "" and -1 for a statement
// without words, the zero Statement included.
func (s Statement) Verb() (string, int) {
	if s.verb == "" {
		return "", -1
	}
	return s.verb, s.verbAt
}

// LiteralInsert reports whether s is an INSERT INTO t [(columns)] VALUES
// of literals and parameters only (numbers, strings, NULL, TRUE, FALSE, a
// sign): the hot path of writes, which the lexer alone decides. Such a
// statement calls nothing and reads no row.
func (s Statement) LiteralInsert() bool {
	if s.Err() != nil {
		return false
	}
	sig := s.Significant()
	k := 0
	next := func(w string) bool {
		if k < len(sig) && sig[k].Is(w) {
			k++
			return true
		}
		return false
	}
	if !next("insert") || !next("into") {
		return false
	}
	for k < len(sig) && (sig[k].Kind == TokIdent || sig[k].Kind == TokQuotedIdent) {
		k++
		if k < len(sig) && sig[k].IsPunct('.') {
			k++
			continue
		}
		break
	}
	if k < len(sig) && sig[k].IsPunct('(') {
		for k++; k < len(sig) && !sig[k].IsPunct(')'); k++ {
			if t := sig[k]; t.Kind != TokIdent && t.Kind != TokQuotedIdent && !t.IsPunct(',') {
				return false
			}
		}
		k++
	}
	if !next("values") {
		return false
	}
	for ; k < len(sig); k++ {
		t := sig[k]
		switch t.Kind {
		case TokNumber, TokString, TokParam:
		case TokPunct:
			if !slices.Contains([]string{"(", ")", ",", ";"}, t.Text) {
				return false
			}
		case TokOp:
			if t.Text != "-" && t.Text != "+" {
				return false
			}
		case TokIdent:
			if !t.Is("null") && !t.Is("true") && !t.Is("false") {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Err returns the lexer's error (wrapping ErrSyntax) for a text it cannot
// split safely, such as an unterminated string, or nil. Each rule decides
// what such a text means to it.
func (s Statement) Err() error { return s.err }

// Split splits text on top-level semicolons into its statements, each
// trimmed of the space around it, leaving out the semicolons and the
// statements that are empty or only comments. It lexes text once: each
// statement's tokens are the text's own, with offsets from the start of
// the statement. A text the lexer cannot split safely is an error (wrapping
// ErrSyntax).
func Split(text string) ([]Statement, error) {
	toks, err := Lex(text)
	if err != nil {
		return nil, err
	}
	var out []Statement
	// The statement being read starts at byte start, token first.
	first, start, depth, significant := 0, 0, 0, false
	flush := func(last, end int) {
		if significant {
			out = append(out, cut(text, toks[first:last], start, end))
		}
	}
	for i, t := range toks {
		switch {
		case t.IsPunct('(') || t.IsPunct('[') || t.IsPunct('{'):
			depth++
		case t.IsPunct(')') || t.IsPunct(']') || t.IsPunct('}'):
			depth = max(depth-1, 0)
		case t.IsPunct(';') && depth == 0:
			flush(i, t.Pos)
			first, start, significant = i+1, t.Pos+1, false
			continue
		}
		if t.Significant() {
			significant = true
		}
	}
	flush(len(toks), len(text))
	return out, nil
}

// cut makes the statement text[start:end], trimmed of space, from toks,
// the tokens of text that cover that range. Trimming removes what
// strings.TrimSpace calls space, which is not quite what the lexer calls
// space (U+0085 is a letter to it, U+200B space); when the trimmed text
// does not begin and end on a boundary of toks, it is lexed alone, so that
// a statement's tokens are always what Lex makes of its text.
func cut(text string, toks []Token, start, end int) Statement {
	seg := text[start:end]
	stmt := strings.TrimSpace(seg)
	if stmt == "" {
		return Parse(stmt)
	}
	from := start + len(seg) - len(strings.TrimLeftFunc(seg, unicode.IsSpace))
	to := from + len(stmt)
	lo, hi := -1, -1
	for i, t := range toks {
		if t.Pos == from {
			lo = i
		}
		if t.Pos+len(t.Text) == to {
			hi = i + 1
		}
	}
	if lo < 0 || hi <= lo {
		return Parse(stmt)
	}
	own := make([]Token, hi-lo)
	for i, t := range toks[lo:hi] {
		t.Pos -= from
		own[i] = t
	}
	return newStatement(stmt, own, nil)
}
