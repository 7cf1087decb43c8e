package main

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/rivo/uniseg"

	"github.com/duckraft/duckraft/node/wire"
)

// duckboxPrinter draws a result as DuckDB 2.0's shell does by default (its
// box renderer, src/common/box_renderer.cpp): names and types centered
// above the values, numbers right-aligned and the rest left-aligned, every
// width measured in terminal columns; of a result longer than maxRows (+3)
// the first and last halves with three rows of "·" between them; on a
// terminal, a box wider than the terminal fitted into it: wide columns
// shortened, then middle columns left out behind a "…" column; the values
// of shortened columns wrapped over several lines when the result is
// short (nested values laid out as DuckDB lays them out), else cut with
// "…"; and under the box the row count when rows were left out, the
// result is empty, or it has 10 rows or more, with the column count.
type duckboxPrinter struct {
	w       io.Writer
	maxRows int
	// width is the terminal's width, asked at each result; nil when w is
	// not a terminal, where DuckDB's shell sets no width limit (and shows
	// no readable large numbers).
	width func() int
}

// Facts of DuckDB's box renderer.
const (
	// maxColWidth is how narrow a wide column is shortened before columns
	// are left out.
	maxColWidth = 20
	// minBoxWidth is the narrowest terminal width fitted to.
	minBoxWidth = 80
)

type alignment byte

const (
	alignLeft alignment = iota
	alignMiddle
	alignRight
)

// boxValue is one value to draw.
type boxValue struct {
	text   string
	width  int // in terminal columns
	align  alignment
	nested bool // a value of a nested or JSON column, laid out over lines when rows expand
}

// boxLine is one line of the box's body: a row of values (one per drawn
// column), or a separator when values is nil.
type boxLine struct {
	values []boxValue
}

