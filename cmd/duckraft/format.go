package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rivo/uniseg"

	"github.com/duckraft/duckraft/node/wire"
)

// result is what a printer reads: a statement's columns and its chunks
// of rows (a *client.Rows, or one whose first chunk was read ahead).
type result interface {
	Names() []string
	Types() []wire.LogicalType
	NextChunk() (*wire.DataChunk, error)
}

// printer writes a result in one output mode.
type printer interface {
	print(rows result, p *progressLine) error
}

// modes are the output modes of --format and .mode, named as DuckDB's
// shell names them.
var modes = []string{"duckbox", "box", "table", "markdown", "csv", "json", "jsonlines", "line", "list"}

// maxRows is how many rows duckbox shows, as DuckDB's shell: the first and
// last halves of a longer result, with the count in a footer.
const maxRows = 40

// newPrinter returns the printer of mode writing to w; duckbox fits a
// result into the width of w when it is a terminal.
func newPrinter(mode string, w io.Writer) (printer, error) {
	switch mode {
	case "duckbox":
		return duckboxPrinter{w: w, maxRows: maxRows, width: terminalWidth(w)}, nil
	case "box", "table", "markdown":
		return columnPrinter{w: w, style: mode}, nil
	case "csv":
		return csvPrinter{w: w}, nil
	case "json":
		return jsonPrinter{w: w}, nil
	case "jsonlines":
		return jsonPrinter{w: w, lines: true}, nil
	case "line":
		return linePrinter{w: w}, nil
	case "list":
		return listPrinter{w: w}, nil
	}
	return nil, fmt.Errorf("unknown output mode %q: use %s", mode, strings.Join(modes, ", "))
}

// writerOf is the writer a printer writes to, for .mode to keep it.
func writerOf(p printer) io.Writer {
	switch p := p.(type) {
	case duckboxPrinter:
		return p.w
	case columnPrinter:
		return p.w
	case csvPrinter:
		return p.w
	case jsonPrinter:
		return p.w
	case linePrinter:
		return p.w
	case listPrinter:
		return p.w
	}
	panic(fmt.Sprintf("writerOf: unknown printer %T", p))
}

// cell renders row i of a column as DuckDB prints it.
func cell(v *wire.Vector, i int) string {
	if !v.IsValid(i) {
		return "NULL"
	}
	s, err := v.Text(i)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return s
}

// eachChunk calls fn for every chunk of rows, counting rows for p.
func eachChunk(rows result, p *progressLine, fn func(*wire.DataChunk) error) error {
	for {
		c, err := rows.NextChunk()
		if err != nil {
			return err
		}
		if c == nil {
			return nil
		}
		p.add(c.Rows)
		if err := fn(c); err != nil {
			return err
		}
	}
}

