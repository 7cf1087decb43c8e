package main

import (
	"errors"
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The plots bench report draws, by file name under --img.
const (
	plotWritesTPS     = "bench-writes-tps.png"
	plotWritesLatency = "bench-writes-latency.png"
	plotBulk          = "bench-bulk.png"
	plotIngest        = "bench-ingest.png"
	plotFailover      = "bench-failover.png"
	plotLag           = "bench-lag.png"
)

// errNothingToPlot is returned for a report without the data a plot needs.
var errNothingToPlot = errors.New("nothing to plot")

const plotW, plotH = 16 * vg.Centimeter, 10 * vg.Centimeter

// systemsOf lists the systems of the points in first-seen order.
func systemsOf(ps []writePoint) []string {
	var out []string
	for _, p := range ps {
		if !slices.Contains(out, p.System) {
			out = append(out, p.System)
		}
	}
	return out
}

func clientTicks(ps []writePoint) plot.ConstantTicks {
	var counts []int
	for _, p := range ps {
		if !slices.Contains(counts, p.Clients) {
			counts = append(counts, p.Clients)
		}
	}
	slices.Sort(counts)
	var ticks plot.ConstantTicks
	for _, c := range counts {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
	}
	return ticks
}

// plotWrites draws tx/s against clients, one line per system, on a log
// scale of clients.
func plotWrites(ps []writePoint, path string) error {
	if len(ps) == 0 {
		return errNothingToPlot
	}
	p := plot.New()
	p.Title.Text = "Single-row INSERT transactions per second"
	p.X.Label.Text, p.Y.Label.Text = "clients", "tx/s"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, clientTicks(ps)
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, sys := range systemsOf(ps) {
		var xys plotter.XYs
		for _, pt := range ps {
			if pt.System == sys {
				xys = append(xys, plotter.XY{X: float64(pt.Clients), Y: pt.TxPerSec})
			}
		}
		if err := addLine(p, xys, sys, i, nil); err != nil {
			return err
		}
	}
	// Room above the lines for the legend.
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.5
	return p.Save(plotW, plotH, path)
}

// plotLatency draws p50 (solid) and p99 (dashed) against clients, log-log.
func plotLatency(ps []writePoint, path string) error {
	if len(ps) == 0 {
		return errNothingToPlot
	}
	p := plot.New()
	p.Title.Text = "Write latency: p50 (solid) and p99 (dashed)"
	p.X.Label.Text, p.Y.Label.Text = "clients", "ms"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, clientTicks(ps)
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	drawn := false
	for i, sys := range systemsOf(ps) {
		var p50, p99 plotter.XYs
		for _, pt := range ps {
			// A log scale has no place for zero.
			if pt.System == sys && pt.P50Ms > 0 && pt.P99Ms > 0 {
				p50 = append(p50, plotter.XY{X: float64(pt.Clients), Y: pt.P50Ms})
				p99 = append(p99, plotter.XY{X: float64(pt.Clients), Y: pt.P99Ms})
			}
		}
		if len(p50) == 0 {
			continue
		}
		drawn = true
		if err := addLine(p, p50, sys+" p50", i, nil); err != nil {
			return err
		}
		if err := addLine(p, p99, sys+" p99", i, []vg.Length{vg.Points(5), vg.Points(3)}); err != nil {
			return err
		}
	}
	if !drawn {
		return errNothingToPlot
	}
	// Room above the lines for the legend: a decade and a half on the
	// log scale.
	p.Y.Max *= 30
	return p.Save(plotW, plotH, path)
}

func addLine(p *plot.Plot, xys plotter.XYs, name string, i int, dashes []vg.Length) error {
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
	l.Width = vg.Points(1.5)
	l.Dashes = dashes
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// plotBulkRates draws one bar per read path.
func plotBulkRates(r *bulkResult, path string) error {
	if r == nil || len(r.Paths) == 0 {
		return errNothingToPlot
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Bulk read of %d lineitem rows", r.Rows)
	p.Y.Label.Text = "M rows/s"
	var vs plotter.Values
	var names []string
	for _, pt := range r.Paths {
		vs = append(vs, pt.RowsPerSec/1e6)
		name := pt.System
		if pt.System == "duckdb" {
			// Not DuckDB's ceiling but duckdb-go's Arrow path, which
			// converts every chunk (docs/benchmarks.md).
			name = "duckdb-go Arrow"
		}
		names = append(names, name)
	}
	bars, err := plotter.NewBarChart(vs, vg.Points(40))
	if err != nil {
		return fmt.Errorf("plot bulk: %w", err)
	}
	bars.Color = plotutil.Color(0)
	p.Add(plotter.NewGrid(), bars)
	p.NominalX(names...)
	return p.Save(plotW, plotH, path)
}

// plotIngestRates draws one bar per target and client, a group per
// insert mode.
func plotIngestRates(r *ingestResult, path string) error {
	if r == nil || len(r.Points) == 0 {
		return errNothingToPlot
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Ingest of %d lineitem rows in one transaction", r.Rows)
	p.Y.Label.Text = "M rows/s"
	var modes, names []string
	for _, pt := range r.Points {
		if !slices.Contains(modes, pt.Mode) {
			modes = append(modes, pt.Mode)
		}
		name := pt.System
		if pt.System != "duckdb" {
			name += strings.TrimPrefix(pt.Client, "Go client,")
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	w := vg.Points(12)
	for i, mode := range modes {
		vs := make(plotter.Values, len(names))
		for _, pt := range r.Points {
			if pt.Mode != mode {
				continue
			}
			name := pt.System
			if pt.System != "duckdb" {
				name += strings.TrimPrefix(pt.Client, "Go client,")
			}
			vs[slices.Index(names, name)] = pt.RowsPerSec / 1e6
		}
		bars, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return fmt.Errorf("plot ingest: %w", err)
		}
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(modes)-1)/2)
		p.Add(bars)
		p.Legend.Add(mode, bars)
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	// Headroom above the tallest bar for the legend, which would cover it.
	p.Y.Max *= 1.35
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = 0.4
	p.X.Tick.Label.XAlign = -1
	return p.Save(plotW*1.3, plotH, path)
}

// plotFailoverTimeline draws acknowledged writes per second over the run,
// with the moment the leader went and the gap without acknowledgements.
func plotFailoverTimeline(r *failoverResult, path string) error {
	if r == nil || len(r.Timeline) == 0 {
		return errNothingToPlot
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Failover (%s the leader): %.0f ms without an acknowledged write", r.Mode, r.UnavailableMs)
	p.X.Label.Text, p.Y.Label.Text = "seconds", "acknowledged writes/s"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	per := 1000 / float64(max(r.BucketMs, 1))
	var acks, errs plotter.XYs
	top := 1.0
	half := float64(r.BucketMs) / 2000
	for _, b := range r.Timeline {
		// Each bucket's count is drawn at its middle.
		acks = append(acks, plotter.XY{X: b.StartSec + half, Y: float64(b.Acks) * per})
		errs = append(errs, plotter.XY{X: b.StartSec + half, Y: float64(b.Errors) * per})
		top = max(top, float64(b.Acks)*per)
	}
	for i, series := range []struct {
		name string
		xys  plotter.XYs
	}{{"acknowledged writes/s", acks}, {"failed writes/s", errs}} {
		l, err := plotter.NewLine(series.xys)
		if err != nil {
			return fmt.Errorf("plot failover: %w", err)
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(series.name, l)
	}
	for _, m := range []struct {
		name string
		x    float64
		c    color.Color
	}{{"leader goes", r.EventSec, color.RGBA{R: 200, A: 255}}, {"last ack before / first after", r.LastAckSec, color.Gray{Y: 90}}, {"", r.FirstAckSec, color.Gray{Y: 90}}} {
		l, err := plotter.NewLine(plotter.XYs{{X: m.x, Y: 0}, {X: m.x, Y: top}})
		if err != nil {
			return fmt.Errorf("plot failover: %w", err)
		}
		l.Color, l.Dashes = m.c, []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l)
		if m.name != "" {
			p.Legend.Add(m.name, l)
		}
	}
	p.Y.Max = top * 1.4
	return p.Save(plotW, plotH, path)
}

// plotLagTimeline draws each follower's lag in entries over the run.
func plotLagTimeline(r *lagResult, path string) error {
	if r == nil || len(r.Samples) == 0 {
		return errNothingToPlot
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Replication lag at %.0f tx/s (%d clients)", r.TxPerSec, r.Clients)
	p.X.Label.Text, p.Y.Label.Text = "seconds", "entries behind the leader's commit"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	for i, f := range r.Followers {
		var xys plotter.XYs
		for _, s := range r.Samples {
			if l, ok := s.Lag[f.ID]; ok {
				xys = append(xys, plotter.XY{X: s.Sec, Y: float64(l)})
			}
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plot lag: %w", err)
		}
		l.Color, l.Width = plotutil.Color(i), vg.Points(1.2)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add("follower "+f.ID, l)
	}
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max*1.3, 1)
	return p.Save(plotW, plotH, path)
}

// drawPlots draws every plot the reports have data for into dir and
// returns the file names drawn.
func drawPlots(reps []*benchReport, dir string) ([]string, error) {
	var drawn []string
	try := func(name string, f func(string) error) error {
		err := f(filepath.Join(dir, name))
		if errors.Is(err, errNothingToPlot) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		drawn = append(drawn, name)
		return nil
	}
	for _, r := range reps {
		var err error
		switch r.Bench {
		case "writes":
			if err = try(plotWritesTPS, func(p string) error { return plotWrites(r.Writes, p) }); err == nil {
				err = try(plotWritesLatency, func(p string) error { return plotLatency(r.Writes, p) })
			}
		case "bulk":
			err = try(plotBulk, func(p string) error { return plotBulkRates(r.Bulk, p) })
		case "failover":
			err = try(plotFailover, func(p string) error { return plotFailoverTimeline(r.Failover, p) })
		case "lag":
			err = try(plotLag, func(p string) error { return plotLagTimeline(r.Lag, p) })
		case "ingest":
			err = try(plotIngest, func(p string) error { return plotIngestRates(r.Ingest, p) })
		}
		if err != nil {
			return drawn, err
		}
	}
	return drawn, nil
}