func (dp duckboxPrinter) print(rows result, p *progressLine) error {
	names := rows.Names()
	types := rows.Types()
	// head keeps the first rows (all of a short result); tail the last
	// half of maxRows, a ring.
	half := dp.maxRows / 2
	var head [][]boxValue
	tail := make([][]boxValue, 0, half)
	next, total := 0, 0
	err := eachRow(rows, p, func(rec []string) error {
		r := make([]boxValue, len(rec))
		for j, s := range rec {
			r[j] = newBoxValue(escapeControl(s), types[j])
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
	top, bottom := head, [][]boxValue(nil)
	if total > dp.maxRows+3 {
		// Hiding fewer than 4 rows would print more lines, not fewer.
		top = head[:dp.maxRows-half]
		bottom = append(append(bottom, tail[next:]...), tail[:next]...)
	}
	maxWidth := 0
	if dp.width != nil {
		maxWidth = max(minBoxWidth, dp.width())
	}
	return duckbox{names: names, types: types, total: total, maxRows: dp.maxRows, maxWidth: maxWidth, console: dp.width != nil}.
		draw(dp.w, top, bottom)
}

func newBoxValue(text string, t wire.LogicalType) boxValue {
	v := boxValue{text: text, width: width(text), align: alignLeft, nested: nested(t)}
	if numeric(t) {
		v.align = alignRight
	}
	return v
}

// duckbox is one result to draw.
type duckbox struct {
	names    []string
	types    []wire.LogicalType
	total    int // rows in the result
	maxRows  int
	maxWidth int  // 0: no limit
	console  bool // on a terminal: readable large numbers
}

// draw writes the box of the top and bottom rows to w.
func (b duckbox) draw(w io.Writer, top, bottom [][]boxValue) error {
	ncols := len(b.names)
	if ncols == 0 {
		return nil
	}
	footer := newBoxFooter(b.total, len(top)+len(bottom), ncols, b.console)
	if b.console && b.total == 1 && len(bottom) == 0 {
		if r := readableRow(b.types, top[0]); r != nil {
			// Both rows centered, as DuckDB's shell shows one row of
			// large numbers.
			for j := range top[0] {
				top[0][j].align = alignMiddle
			}
			top = append(top, r)
		}
	}
	header := make([]boxValue, ncols)
	typ := make([]boxValue, ncols)
	widths := make([]int, ncols)
	for j := range b.names {
		name, tn := escapeControl(b.names[j]), typeName(b.types[j])
		header[j] = boxValue{text: name, width: width(name), align: alignMiddle}
		typ[j] = boxValue{text: tn, width: width(tn), align: alignMiddle}
		widths[j] = max(header[j].width, typ[j].width)
	}
	rendered := 0
	for _, part := range [][][]boxValue{top, bottom} {
		for _, r := range part {
			for j, v := range r {
				widths[j] = max(widths[j], v.width)
			}
			rendered++
		}
	}
	minWidth := 0
	if footer.must {
		minWidth = footer.length()
	}
	lay := layOut(widths, minWidth, b.maxWidth)
	if len(lay.pruned) > 0 {
		footer.hiddenColumns = true
		footer.columns += " (" + strconv.Itoa(ncols-len(lay.pruned)) + " shown)"
	}
	// Values of shortened columns wrap over lines when the result is short
	// and no column was left out.
	perRow := 1
	if lay.shortened && rendered > 0 && rendered+5 < b.maxRows && len(lay.pruned) == 0 {
		perRow = max(1, (b.maxRows-5)/rendered)
	}
	expand := perRow > 1

	// drawn picks a row's values of the drawn columns, "…" in place of
	// those left out.
	drawn := func(r []boxValue) []boxValue {
		out := make([]boxValue, 0, len(lay.cols))
		for _, c := range lay.cols {
			if c < 0 {
				out = append(out, boxValue{text: "…", width: 1, align: alignMiddle})
				continue
			}
			out = append(out, r[c])
		}
		return out
	}
	var lines []boxLine
	first := true
	add := func(r []boxValue, separate bool) {
		row := drawn(r)
		if !expand {
			lines = append(lines, boxLine{values: row})
			return
		}
		if separate {
			lines = append(lines, boxLine{})
		}
		lines = append(lines, lay.expandRow(row, perRow)...)
	}

	bw := bufio.NewWriterSize(w, 1<<16)
	lay.rule(bw, "┌", "┬", "┐")
	add(header, false)
	add(typ, false)
	if b.total > 0 {
		lines = append(lines, boxLine{})
	}
	for _, r := range top {
		add(r, !first)
		first = false
	}
	if len(bottom) > 0 {
		lines = append(lines, lay.dividers(top[len(top)-1], bottom[0])...)
		for _, r := range bottom {
			add(r, false)
		}
	}
	for _, l := range lines {
		if l.values == nil {
			lay.rule(bw, "├", "┼", "┤")
			continue
		}
		for k, v := range l.values {
			lay.value(bw, "│", v.text, v.width, lay.widths[k], v.align)
		}
		bw.WriteString("│\n")
	}
	lay.rule(bw, "└", "┴", "┘")
	footer.write(bw, lay, b.total, ncols)
	return bw.Flush()
}

// boxLayout is where the columns go.
type boxLayout struct {
	cols      []int // the columns drawn, -1 the "…" column in place of those left out
	widths    []int // of the drawn columns
	length    int   // of a line, in terminal columns
	pruned    map[int]bool
	shortened bool
}

// layOut sizes the columns: as wide as their widest text, the first
// widened to minWidth (room for the footer), and when the box is wider
// than maxWidth (0: no limit) the widest shortened first down to
// maxColWidth, then columns left out from the middle outwards.
func layOut(widths []int, minWidth, maxWidth int) boxLayout {
	lay := boxLayout{pruned: map[int]bool{}}
	length := 1
	for _, w := range widths {
		length += w + 3
	}
	if length < minWidth {
		widths[0] += minWidth - length
		length = minWidth
	}
	if maxWidth > 0 && length > maxWidth {
		orig := append([]int(nil), widths...)
		room := make([]int, len(widths))
		total := 0
		for j, w := range widths {
			room[j] = max(0, w-maxColWidth)
			total += room[j]
		}
		need := length - maxWidth
		if total >= need {
			cut := shortenWidest(room, need)
			for j, c := range cut {
				if c > 0 {
					widths[j] -= c
					length -= c
					lay.shortened = true
				}
			}
		} else {
			for j, w := range widths {
				if w > maxColWidth {
					length -= w - maxColWidth
					widths[j] = maxColWidth
					lay.shortened = true
				}
			}
		}
		if length > maxWidth {
			// The "…" column, then columns from the middle: 5, 4, 6, 3, …
			// of 10.
			length += 3 + 1
			for offset := 0; length > maxWidth && len(lay.pruned) < len(widths); {
				c := len(widths)/2 + offset
				if c >= 0 && c < len(widths) && !lay.pruned[c] {
					length -= widths[c] + 3
					lay.pruned[c] = true
				}
				if offset >= 0 {
					offset = -offset - 1
				} else {
					offset = -offset
				}
			}
			// Room left over widens shortened columns again, left first.
			for j := range widths {
				space := maxWidth - length
				if space <= 0 {
					break
				}
				if lay.pruned[j] || widths[j] >= orig[j] {
					continue
				}
				inc := min(space, orig[j]-widths[j])
				widths[j] += inc
				length += inc
			}
		}
	}
	for j, w := range widths {
		switch {
		case !lay.pruned[j]:
			lay.cols = append(lay.cols, j)
			lay.widths = append(lay.widths, w)
		case len(lay.cols) == 0 || lay.cols[len(lay.cols)-1] != -1:
			lay.cols = append(lay.cols, -1)
			lay.widths = append(lay.widths, 1)
		}
	}
	lay.length = length
	return lay
}

// shortenWidest returns how much to cut each column, given how much each
// may be cut (room) and the total to cut: the columns with the most room
// are cut down to the next most first, evenly, as DuckDB does, so that one
// long column is cut before several medium ones.
func shortenWidest(room []int, need int) []int {
	cut := make([]int, len(room))
	// levels are the distinct amounts of room, largest first, each with
	// its columns in the order DuckDB keeps them.
	byRoom := map[int][]int{}
	for j, r := range room {
		byRoom[r] = append(byRoom[r], j)
	}
	levels := make([]int, 0, len(byRoom))
	for r := range byRoom {
		levels = append(levels, r)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(levels)))
	for k := 0; need > 0 && k < len(levels); k++ {
		largest, cols := levels[k], byRoom[levels[k]]
		second := 0
		if k+1 < len(levels) {
			second = levels[k+1]
		}
		step := largest - second
		if step*len(cols) >= need {
			each := need / len(cols)
			for _, c := range cols {
				cut[c] += each
				need -= each
			}
			for i := len(cols); i > 0 && need > 0; i-- {
				cut[cols[i-1]]++
				need--
			}
			break
		}
		for _, c := range cols {
			cut[c] += step
		}
		need -= step * len(cols)
		if k+1 < len(levels) {
			byRoom[second] = append(byRoom[second], cols...)
		}
	}
	return cut
}

// rule writes a horizontal line of the box.
func (lay boxLayout) rule(bw *bufio.Writer, left, mid, end string) {
	bw.WriteString(left)
	for k, w := range lay.widths {
		if k > 0 {
			bw.WriteString(mid)
		}
		bw.WriteString(strings.Repeat("─", w+2))
	}
	bw.WriteString(end + "\n")
}

// value writes one cell: text (tw columns wide) in w columns, cut with "…"
// when it is wider, and aligned; bar is the line left of it.
func (lay boxLayout) value(bw *bufio.Writer, bar, text string, tw, w int, align alignment) {
	if tw > w {
		text, _, tw = truncate(text, 0, w, 1)
		text += "…"
	}
	pad := w - tw + 2
	l := 1
	switch align {
	case alignMiddle:
		l = pad / 2
	case alignRight:
		l = pad - 1
	}
	bw.WriteString(bar + strings.Repeat(" ", l) + text + strings.Repeat(" ", pad-l))
}

// expandRow spreads a row's values that do not fit their columns over up
// to perRow more lines; nested values are laid out over lines first.
func (lay boxLayout) expandRow(row []boxValue, perRow int) []boxLine {
	main := boxLine{values: append([]boxValue(nil), row...)}
	var extra []boxLine
	for c := range main.values {
		v := &main.values[c]
		w := lay.widths[c]
		full, fullWidth := v.text, v.width
		if v.nested {
			full = layOutNested(full, perRow, w)
			// Split at its line breaks even when it fits.
			fullWidth = w + 1
		}
		if fullWidth <= w {
			continue
		}
		text, pos, tw := truncate(full, 0, w, 0)
		v.text, v.width = text, tw
		for line := 0; pos < len(full); line++ {
			if line >= len(extra) {
				if len(extra) >= perRow+1 {
					break
				}
				l := boxLine{values: make([]boxValue, len(row))}
				for k, rv := range row {
					l.values[k] = boxValue{align: rv.align}
				}
				extra = append(extra, l)
			}
			more := line+1 < len(extra) || len(extra) < perRow
			ev := &extra[line].values[c]
			if more {
				ev.text, pos, ev.width = truncate(full, pos, w, 0)
			} else {
				// The last line allowed takes the rest, cut with "…".
				ev.text = full[pos:]
				ev.width = width(ev.text)
				pos = len(full)
			}
		}
	}
	return append([]boxLine{main}, extra...)
}

// dividers are the three lines between the first and the last rows: in
// each column a "·" in the middle of the narrower of the values around it.
func (lay boxLayout) dividers(prev, next []boxValue) []boxLine {
	var visible []int
	for _, c := range lay.cols {
		if c >= 0 {
			visible = append(visible, c)
		}
	}
	row := make([]boxValue, 0, len(lay.cols))
	v := 0
	for _, c := range lay.cols {
		if c < 0 {
			row = append(row, boxValue{text: "…", width: 1, align: alignMiddle})
			continue
		}
		// DuckDB measures the value at visible index v against the drawn
		// column at that same index, which after a "…" column is the
		// column before; so do we, for the same lines.
		w := lay.widths[v]
		v++
		p, n := prev[c], next[c]
		align := p.align
		text := "·"
		if align != alignMiddle {
			up, down := min(w, p.width), min(w, n.width)
			dot := min(up, down)
			if up == 0 {
				dot = down
			} else if down == 0 {
				dot = up
			}
			switch {
			case dot > 1:
				pad := dot - 1
				l := pad / 2
				if align == alignRight {
					l = pad - pad/2
				}
				text = strings.Repeat(" ", l) + "·" + strings.Repeat(" ", pad-l)
			case dot == 0:
				align = alignMiddle
			}
		}
		row = append(row, boxValue{text: text, width: width(text), align: align})
	}
	return []boxLine{{values: row}, {values: row}, {values: row}}
}

// boxFooter is the text under the box: the row count, how many rows were
// shown, the column count.
type boxFooter struct {
	rows, readable, shown, columns string
	hiddenRows, hiddenColumns      bool
	must                           bool
}

func newBoxFooter(total, shown, columns int, console bool) boxFooter {
	f := boxFooter{rows: strconv.Itoa(total) + " rows", columns: strconv.Itoa(columns) + " column"}
	if columns > 1 {
		f.columns += "s"
	}
	if console {
		if r := largeNumber(strconv.Itoa(total)); r != "" {
			f.readable = strconv.Itoa(total) + " total"
			f.rows = r + " rows"
		}
	}
	f.hiddenRows = shown < total
	if f.hiddenRows {
		f.shown = strconv.Itoa(shown) + " shown"
	}
	f.must = f.hiddenRows || total == 0
	return f
}

// length is the narrowest box that shows the footer.
func (f boxFooter) length() int {
	return max(len(f.rows), len(f.shown)+2, len(f.readable)+2) + 4
}

// write writes the footer under the box of lay: the row count (and the
// column count), how many rows were shown, the total of a shortened count.
func (f boxFooter) write(bw *bufio.Writer, lay boxLayout, total, ncols int) {
	length := lay.length
	both := length >= len(f.rows)+len(f.columns)+6 && ((f.hiddenColumns && total > 0) || (total >= 10 && ncols > 1))
	rows := length >= f.length() && (total == 0 || total >= 10)
	if !both && !rows {
		return
	}
	pad := length - len(f.rows) - 4
	if both {
		pad -= len(f.columns)
	}
	extra, readable, shown := "", f.readable, f.shown
	size := len(readable) + len(shown) + 3
	if readable != "" {
		size += 2
	}
	if f.hiddenRows && pad >= size {
		extra = " (" + shown
		if readable != "" {
			extra += ", " + readable
		}
		extra += ")"
		pad -= size
		readable, shown = "", ""
	}
	if both {
		bw.WriteString("  " + f.rows + extra + strings.Repeat(" ", pad) + f.columns + "\n")
	} else {
		bw.WriteString("  " + strings.Repeat(" ", pad/2) + f.rows + extra + strings.Repeat(" ", pad-pad/2) + "\n")
	}
	if readable == "" && shown == "" {
		return
	}
	if combined := len(readable) + len(shown) + 4; readable != "" && shown != "" && combined <= length {
		bw.WriteString("  " + shown + strings.Repeat(" ", length-combined) + readable + "\n")
		return
	}
	align := alignMiddle
	if both {
		align = alignLeft
	}
	for _, s := range []string{shown, readable} {
		if s != "" {
			text := "(" + s + ")"
			lay.value(bw, " ", text, len(text), length-4, align)
			bw.WriteString("\n")
		}
	}
}

// readableRow is the line DuckDB's shell adds under a single row of large
// numbers on a terminal ("(1.23 million)" under 1234567), or nil when a
// value is not such a number.
func readableRow(types []wire.LogicalType, row []boxValue) []boxValue {
	out := make([]boxValue, len(row))
	for j, v := range row {
		if !numeric(types[j]) {
			return nil
		}
		r := largeNumber(v.text)
		if r == "" {
			return nil
		}
		r = "(" + r + ")"
		out[j] = boxValue{text: r, width: width(r), align: alignMiddle}
	}
	return out
}

// largeNumber is a number of a million or more in words, rounded to two
// decimals ("1.23 million"), or "" for a smaller one or one that is not
// plain digits.
func largeNumber(s string) string {
	if len(s) <= 5 {
		return ""
	}
	neg := s[0] == '-'
	i := 0
	if neg {
		i++
	}
	var n uint64
	for ; i < len(s) && s[i] != '.'; i++ {
		c := s[i]
		if c < '0' || c > '9' || n >= 1e18 {
			return ""
		}
		n = n*10 + uint64(c-'0')
	}
	units := []struct {
		base uint64
		name string
	}{{1e6, "million"}, {1e9, "billion"}, {1e12, "trillion"}, {1e15, "quadrillion"}, {1e18, "quintillion"}}
	var base uint64
	unit := ""
	for _, u := range units {
		if n+u.base/100/2 >= u.base {
			base, unit = u.base, u.name
		}
	}
	if unit == "" {
		return ""
	}
	d := strconv.FormatUint((n+base/100/2)/(base/100), 10)
	out := d[:len(d)-2] + "." + d[len(d)-2:] + " " + unit
	if neg {
		out = "-" + out
	}
	return out
}

// truncate takes s[pos:] up to a line break (which it skips) or as many
// grapheme clusters as fit in w columns, used columns already taken; it
// returns them, the position after them and the columns they take with
// used.
func truncate(s string, pos, w, used int) (string, int, int) {
	start := pos
	state := -1
	for pos < len(s) {
		if s[pos] == '\n' {
			return s[start:pos], pos + 1, used
		}
		cluster, _, cw, st := uniseg.FirstGraphemeClusterInString(s[pos:], state)
		if used+cw > w {
			break
		}
		used += cw
		pos += len(cluster)
		state = st
	}
	return s[start:pos], pos, used
}

// nested reports whether DuckDB lays out values of type t over lines:
// lists, arrays, maps, structs, unions and JSON.
func nested(t wire.LogicalType) bool {
	switch t.ID {
	case wire.TypeList, wire.TypeArray, wire.TypeMap, wire.TypeStruct, wire.TypeUnion, wire.TypeTuple, wire.TypeVariant:
		return true
	case wire.TypeVarchar:
		return t.Alias == "JSON"
	}
	return false
}
