package main

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/duckraft/duckraft/node/wire"
)

// duckboxPrinter draws a result as DuckDB's shell does by default (its
// box renderer, src/common/box_renderer.cpp): names and types centered
// above the values, numbers right-aligned and the rest left-aligned; of a
// result longer than maxRows (+3) the first and last halves with three
// rows of "·" between them; columns too wide for maxWidth shortened with
// "…", then middle ones left out; and a footer with the row count when
// rows were left out, the result is empty, or it has 10 rows or more.
type duckboxPrinter struct {
	w        io.Writer
	maxRows  int
	maxWidth int
}

// maxColWidth is how narrow duckbox shortens a wide column before it
// leaves columns out.
const maxColWidth = 20

// boxCell is one value to draw, with its alignment; layout cells (the
// "·" and "…" fillers) are never escaped.
type boxCell struct {
	text  string
	right bool
}

func (dp duckboxPrinter) print(rows result, p *progressLine) error {
	names := rows.Names()
	types := rows.Types()
	right := make([]bool, len(types))
	for j, t := range types {
		right[j] = numeric(t)
	}
	// head keeps the first rows (all of a short result); tail the last
	// half of maxRows, a ring.
	half := dp.maxRows / 2
	var head [][]string
	tail := make([][]string, 0, half)
	next, total := 0, 0
	err := eachRow(rows, p, func(rec []string) error {
		r := make([]string, len(rec))
		for j, s := range rec {
			r[j] = escapeControl(s)
		}
		if len(head) < dp.maxRows+3 {
			head = append(head, r)
		}
		if len(tail) < half {
			tail = append(tail, r)
		} else if half > 0 {
			tail[next] = r
			next = (next + 1) % half
		}
		total++
		return nil
	})
	if err != nil {
		return err
	}
	top, bottom := head, [][]string(nil)
	if total > dp.maxRows+3 {
		// Hiding fewer than 4 rows would print more lines, not fewer.
		top = head[:dp.maxRows-half]
		bottom = append(append(bottom, tail[next:]...), tail[:next]...)
	}
	return dp.draw(names, types, right, top, bottom, total)
}

// draw writes the box of top and bottom, the rows shown of total.
func (dp duckboxPrinter) draw(names []string, types []wire.LogicalType, right []bool, top, bottom [][]string, total int) error {
	ncols := len(names)
	if ncols == 0 {
		return nil
	}
	footer := newBoxFooter(total, len(top)+len(bottom), ncols)
	header := make([]string, ncols)
	typ := make([]string, ncols)
	widths := make([]int, ncols)
	for j := range names {
		header[j], typ[j] = escapeControl(names[j]), typeName(types[j])
		widths[j] = max(width(header[j]), width(typ[j]))
	}
	for _, part := range [][][]string{top, bottom} {
		for _, r := range part {
			for j, s := range r {
				widths[j] = max(widths[j], width(s))
			}
		}
	}
	length := 1
	for _, w := range widths {
		length += w + 3
	}
	if footer.must && length < footer.length() {
		// Room for the row count, always shown when rows were left out.
		widths[0] += footer.length() - length
	}
	widths, pruned := fitWidths(widths, dp.maxWidth)
	if len(pruned) > 0 {
		footer.hiddenColumns = true
		footer.columns += " (" + strconv.Itoa(ncols-len(pruned)) + " shown)"
	}
	// The columns drawn; -1 is the "…" column in place of those left out.
	var cols []int
	for j := range ncols {
		switch {
		case !pruned[j]:
			cols = append(cols, j)
		case len(cols) == 0 || cols[len(cols)-1] != -1:
			cols = append(cols, -1)
		}
	}
	colWidth := func(c int) int {
		if c < 0 {
			return 1
		}
		return widths[c]
	}
	length = 1
	for _, c := range cols {
		length += colWidth(c) + 3
	}

	bw := bufio.NewWriterSize(dp.w, 1<<16)
	rule := func(left, mid, end string) {
		bw.WriteString(left)
		for k, c := range cols {
			if k > 0 {
				bw.WriteString(mid)
			}
			bw.WriteString(strings.Repeat("─", colWidth(c)+2))
		}
		bw.WriteString(end + "\n")
	}
	// value writes one cell: s fitted to w columns and aligned.
	value := func(s string, w int, align byte) {
		s = fit(s, w)
		pad := w - width(s) + 2
		l := 1
		switch align {
		case 'm':
			l = pad / 2
		case 'r':
			l = pad - 1
		}
		bw.WriteString("│" + strings.Repeat(" ", l) + s + strings.Repeat(" ", pad-l))
	}
	align := func(c int) byte {
		switch {
		case c < 0:
			return 'm'
		case right[c]:
			return 'r'
		}
		return 'l'
	}
	row := func(text func(c int) string, centered bool) {
		for _, c := range cols {
			a := align(c)
			if centered {
				a = 'm'
			}
			t := "…"
			if c >= 0 {
				t = text(c)
			}
			value(t, colWidth(c), a)
		}
		bw.WriteString("│\n")
	}

	rule("┌", "┬", "┐")
	row(func(c int) string { return header[c] }, true)
	row(func(c int) string { return typ[c] }, true)
	if len(top) > 0 {
		rule("├", "┼", "┤")
	}
	for _, r := range top {
		row(func(c int) string { return r[c] }, false)
	}
	if len(bottom) > 0 {
		prev, next := top[len(top)-1], bottom[0]
		for range 3 {
			for _, c := range cols {
				if c < 0 {
					value("·", 1, 'm')
					continue
				}
				value(divider(prev[c], next[c], widths[c], right[c]), widths[c], align(c))
			}
			bw.WriteString("│\n")
		}
		for _, r := range bottom {
			row(func(c int) string { return r[c] }, false)
		}
	}
	boxFooterLines(bw, rule, footer, length, total, ncols)
	return bw.Flush()
}

