package sqltext

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrSyntax reports SQL text that the lexer cannot split into tokens safely,
// such as an unterminated string, identifier or comment.
var ErrSyntax = errors.New("sql syntax")

// TokenKind classifies a Token.
type TokenKind uint8

// Token kinds. Space and Comment tokens carry no meaning but are kept so that
// the tokens of a text always concatenate back to it.
const (
	TokSpace       TokenKind = iota + 1
	TokComment               // -- to end of line, or /* … */ (nested)
	TokIdent                 // bare word: keyword or identifier
	TokQuotedIdent           // "identifier" with "" escapes
	TokString                // '…', E'…', X'…', B'…', N'…' or $tag$…$tag$
	TokNumber                // 1, 1.5, .5, 1e-3, 0xff, 1_000
	TokParam                 // ?, $1, $name
	TokPunct                 // one of ( ) [ ] { } , ; .
	TokOp                    // a run of operator characters, or any other byte
)

func (k TokenKind) String() string {
	switch k {
	case TokSpace:
		return "space"
	case TokComment:
		return "comment"
	case TokIdent:
		return "ident"
	case TokQuotedIdent:
		return "quoted-ident"
	case TokString:
		return "string"
	case TokNumber:
		return "number"
	case TokParam:
		return "param"
	case TokPunct:
		return "punct"
	case TokOp:
		return "op"
	}
	return fmt.Sprintf("tokenkind(%d)", uint8(k))
}

// Token is one lexical token: its kind, its exact text and its byte offset in
// the input.
type Token struct {
	Kind TokenKind
	Text string
	Pos  int
}

// Is reports whether t is the bare word w, compared case-insensitively as
// DuckDB compares unquoted identifiers and keywords.
func (t Token) Is(w string) bool {
	return t.Kind == TokIdent && strings.EqualFold(t.Text, w)
}

// IsPunct reports whether t is the punctuation character c.
func (t Token) IsPunct(c byte) bool {
	return t.Kind == TokPunct && t.Text[0] == c
}

// Name is the name a word or a quoted identifier gives: a quoted one
// without its quotes and with "" read as ", any other token as it is
// written. Case is kept: DuckDB compares names case-insensitively.
func (t Token) Name() string {
	if t.Kind == TokQuotedIdent && len(t.Text) >= 2 && strings.HasSuffix(t.Text, `"`) {
		return strings.ReplaceAll(t.Text[1:len(t.Text)-1], `""`, `"`)
	}
	return t.Text
}

// Closing returns the index in sig of the parenthesis that closes
// sig[open], or -1 when none does.
func Closing(sig []Token, open int) int {
	depth := 0
	for k := open; k < len(sig); k++ {
		switch {
		case sig[k].IsPunct('('):
			depth++
		case sig[k].IsPunct(')'):
			depth--
			if depth == 0 {
				return k
			}
		}
	}
	return -1
}

// Lex splits sql into tokens whose texts concatenate back to sql exactly. It
// never fails to cover the input: an unterminated string, quoted identifier
// or block comment becomes one token running to the end, and the error (which
// wraps ErrSyntax) says where it started.
//
// Named parameters are DuckDB's $name; a colon is an operator, so slices
// (l[a:b]) and struct literals ({'k': v}) lex as written.
func Lex(sql string) ([]Token, error) {
	var toks []Token
	var err error
	for i := 0; i < len(sql); {
		kind, end, ok := scan(sql, i)
		if !ok && err == nil {
			err = fmt.Errorf("%w: unterminated %s starting at offset %d", ErrSyntax, kind, i)
		}
		toks = append(toks, Token{Kind: kind, Text: sql[i:end], Pos: i})
		i = end
	}
	return toks, err
}

// scan reads the token starting at sql[i] and returns its kind, its end
// offset and whether it was properly terminated.
func scan(sql string, i int) (TokenKind, int, bool) {
	c := sql[i]
	next := byte(0)
	if i+1 < len(sql) {
		next = sql[i+1]
	}
	switch {
	case spaceLen(sql, i) > 0:
		j := i
		for n := spaceLen(sql, j); n > 0; n = spaceLen(sql, j) {
			j += n
		}
		return TokSpace, j, true
	case c == '-' && next == '-':
		j := strings.IndexByte(sql[i:], '\n')
		if j < 0 {
			return TokComment, len(sql), true
		}
		return TokComment, i + j + 1, true
	case c == '/' && next == '*':
		end, ok := blockComment(sql, i)
		return TokComment, end, ok
	case c == '\'':
		end, ok := quoted(sql, i+1, '\'', false)
		return TokString, end, ok
	case c == '"':
		end, ok := quoted(sql, i+1, '"', false)
		return TokQuotedIdent, end, ok
	case (c == 'e' || c == 'E') && next == '\'':
		end, ok := quoted(sql, i+2, '\'', true)
		return TokString, end, ok
	case strings.IndexByte("xXbBnN", c) >= 0 && next == '\'':
		end, ok := quoted(sql, i+2, '\'', false)
		return TokString, end, ok
	case isIdentStart(c):
		j := i + 1
		for j < len(sql) && isIdentPart(sql[j]) && spaceLen(sql, j) == 0 {
			j++
		}
		return TokIdent, j, true
	case isDigit(c) || (c == '.' && isDigit(next)):
		return TokNumber, number(sql, i), true
	case c == '$':
		return dollar(sql, i)
	case c == '?':
		j := i + 1
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		return TokParam, j, true
	case strings.IndexByte("()[]{},;.", c) >= 0:
		return TokPunct, i + 1, true
	case isOpChar(c):
		j := i + 1
		for j < len(sql) && isOpChar(sql[j]) && !startsComment(sql, j) {
			j++
		}
		return TokOp, j, true
	}
	return TokOp, i + 1, true
}