// eachRow calls fn with the cells of every row.
func eachRow(rows result, p *progressLine, fn func(rec []string) error) error {
	rec := make([]string, len(rows.Names()))
	return eachChunk(rows, p, func(c *wire.DataChunk) error {
		for i := 0; i < c.Rows; i++ {
			for j, col := range c.Columns {
				rec[j] = cell(col, i)
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// numeric reports whether DuckDB right-aligns a column of type t.
func numeric(t wire.LogicalType) bool {
	switch t.ID {
	case wire.TypeTinyInt, wire.TypeSmallInt, wire.TypeInteger, wire.TypeBigInt, wire.TypeHugeInt,
		wire.TypeUTinyInt, wire.TypeUSmallInt, wire.TypeUInteger, wire.TypeUBigInt, wire.TypeUHugeInt,
		wire.TypeDecimal, wire.TypeFloat, wire.TypeDouble:
		return true
	}
	return false
}

// width is how many terminal columns s takes: its grapheme clusters, two
// for a wide one (CJK, emoji), none for a zero-width one.
func width(s string) int { return uniseg.StringWidth(s) }

type csvPrinter struct{ w io.Writer }

func (cp csvPrinter) print(rows result, p *progressLine) error {
	bw := bufio.NewWriterSize(cp.w, 1<<16)
	w := csv.NewWriter(bw)
	w.Write(rows.Names())
	err := eachRow(rows, p, w.Write)
	w.Flush()
	if err != nil {
		return err
	}
	if err := w.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// listPrinter is DuckDB's list mode: the names, then one line per row,
// values separated by '|'.
type listPrinter struct{ w io.Writer }

func (lp listPrinter) print(rows result, p *progressLine) error {
	bw := bufio.NewWriterSize(lp.w, 1<<16)
	bw.WriteString(strings.Join(rows.Names(), "|") + "\n")
	err := eachRow(rows, p, func(rec []string) error {
		_, err := bw.WriteString(strings.Join(rec, "|") + "\n")
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// linePrinter is DuckDB's line mode: one "name = value" line per column,
// the names right-aligned, a blank line between rows.
type linePrinter struct{ w io.Writer }

func (lp linePrinter) print(rows result, p *progressLine) error {
	bw := bufio.NewWriterSize(lp.w, 1<<16)
	names := rows.Names()
	w := 5
	for _, n := range names {
		w = max(w, width(n))
	}
	first := true
	err := eachRow(rows, p, func(rec []string) error {
		if !first {
			bw.WriteString("\n")
		}
		first = false
		for j, v := range rec {
			fmt.Fprintf(bw, "%s%s = %s\n", strings.Repeat(" ", w-width(names[j])), names[j], v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// jsonPrinter is DuckDB's json mode (an array of objects, one per row) or
// jsonlines (one object per line). Numbers, booleans, NULL, lists, arrays,
// structs and maps are JSON values; everything else is DuckDB's text.
type jsonPrinter struct {
	w     io.Writer
	lines bool
}

func (jp jsonPrinter) print(rows result, p *progressLine) error {
	bw := bufio.NewWriterSize(jp.w, 1<<16)
	names := rows.Names()
	keys := make([][]byte, len(names))
	for i, n := range names {
		keys[i], _ = json.Marshal(n)
	}
	first := true
	if !jp.lines {
		bw.WriteString("[")
	}
	err := eachChunk(rows, p, func(c *wire.DataChunk) error {
		for i := 0; i < c.Rows; i++ {
			switch {
			case jp.lines:
			case first:
				bw.WriteString("\n")
			default:
				bw.WriteString(",\n")
			}
			first = false
			bw.WriteString("{")
			for j, col := range c.Columns {
				if j > 0 {
					bw.WriteString(",")
				}
				bw.Write(keys[j])
				bw.WriteString(":")
				bw.Write(jsonValue(col, i))
			}
			bw.WriteString("}")
			if jp.lines {
				bw.WriteString("\n")
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !jp.lines {
		bw.WriteString("\n]\n")
	}
	return bw.Flush()
}

// jsonValue is row i of v as JSON: nested types as arrays and objects,
// their elements in turn.
func jsonValue(v *wire.Vector, i int) []byte {
	if !v.IsValid(i) {
		return []byte("null")
	}
	switch v.Type.ID {
	case wire.TypeList, wire.TypeMap:
		if len(v.Children) != 1 || i >= len(v.Entries) {
			break
		}
		e, child := v.Entries[i], v.Children[0]
		start, n := int(e.Offset), int(e.Length)
		if start+n > child.Count || start+n < start {
			break
		}
		if v.Type.ID == wire.TypeMap && len(child.Children) == 2 {
			return jsonObject(n, func(k int) (string, []byte) {
				return cell(child.Children[0], start+k), jsonValue(child.Children[1], start+k)
			})
		}
		return jsonArray(n, func(k int) []byte { return jsonValue(child, start+k) })
	case wire.TypeArray:
		n := int(v.Type.ArraySize)
		if len(v.Children) != 1 || (i+1)*n > v.Children[0].Count {
			break
		}
		return jsonArray(n, func(k int) []byte { return jsonValue(v.Children[0], i*n+k) })
	case wire.TypeStruct:
		if len(v.Children) != len(v.Type.Fields) {
			break
		}
		return jsonObject(len(v.Children), func(k int) (string, []byte) {
			return v.Type.Fields[k].Name, jsonValue(v.Children[k], i)
		})
	case wire.TypeBoolean, wire.TypeTinyInt, wire.TypeSmallInt, wire.TypeInteger, wire.TypeBigInt,
		wire.TypeUTinyInt, wire.TypeUSmallInt, wire.TypeUInteger, wire.TypeUBigInt, wire.TypeHugeInt,
		wire.TypeUHugeInt, wire.TypeDecimal, wire.TypeFloat, wire.TypeDouble:
		if s := cell(v, i); json.Valid([]byte(s)) {
			return []byte(s)
		}
	}
	b, _ := json.Marshal(cell(v, i))
	return b
}

func jsonArray(n int, elem func(k int) []byte) []byte {
	b := []byte("[")
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, elem(k)...)
	}
	return append(b, ']')
}

func jsonObject(n int, field func(k int) (string, []byte)) []byte {
	b := []byte("{")
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		name, val := field(k)
		key, _ := json.Marshal(name)
		b = append(append(append(b, key...), ':'), val...)
	}
	return append(b, '}')
}

// columnPrinter is DuckDB's box, table and markdown modes: every row, in
// columns as wide as their widest value, the names centered and the values
// left-aligned (markdown marks numeric columns right-aligned).
type columnPrinter struct {
	w     io.Writer
	style string
}

func (cp columnPrinter) print(rows result, p *progressLine) error {
	names := rows.Names()
	header := make([]string, len(names))
	widths := make([]int, len(names))
	for j, n := range names {
		header[j] = cp.escape(n)
		widths[j] = width(header[j])
	}
	var body [][]string
	err := eachRow(rows, p, func(rec []string) error {
		r := make([]string, len(rec))
		for j, s := range rec {
			r[j] = cp.escape(s)
			widths[j] = max(widths[j], width(r[j]))
		}
		body = append(body, r)
		return nil
	})
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(cp.w, 1<<16)
	rule := func(left, mid, right, dash string) {
		bw.WriteString(left)
		for j, w := range widths {
			if j > 0 {
				bw.WriteString(mid)
			}
			bw.WriteString(strings.Repeat(dash, w+2))
		}
		bw.WriteString(right + "\n")
	}
	line := func(bar string, r []string, center bool) {
		for j, s := range r {
			pad := widths[j] - width(s)
			l := 0
			if center {
				l = pad / 2
			}
			bw.WriteString(bar + " " + strings.Repeat(" ", l) + s + strings.Repeat(" ", pad-l) + " ")
		}
		bw.WriteString(bar + "\n")
	}
	switch cp.style {
	case "box":
		rule("┌", "┬", "┐", "─")
		line("│", header, true)
		rule("├", "┼", "┤", "─")
		for _, r := range body {
			line("│", r, false)
		}
		rule("└", "┴", "┘", "─")
	case "table":
		rule("+", "+", "+", "-")
		line("|", header, true)
		rule("+", "+", "+", "-")
		for _, r := range body {
			line("|", r, false)
		}
		rule("+", "+", "+", "-")
	case "markdown":
		line("|", header, true)
		bw.WriteString("|")
		for j, t := range rows.Types() {
			if numeric(t) {
				bw.WriteString(strings.Repeat("-", widths[j]+1) + ":|")
			} else {
				bw.WriteString(strings.Repeat("-", widths[j]+2) + "|")
			}
		}
		bw.WriteString("\n")
		for _, r := range body {
			line("|", r, false)
		}
	}
	return bw.Flush()
}

// escape keeps a value on its line (box) or in its cell (markdown).
func (cp columnPrinter) escape(s string) string {
	switch cp.style {
	case "box":
		return strings.ReplaceAll(s, "\n", `\n`)
	case "markdown":
		return strings.ReplaceAll(s, "|", `\|`)
	}
	return s
}

// typeName is a column's type as duckbox shows it: int32 for INTEGER and
// the like, a list as its element's name with [], the rest lower case.
func typeName(t wire.LogicalType) string {
	if t.Alias != "" {
		return strings.ToLower(t.Alias)
	}
	switch t.ID {
	case wire.TypeTinyInt:
		return "int8"
	case wire.TypeSmallInt:
		return "int16"
	case wire.TypeInteger:
		return "int32"
	case wire.TypeBigInt:
		return "int64"
	case wire.TypeHugeInt:
		return "int128"
	case wire.TypeUTinyInt:
		return "uint8"
	case wire.TypeUSmallInt:
		return "uint16"
	case wire.TypeUInteger:
		return "uint32"
	case wire.TypeUBigInt:
		return "uint64"
	case wire.TypeUHugeInt:
		return "uint128"
	case wire.TypeList:
		if t.Child != nil {
			return typeName(*t.Child) + "[]"
		}
	}
	return strings.ToLower(t.String())
}

// escapeControl writes control characters as DuckDB's box renderer does
// (\n, \t, …), so that a value stays on its row.
func escapeControl(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 32 }) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 32 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('\\')
		switch c {
		case 7:
			b.WriteByte('a')
		case 8:
			b.WriteByte('b')
		case 9:
			b.WriteByte('t')
		case 10:
			b.WriteByte('n')
		case 11:
			b.WriteByte('v')
		case 12:
			b.WriteByte('f')
		case 13:
			b.WriteByte('r')
		case 27:
			b.WriteByte('e')
		default:
			b.WriteString(strconv.Itoa(int(c)))
		}
	}
	return b.String()
}