// divider is a column's cell in the three rows between the first and the
// last rows: a "·" in the middle of the narrower of the values around it.
func divider(prev, next string, w int, right bool) string {
	up, down := min(w, width(prev)), min(w, width(next))
	n := min(up, down)
	if up == 0 {
		n = down
	} else if down == 0 {
		n = up
	}
	if n <= 1 {
		return "·"
	}
	pad := n - 1
	l := pad / 2
	if right {
		l = pad - pad/2
	}
	return strings.Repeat(" ", l) + "·" + strings.Repeat(" ", pad-l)
}

// footer closes the box: with the row count (and the column count, and
// how many rows were shown) when DuckDB's shell shows them, else the
// bottom line alone.
func boxFooterLines(bw *bufio.Writer, rule func(left, mid, end string), f boxFooter, length, total, ncols int) {
	both := length >= len(f.rows)+len(f.columns)+6 && ((f.hiddenColumns && total > 0) || (total >= 10 && ncols > 1))
	rows := length >= f.length() && (total == 0 || total >= 10)
	if !both && !rows {
		rule("└", "┴", "┘")
		return
	}
	rule("├", "┴", "┤")
	pad := length - len(f.rows) - 4
	if both {
		pad -= len(f.columns)
	}
	extra, shown := "", f.shown
	if f.hiddenRows && pad >= len(shown)+3 {
		extra = " (" + shown + ")"
		pad -= len(extra)
		shown = ""
	}
	if both {
		bw.WriteString("│ " + f.rows + extra + strings.Repeat(" ", pad) + f.columns + " │\n")
	} else {
		bw.WriteString("│ " + strings.Repeat(" ", pad/2) + f.rows + extra + strings.Repeat(" ", pad-pad/2) + " │\n")
	}
	if shown != "" {
		text := "(" + shown + ")"
		p := length - 4 - len(text) + 2
		l := p / 2
		if both {
			l = 1
		}
		bw.WriteString("│" + strings.Repeat(" ", l) + text + strings.Repeat(" ", p-l) + "│\n")
	}
	bw.WriteString("└" + strings.Repeat("─", length-2) + "┘\n")
}

// boxFooter is the footer's text: the row count, how many rows were
// shown, the column count.
type boxFooter struct {
	rows, shown, columns string
	hiddenRows           bool
	hiddenColumns        bool
	must                 bool
}

func newBoxFooter(total, shown, columns int) boxFooter {
	f := boxFooter{rows: strconv.Itoa(total) + " rows", columns: strconv.Itoa(columns) + " column"}
	if columns != 1 {
		f.columns += "s"
	}
	f.hiddenRows = shown < total
	if f.hiddenRows {
		f.shown = strconv.Itoa(shown) + " shown"
	}
	f.must = f.hiddenRows || total == 0
	return f
}

// length is the narrowest box that shows the footer.
func (f boxFooter) length() int { return max(len(f.rows), len(f.shown)+2) + 4 }

// fitWidths shortens columns wider than maxColWidth, in proportion, until
// the box fits maxWidth; when that is not enough it shortens each to
// maxColWidth and leaves columns out from the middle outwards. It returns
// the widths and the set of columns left out.
func fitWidths(widths []int, maxWidth int) ([]int, map[int]bool) {
	total := 1
	for _, w := range widths {
		total += w + 3
	}
	pruned := map[int]bool{}
	if total <= maxWidth {
		return widths, pruned
	}
	orig := append([]int(nil), widths...)
	need := total - maxWidth
	room := 0
	for _, w := range widths {
		room += max(0, w-maxColWidth)
	}
	if room >= need {
		cut := 0
		for j, w := range widths {
			if w > maxColWidth {
				c := (w - maxColWidth) * need / room
				widths[j] -= c
				cut += c
			}
		}
		for j := range widths {
			if cut >= need {
				break
			}
			if c := min(need-cut, widths[j]-maxColWidth); c > 0 {
				widths[j] -= c
				cut += c
			}
		}
		return widths, pruned
	}
	for j, w := range widths {
		if w > maxColWidth {
			total -= w - maxColWidth
			widths[j] = maxColWidth
		}
	}
	// The "…" column in place of those left out.
	total += 3 + 1
	for offset := 0; total > maxWidth && len(pruned) < len(widths)-1; {
		c := len(widths)/2 + offset
		if c >= 0 && c < len(widths) && !pruned[c] {
			total -= widths[c] + 3
			pruned[c] = true
		}
		if offset >= 0 {
			offset = -offset - 1
		} else {
			offset = -offset
		}
	}
	// Space left over widens the shortened columns again.
	keys := make([]int, 0, len(widths))
	for j := range widths {
		keys = append(keys, j)
	}
	sort.Ints(keys)
	for _, j := range keys {
		if space := maxWidth - total; space > 0 && !pruned[j] && widths[j] < orig[j] {
			inc := min(space, orig[j]-widths[j])
			widths[j] += inc
			total += inc
		}
	}
	return widths, pruned
}

// fit cuts s to w columns, ending in "…" when it was longer.
func fit(s string, w int) string {
	if width(s) <= w {
		return s
	}
	r := []rune(s)
	return string(r[:max(0, w-1)]) + "…"
}