// blockComment returns the end of the /* … */ comment at sql[i]; like
// PostgreSQL's (and so DuckDB's) lexer, block comments nest.
func blockComment(sql string, i int) (int, bool) {
	depth := 0
	for j := i; j+1 < len(sql); {
		switch {
		case sql[j] == '/' && sql[j+1] == '*':
			depth++
			j += 2
		case sql[j] == '*' && sql[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j, true
			}
		default:
			j++
		}
	}
	return len(sql), false
}

// quoted returns the end of a quoted token whose body starts at sql[i]: q
// doubled is an escaped q, and with backslash set (E'…') a backslash escapes
// the next byte.
func quoted(sql string, i int, q byte, backslash bool) (int, bool) {
	for j := i; j < len(sql); j++ {
		switch {
		case backslash && sql[j] == '\\':
			j++
		case sql[j] == q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return len(sql), false
}

// number returns the end of the numeric literal at sql[i]. It is generous
// (digits, underscores between digits, one dot, one exponent, and letters for
// hex) because only the token's extent matters here, not its value. Letters,
// or an underscore, that do not continue the number take the rest of a word
// with them, '$' included: DuckDB reads 1x$a$ as 1 AS x$a$, so the $a$ there
// opens no dollar-quoted string. After digits alone a '$' does (1$a$…$a$).
func number(sql string, i int) int {
	j := i
	dot, exp := false, false
	for j < len(sql) {
		c := sql[j]
		switch {
		case isDigit(c) || c == '_' && j+1 < len(sql) && isDigit(sql[j+1]):
		case c == '.' && !dot && !exp && !(j+1 < len(sql) && sql[j+1] == '.'):
			dot = true
		case (c == 'e' || c == 'E') && !exp && exponent(sql, j+1):
			exp = true
			if !isDigit(sql[j+1]) {
				j++
			}
		case isIdentStart(c) && c < 0x80:
			for j < len(sql) && isIdentPart(sql[j]) {
				j++
			}
			continue
		default:
			return j
		}
		j++
	}
	return j
}

// exponent reports whether sql[j:] holds an exponent's digits: [+-]digit.
func exponent(sql string, j int) bool {
	if j < len(sql) && (sql[j] == '+' || sql[j] == '-') {
		j++
	}
	return j < len(sql) && isDigit(sql[j])
}

// dollar lexes what starts with '$': a positional ($1) or named ($name)
// parameter, or a dollar-quoted string ($$…$$, $tag$…$tag$).
func dollar(sql string, i int) (TokenKind, int, bool) {
	j := i + 1
	if j < len(sql) && isDigit(sql[j]) {
		for j < len(sql) && isDigit(sql[j]) {
			j++
		}
		return TokParam, j, true
	}
	for j < len(sql) && isIdentPart(sql[j]) && sql[j] != '$' {
		j++
	}
	if j < len(sql) && sql[j] == '$' {
		tag := sql[i : j+1]
		end := strings.Index(sql[j+1:], tag)
		if end < 0 {
			return TokString, len(sql), false
		}
		return TokString, j + 1 + end + len(tag), true
	}
	if j == i+1 {
		return TokOp, j, true // a lone '$'
	}
	return TokParam, j, true
}

func startsComment(sql string, j int) bool {
	return j+1 < len(sql) && (sql[j] == '-' && sql[j+1] == '-' || sql[j] == '/' && sql[j+1] == '*')
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// unicodeSpaces are the non-ASCII characters DuckDB's parser reads as
// white space outside strings and quoted identifiers (measured on DuckDB
// 1.5.6 by trying every code point of the Basic Multilingual Plane between
// two keywords): SELECT\u00a0random() is a call of random there, so it must
// be one here too. U+0085, U+1680 and U+2028 are not among them.
var unicodeSpaces = map[rune]bool{
	'\u00a0': true, '\u2000': true, '\u2001': true, '\u2002': true, '\u2003': true, '\u2004': true,
	'\u2005': true, '\u2006': true, '\u2007': true, '\u2008': true, '\u2009': true, '\u200a': true,
	'\u200b': true, '\u202f': true, '\u205f': true, '\u2060': true, '\u3000': true, '\ufeff': true,
}

// spaceLen returns the length in bytes of the white space character at
// sql[i] (ASCII or one of unicodeSpaces), or 0 if there is none.
func spaceLen(sql string, i int) int {
	if i >= len(sql) {
		return 0
	}
	if c := sql[i]; c < utf8.RuneSelf {
		if isSpace(c) {
			return 1
		}
		return 0
	}
	r, n := utf8.DecodeRuneInString(sql[i:])
	if unicodeSpaces[r] {
		return n
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIdentStart accepts ASCII letters, '_' and any non-ASCII byte, so UTF-8
// identifiers lex as one token.
func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

func isOpChar(c byte) bool { return strings.IndexByte("+-*/<>=~!@#%^&|`:", c) >= 0 }

// Significant reports whether t carries meaning (is not space or a comment).
func (t Token) Significant() bool { return t.Kind != TokSpace && t.Kind != TokComment }

// SignificantTokens returns the tokens of toks that carry meaning, in order,
// leaving out space and comments.
func SignificantTokens(toks []Token) []Token {
	var sig []Token
	for _, t := range toks {
		if t.Significant() {
			sig = append(sig, t)
		}
	}
	return sig
}
