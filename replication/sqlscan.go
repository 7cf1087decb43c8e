package replication

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/wal"
)

// scanCode calls visit with the index of every byte of sql that is code:
// outside string literals, quoted identifiers, dollar-quoted strings and
// comments. It stops when visit returns false. Unterminated quotes and
// comments run to the end of sql.
func scanCode(sql string, visit func(i int) bool) {
	n := len(sql)
	for i := 0; i < n; {
		c := sql[i]
		switch {
		case c == '\'':
			escapes := i > 0 && (sql[i-1] == 'e' || sql[i-1] == 'E') && (i < 2 || !isIdent(sql[i-2]))
			i = skipQuoted(sql, i, '\'', escapes)
		case c == '"':
			i = skipQuoted(sql, i, '"', false)
		case c == '-' && i+1 < n && sql[i+1] == '-':
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = n
			}
		case c == '/' && i+1 < n && sql[i+1] == '*':
			i = skipBlockComment(sql, i)
		case c == '$' && dollarTag(sql, i) != "":
			tag := dollarTag(sql, i)
			if j := strings.Index(sql[i+len(tag):], tag); j >= 0 {
				i += len(tag) + j + len(tag)
			} else {
				i = n
			}
		default:
			if !visit(i) {
				return
			}
			i++
		}
	}
}

// skipQuoted returns the index after the quote that closes the one at i; a
// doubled quote is an escaped quote, and so is a backslash one in E'…'.
func skipQuoted(sql string, i int, q byte, escapes bool) int {
	for j := i + 1; j < len(sql); j++ {
		switch {
		case escapes && sql[j] == '\\':
			j++
		case sql[j] == q:
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

// skipBlockComment returns the index after the (possibly nested) comment
// that starts at i.
func skipBlockComment(sql string, i int) int {
	depth := 0
	for j := i; j+1 < len(sql); j++ {
		switch {
		case sql[j] == '/' && sql[j+1] == '*':
			depth++
			j++
		case sql[j] == '*' && sql[j+1] == '/':
			depth--
			j++
			if depth == 0 {
				return j + 1
			}
		}
	}
	return len(sql)
}

// dollarTag returns the $tag$ that opens a dollar-quoted string at i, or "".
// A $ followed by a digit is a parameter, not a tag.
func dollarTag(sql string, i int) string {
	if i > 0 && isIdent(sql[i-1]) {
		return ""
	}
	for j := i + 1; j < len(sql); j++ {
		c := sql[j]
		if c == '$' {
			return sql[i : j+1]
		}
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > i+1 && c >= '0' && c <= '9') {
			return ""
		}
	}
	return ""
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// firstKeyword returns the first word of code in sql, upper-cased.
func firstKeyword(sql string) string {
	start, end := -1, -1
	scanCode(sql, func(i int) bool {
		c := sql[i]
		switch {
		case start < 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '('):
			return true
		case start < 0 && isIdent(c):
			start, end = i, i+1
			return true
		case start < 0:
			start, end = i, i+1
			return false
		case i == end && isIdent(c):
			end++
			return true
		}
		return false
	})
	if start < 0 {
		return ""
	}
	return strings.ToUpper(sql[start:end])
}

// hasWord reports whether the word w (upper case) appears in the code of
// sql as a whole word.
func hasWord(sql, w string) bool {
	found := false
	scanCode(sql, func(i int) bool {
		if i > 0 && isIdent(sql[i-1]) || i+len(w) > len(sql) || !strings.EqualFold(sql[i:i+len(w)], w) {
			return true
		}
		found = i+len(w) == len(sql) || !isIdent(sql[i+len(w)])
		return !found
	})
	return found
}

// multipleStatements reports whether sql holds code after a semicolon.
func multipleStatements(sql string) bool {
	semi, more := false, false
	scanCode(sql, func(i int) bool {
		switch c := sql[i]; {
		case c == ';':
			semi = true
		case semi && c != ' ' && c != '\t' && c != '\n' && c != '\r':
			more = true
			return false
		}
		return true
	})
	return more
}

// refusedKeywords start statements that would break the apply transaction
// (transaction control) or change connection or process state that is not
// replicated (settings, attachments, extensions).
var refusedKeywords = map[string]bool{
	"BEGIN": true, "START": true, "COMMIT": true, "END": true, "ROLLBACK": true, "ABORT": true,
	"SET": true, "RESET": true, "USE": true, "PRAGMA": true,
	"ATTACH": true, "DETACH": true, "INSTALL": true, "LOAD": true, "FORCE": true,
	"CHECKPOINT": true, "EXPORT": true, "IMPORT": true, "VACUUM": true,
}

// checkStatement refuses SQL the applier cannot run inside its batch
// transaction. It depends only on the text, so every node refuses the same
// statements.
func checkStatement(sql string) error {
	kw := firstKeyword(sql)
	switch {
	case kw == "":
		return fmt.Errorf("%w: empty statement", ErrRefused)
	case refusedKeywords[kw]:
		return fmt.Errorf("%w: %s statements are not replicated", ErrRefused, kw)
	case multipleStatements(sql):
		return fmt.Errorf("%w: one statement per entry", ErrRefused)
	}
	return nil
}

// inlineParams replaces the ? and $n placeholders of sql with SQL literals of
// params, for statements run through Conn.Query, which binds no parameters.
func inlineParams(sql string, params []wal.Param) (string, error) {
	var b strings.Builder
	last, next := 0, 0
	var err error
	skipTo := 0
	scanCode(sql, func(i int) bool {
		if i < skipTo {
			return true
		}
		var p int
		switch {
		case sql[i] == '?':
			p = next
			next++
			skipTo = i + 1
		case sql[i] == '$' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9':
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			n, perr := strconv.Atoi(sql[i+1 : j])
			if perr != nil || n < 1 {
				err = fmt.Errorf("bad parameter %q", sql[i:j])
				return false
			}
			p = n - 1
			skipTo = j
		default:
			return true
		}
		if p >= len(params) {
			err = fmt.Errorf("statement refers to parameter %d of %d", p+1, len(params))
			return false
		}
		b.WriteString(sql[last:i])
		b.WriteString(sqlLiteral(params[p]))
		last = skipTo
		return true
	})
	if err != nil {
		return "", err
	}
	b.WriteString(sql[last:])
	return b.String(), nil
}

// sqlLiteral renders p as a typed SQL literal.
func sqlLiteral(p wal.Param) string {
	switch v := p.Value().(type) {
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10) + "::BIGINT"
	case uint64:
		return strconv.FormatUint(v, 10) + "::UBIGINT"
	case float64:
		switch {
		case math.IsNaN(v):
			return "'nan'::DOUBLE"
		case math.IsInf(v, 1):
			return "'inf'::DOUBLE"
		case math.IsInf(v, -1):
			return "'-inf'::DOUBLE"
		}
		return "'" + strconv.FormatFloat(v, 'g', -1, 64) + "'::DOUBLE"
	case string:
		lit := sqlquote.Literal(v)
		if p.Type() == wal.ParamUUID {
			lit += "::UUID"
		}
		return lit
	case []byte:
		var b strings.Builder
		b.WriteString("'")
		for _, c := range v {
			fmt.Fprintf(&b, `\x%02X`, c)
		}
		b.WriteString("'::BLOB")
		return b.String()
	case time.Time:
		if p.Type() == wal.ParamDate {
			return "DATE '" + v.Format("2006-01-02") + "'"
		}
		return "make_timestamp(" + strconv.FormatInt(v.UnixMicro(), 10) + "::BIGINT)"
	}
	return "NULL"
}
