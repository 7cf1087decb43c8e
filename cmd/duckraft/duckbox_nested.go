package main

import "strings"

// The layout of nested values over lines, as DuckDB's box renderer lays
// out a LIST, STRUCT, MAP or JSON value whose column was shortened in a
// short result (its JSONFormatter): brackets, commas and colons split the
// text into parts; what fits on the line stays on it, a struct's fields go
// one per line indented by 2, a list's elements fill lines; when that
// takes more than the lines allowed, or is too wide, a compacter layout;
// when that fails too, the text as it was (wrapped at the column's width).

type nestedKind byte

const (
	partOpen nestedKind = iota
	partClose
	partLiteral
	partColon
	partComma
	partNull
)

type nestedPart struct {
	kind nestedKind
	text string
}

// nestedParts splits a nested value's text into its parts, as DuckDB's
// JSON parser does: quoted strings kept whole, blanks outside them
// dropped but inside unquoted values, NULL after '[' or ':' as null, and
// the escaped line breaks and tabs (\n, \t) of the text dropped. ok is
// false when brackets do not match: DuckDB then lays out the parts read
// so far, losing the rest of the value from the screen; this keeps the
// value whole instead.
func nestedParts(s string) (parts []nestedPart, ok bool) {
	literal := func(c byte) {
		if n := len(parts); n > 0 && parts[n-1].kind == partLiteral {
			parts[n-1].text += string(c)
			return
		}
		parts = append(parts, nestedPart{partLiteral, string(c)})
	}
	const (
		regular = iota
		inQuote
		escape
	)
	state := regular
	quote := byte('"')
	canValue, unquoted := false, false
	var open []byte
	for pos := 0; pos < len(s); pos++ {
		c := s[pos]
		switch state {
		case inQuote:
			switch c {
			case quote:
				state = regular
			case '\\':
				state = escape
			}
			literal(c)
			continue
		case escape:
			state = inQuote
			literal(c)
			continue
		}
		if canValue && pos+4 < len(s) && strings.EqualFold(s[pos:pos+4], "null") {
			parts = append(parts, nestedPart{partNull, "null"})
			pos += 3
			continue
		}
		switch c {
		case '[', '{':
			open = append(open, c)
			parts = append(parts, nestedPart{partOpen, string(c)})
			canValue = c == '['
		case ']', '}':
			if len(open) == 0 || (open[len(open)-1] == '[') != (c == ']') {
				return parts, false
			}
			open = open[:len(open)-1]
			parts = append(parts, nestedPart{partClose, string(c)})
			unquoted = false
		case '"', '\'':
			literal(c)
			quote = c
			state = inQuote
		case ',':
			parts = append(parts, nestedPart{partComma, ","})
			unquoted = false
		case ':':
			parts = append(parts, nestedPart{partColon, ":"})
			canValue = true
		case '\\':
			if pos+1 < len(s) && (s[pos+1] == 'n' || s[pos+1] == 't') {
				pos++
				continue
			}
			literal(c)
		case ' ':
			if unquoted {
				literal(c)
			}
		case '\t', '\n':
		default:
			unquoted = true
			literal(c)
		}
	}
	return parts, true
}

type nestedMode byte

const (
	nestedStandard nestedMode = iota
	compactVertical
	compactHorizontal
)

type inlineMode byte

const (
	notInlined inlineMode = iota
	inlinedSingleLine
	inlinedMultiLine
)

type nestedResult byte

const (
	nestedFits nestedResult = iota
	tooManyRows
	tooWide
)

// nestedLayout is one attempt at laying out the parts.
type nestedLayout struct {
	parts    []nestedPart
	mode     nestedMode
	out      strings.Builder
	i        int // the part being laid out
	rows     int
	line     int // width of the current line
	depth    int
	maxRows  int
	maxWidth int
	indent   int
	result   nestedResult
}

// layOutNested lays out a nested value over at most maxRows more lines of
// maxWidth columns, or returns it as it was when it cannot.
func layOutNested(s string, maxRows, maxWidth int) string {
	parts, ok := nestedParts(s)
	if !ok {
		return s
	}
	try := func(mode nestedMode, indent int) (string, nestedResult) {
		l := &nestedLayout{parts: parts, mode: mode, maxRows: maxRows, maxWidth: maxWidth, indent: indent}
		for l.i = 0; l.i < len(parts) && l.result == nestedFits; l.i++ {
			l.part(parts[l.i], notInlined)
		}
		return l.out.String(), l.result
	}
	out, res := try(nestedStandard, 2)
	if res == nestedFits {
		return out
	}
	mode, indent := compactVertical, 2
	if res == tooWide {
		mode, indent = compactHorizontal, 1
	}
	if out, res = try(mode, indent); res == nestedFits {
		return out
	}
	return s
}

