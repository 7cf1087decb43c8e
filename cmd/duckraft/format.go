package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
)

// printer writes a result in one output mode.
type printer interface {
	print(rows *client.Rows, p *progressLine) error
}

func newPrinter(mode string, w io.Writer) (printer, error) {
	switch mode {
	case "table":
		return tablePrinter{w: w, maxRows: 1000}, nil
	case "csv":
		return csvPrinter{w: w}, nil
	case "json":
		return jsonPrinter{w: w}, nil
	}
	return nil, fmt.Errorf("unknown format %q: use table, csv or json", mode)
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
func eachChunk(rows *client.Rows, p *progressLine, fn func(*wire.DataChunk) error) error {
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

type csvPrinter struct{ w io.Writer }

func (cp csvPrinter) print(rows *client.Rows, p *progressLine) error {
	bw := bufio.NewWriterSize(cp.w, 1<<16)
	w := csv.NewWriter(bw)
	w.Write(rows.Names())
	rec := make([]string, len(rows.Names()))
	err := eachChunk(rows, p, func(c *wire.DataChunk) error {
		for i := 0; i < c.Rows; i++ {
			for j, col := range c.Columns {
				rec[j] = cell(col, i)
			}
			if err := w.Write(rec); err != nil {
				return err
			}
		}
		return nil
	})
	w.Flush()
	if err != nil {
		return err
	}
	if err := w.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

type jsonPrinter struct{ w io.Writer }

// print writes a JSON array of objects, one per row, like DuckDB's -json.
// Values are DuckDB's text except numbers, booleans and NULL.
func (jp jsonPrinter) print(rows *client.Rows, p *progressLine) error {
	bw := bufio.NewWriterSize(jp.w, 1<<16)
	names := rows.Names()
	keys := make([][]byte, len(names))
	for i, n := range names {
		keys[i], _ = json.Marshal(n)
	}
	first := true
	bw.WriteString("[")
	err := eachChunk(rows, p, func(c *wire.DataChunk) error {
		for i := 0; i < c.Rows; i++ {
			if !first {
				bw.WriteString(",")
			}
			first = false
			bw.WriteString("\n{")
			for j, col := range c.Columns {
				if j > 0 {
					bw.WriteString(",")
				}
				bw.Write(keys[j])
				bw.WriteString(":")
				bw.Write(jsonValue(col, i))
			}
			bw.WriteString("}")
		}
		return nil
	})
	if err != nil {
		return err
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}

func jsonValue(v *wire.Vector, i int) []byte {
	if !v.IsValid(i) {
		return []byte("null")
	}
	s := cell(v, i)
	switch v.Type.ID {
	case wire.TypeBoolean, wire.TypeTinyInt, wire.TypeSmallInt, wire.TypeInteger, wire.TypeBigInt,
		wire.TypeUTinyInt, wire.TypeUSmallInt, wire.TypeUInteger, wire.TypeUBigInt, wire.TypeHugeInt,
		wire.TypeUHugeInt, wire.TypeDecimal, wire.TypeFloat, wire.TypeDouble:
		if json.Valid([]byte(s)) {
			return []byte(s)
		}
	}
	b, _ := json.Marshal(s)
	return b
}

type tablePrinter struct {
	w       io.Writer
	maxRows int
}

// print draws a boxed table like DuckDB's shell. It keeps at most maxRows
// rows for display and counts the rest.
func (tp tablePrinter) print(rows *client.Rows, p *progressLine) error {
	names := rows.Names()
	header := make([]string, len(names))
	for i, n := range names {
		header[i] = n
	}
	types := make([]string, len(names))
	for i, t := range rows.Types() {
		types[i] = t.String()
	}
	var body [][]string
	total := 0
	err := eachChunk(rows, p, func(c *wire.DataChunk) error {
		for i := 0; i < c.Rows; i++ {
			total++
			if len(body) >= tp.maxRows {
				continue
			}
			rec := make([]string, len(c.Columns))
			for j, col := range c.Columns {
				rec[j] = cell(col, i)
			}
			body = append(body, rec)
		}
		return nil
	})
	if err != nil {
		return err
	}
	widths := make([]int, len(names))
	for _, r := range append([][]string{header, types}, body...) {
		for j, s := range r {
			widths[j] = max(widths[j], utf8.RuneCountInString(s))
		}
	}
	bw := bufio.NewWriter(tp.w)
	line := func(l, m, r string) {
		bw.WriteString(l)
		for j, w := range widths {
			if j > 0 {
				bw.WriteString(m)
			}
			bw.WriteString(strings.Repeat("─", w+2))
		}
		bw.WriteString(r + "\n")
	}
	row := func(r []string) {
		bw.WriteString("│")
		for j, s := range r {
			pad := widths[j] - utf8.RuneCountInString(s)
			bw.WriteString(" " + s + strings.Repeat(" ", pad) + " │")
		}
		bw.WriteString("\n")
	}
	line("┌", "┬", "┐")
	row(header)
	row(types)
	line("├", "┼", "┤")
	for _, r := range body {
		row(r)
	}
	line("└", "┴", "┘")
	if total > len(body) {
		fmt.Fprintf(bw, "%d rows (%d shown)\n", total, len(body))
	} else if total != 1 {
		fmt.Fprintf(bw, "%d rows\n", total)
	}
	return bw.Flush()
}