func (l *nestedLayout) fits(w int) bool { return l.line+w <= l.maxWidth }

func (l *nestedLayout) literal(text string, skipIfNotFits bool) {
	w := width(text)
	if !l.fits(w) {
		if skipIfNotFits {
			return
		}
		l.newline()
		if l.result != nestedFits {
			return
		}
	}
	l.out.WriteString(text)
	l.line += w
	if l.line > l.maxWidth {
		l.result = tooWide
	}
}

func (l *nestedLayout) space() { l.literal(" ", true) }

func (l *nestedLayout) newline() {
	l.out.WriteString("\n" + strings.Repeat(" ", l.depth))
	l.rows++
	if l.rows > l.maxRows {
		l.result = tooManyRows
		return
	}
	l.line = l.depth
	if l.line > l.maxWidth {
		l.result = tooWide
	}
}

// sizeOf is how wide a part takes on a line: its text, and a blank after
// a comma or colon.
func sizeOf(p nestedPart) int {
	w := width(p.text)
	if p.kind == partComma || p.kind == partColon {
		w++
	}
	return w
}

func (l *nestedLayout) part(p nestedPart, inline inlineMode) {
	switch p.kind {
	case partOpen:
		if p.text == "{" {
			l.depth += l.indent
		} else {
			l.depth++
		}
		l.literal(p.text, false)
		if inline != notInlined {
			return
		}
		// Does everything up to the matching bracket fit on this line?
		child := notInlined
		depth, size := 0, l.line
		end := l.i + 1
		for ; end < len(l.parts) && size <= l.maxWidth; end++ {
			q := l.parts[end]
			if q.kind == partOpen {
				depth++
			} else if q.kind == partClose {
				if depth == 0 {
					if size+1 < l.maxWidth {
						child = inlinedSingleLine
					}
					break
				}
				depth--
			}
			size += sizeOf(q)
		}
		if p.text == "[" {
			// A list fills lines, unless a struct is in it; DuckDB looks
			// only as far as the first bracket that closes.
			for end = l.i + 1; end < len(l.parts); end++ {
				q := l.parts[end]
				if q.kind == partOpen && q.text == "{" {
					break
				}
				if q.kind == partClose {
					child = inlinedMultiLine
					break
				}
			}
		}
		if child != notInlined {
			for k := l.i + 1; k <= end && k < len(l.parts); k++ {
				q := l.parts[k]
				if child == inlinedMultiLine && k+1 <= end && k+1 < len(l.parts) {
					if n := l.parts[k+1]; (n.kind == partComma || n.kind == partClose) && !l.fits(width(q.text+n.text)) {
						l.newline()
					}
				}
				l.part(q, child)
			}
			l.i = end
			return
		}
		if l.mode == compactVertical && l.i+1 < len(l.parts) && l.parts[l.i+1].kind == partOpen {
			// That bracket starts its own line.
			return
		}
		l.newline()
	case partClose:
		d := 1
		if p.text == "}" {
			d = l.indent
		}
		l.depth = max(0, l.depth-d)
		if inline == notInlined {
			l.newline()
		}
		l.literal(p.text, false)
	case partComma, partColon:
		l.literal(p.text, false)
		always := l.mode != compactHorizontal && p.kind == partColon
		if inline != notInlined || always {
			l.space()
			return
		}
		if l.mode != nestedStandard {
			// Up to the next comma on this line, when it fits.
			depth, size := 0, l.line+1
			inlineComma := false
			end := l.i + 1
			for ; end < len(l.parts) && size <= l.maxWidth; end++ {
				q := l.parts[end]
				if q.kind == partOpen {
					depth++
				} else if q.kind == partClose {
					if depth == 0 {
						inlineComma = size+1 < l.maxWidth
						break
					}
					depth--
				}
				if depth == 0 && q.kind == partComma {
					inlineComma = size+2 <= l.maxWidth
					break
				}
				size += sizeOf(q)
			}
			if inlineComma {
				l.space()
				for k := l.i + 1; k < end; k++ {
					l.part(l.parts[k], inlinedSingleLine)
				}
				l.i = end - 1
				return
			}
		}
		l.newline()
	default:
		l.literal(p.text, false)
	}
}
