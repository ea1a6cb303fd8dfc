package main

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/deltabus/deltabus/bench"
)

// chart is one SVG to write.
type chart struct {
	file          string
	plot          *plot.Plot
	width, height vg.Length
}

// goalStyle draws goals: dashed, dark red.
var goalStyle = draw.LineStyle{Color: color.RGBA{R: 170, A: 255}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}

// charts builds every chart r has the figures for.
func charts(r *run) []chart {
	var out []chart
	for _, l := range r.relay.Latency {
		out = append(out, latencyChart(l, r.relay.Machine))
	}
	if len(r.relay.Drains) > 0 {
		out = append(out, drainChart(r.relay.Drains), cpuChart(r.relay.Drains))
	}
	if c, ok := memoryChart(r); ok {
		out = append(out, c)
	}
	if c, ok := costChart(r.find("TopicCost/")); ok {
		out = append(out, c)
	}
	if c, ok := faninChart(r.relay.Fanin); ok {
		out = append(out, c)
	}
	return out
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

// vline is a vertical line at x from bottom to top.
func vline(x, bottom, top float64, style draw.LineStyle) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x, Y: bottom}, {X: x, Y: top}})
	l.LineStyle = style
	return l
}

// hline is a horizontal line at y across [x0, x1].
func hline(y, x0, x1 float64, style draw.LineStyle) *plotter.Line {
	l, _ := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	l.LineStyle = style
	return l
}

// latencyChart: the distribution of one steady-load run's latencies, its
// p50 and p99, and the goal.
func latencyChart(l bench.LatencyResult, machine string) chart {
	title := fmt.Sprintf("End-to-end latency, %s single-row tx/s for %.0f s (%s)", thousands(l.Rate), l.Seconds, storeKind(l.Store))
	p := newPlot(title, "source commit → Delta commit (ms)", fmt.Sprintf("events per %g ms (log scale)", l.Histogram.BucketMs))
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	h := l.Histogram
	var bins []plotter.HistogramBin
	top := 0.0
	for i, n := range h.Counts {
		bins = append(bins, plotter.HistogramBin{Min: float64(i) * h.BucketMs, Max: float64(i+1) * h.BucketMs, Weight: float64(n)})
		top = math.Max(top, float64(n))
	}
	hist := &plotter.Histogram{Bins: bins, Width: h.BucketMs, FillColor: plotutil.Color(0), LogY: true,
		LineStyle: draw.LineStyle{Color: color.White, Width: vg.Points(0.3)}}
	p.Add(hist)
	p50, p99 := l.Percentiles["50"], l.Percentiles["99"]
	for i, m := range []struct {
		name string
		v    float64
	}{{"p50", p50}, {"p99", p99}} {
		ln := vline(m.v, 0.5, top, draw.LineStyle{Color: plotutil.Color(i + 1), Width: vg.Points(1.5)})
		p.Add(ln)
		p.Legend.Add(fmt.Sprintf("%s %.0f ms", m.name, m.v), ln)
	}
	if goal, ok := latencyGoal(l); ok {
		g := vline(goal, 0.5, top, goalStyle)
		p.Add(g)
		p.Legend.Add(fmt.Sprintf("goal p99 ≤ %.0f ms", goal), g)
	}
	p.X.Min = 0
	last := float64(len(h.Counts)) * h.BucketMs
	p.X.Max = math.Max(last, p99*1.1)
	p.Legend.Add(fmt.Sprintf("%s events; the last bar: ≥ %.0f ms", thousands(l.Events), last-h.BucketMs))
	if machine != "" {
		p.X.Label.Text += "; " + machine
	}
	return chart{file: l.Name + ".svg", plot: p, width: 8 * vg.Inch, height: 4 * vg.Inch}
}

// latencyGoal is the p99 goal of a latency run, by its store.
func latencyGoal(l bench.LatencyResult) (float64, bool) {
	switch {
	case strings.HasPrefix(l.Store, "file://"):
		return 40, true
	case strings.HasSuffix(l.Name, "_unpaced"):
		return 100, true
	}
	return 0, false
}

func storeKind(url string) string {
	if strings.HasPrefix(url, "s3://") {
		return "S3 on versitygw"
	}
	return "local disk"
}

// drainLabel names a drain kind on an axis.
func drainLabel(name string) string {
	s := strings.TrimPrefix(name, "drain_")
	s = strings.Replace(s, "1000row_tx", "1,000-row tx", 1)
	s = strings.Replace(s, "single_row_tx", "single-row tx", 1)
	return strings.Replace(s, "_loaded", "\n+ CPU hog", 1)
}

// drainChart: each drain kind's throughput ratio against pg_recvlogical,
// beside pg_recvlogical's against itself (the run's resolution).
func drainChart(ds []bench.DrainResult) chart {
	p := newPlot("Drain throughput against pg_recvlogical on the same WAL (median of rounds)", "", "relay ÷ pg_recvlogical events/s")
	var names []string
	var rel, ctl plotter.Values
	var rounds plotter.XYs
	for i, d := range ds {
		names = append(names, drainLabel(d.Name))
		rel = append(rel, d.Ratio)
		ctl = append(ctl, medianOr(d.Controls, math.NaN()))
		for _, r := range d.Rounds {
			rounds = append(rounds, plotter.XY{X: float64(i) - 0.15, Y: r})
		}
	}
	w := vg.Points(22)
	bars := []struct {
		label string
		v     plotter.Values
	}{{"relay", rel}, {"control: pg_recvlogical against itself", ctl}}
	for i, b := range bars {
		if i == 1 && allNaN(b.v) {
			continue
		}
		bc, _ := plotter.NewBarChart(zeroNaN(b.v), w)
		bc.Color = plotutil.Color(i)
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(2*i-1) / 2
		p.Add(bc)
		p.Legend.Add(b.label, bc)
	}
	sc, _ := plotter.NewScatter(rounds)
	sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
	p.Add(sc)
	p.Legend.Add("relay, each round", sc)
	g := hline(1, -0.5, float64(len(ds))-0.5, goalStyle)
	p.Add(g)
	p.Legend.Add("goal ≥ 1.0", g)
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max = math.Max(1.6, p.Y.Max*1.05)
	return chart{file: "drain-throughput.svg", plot: p, width: 8 * vg.Inch, height: 4.5 * vg.Inch}
}

// cpuChart: CPU per event of the relay over pg_recvlogical's, the process
// alone and with the walsender that served it.
func cpuChart(ds []bench.DrainResult) chart {
	p := newPlot("CPU per event against pg_recvlogical (user + system)", "", "relay ÷ pg_recvlogical CPU per event")
	var names []string
	var alone, with plotter.Values
	for _, d := range ds {
		names = append(names, drainLabel(d.Name))
		alone = append(alone, ratio(d.Relay.CPUPerEvent, d.Ref.CPUPerEvent))
		with = append(with, ratio(d.Relay.CPUWithWalsender, d.Ref.CPUWithWalsender))
	}
	w := vg.Points(22)
	for i, b := range []struct {
		label string
		v     plotter.Values
	}{{"process alone", alone}, {"with the walsender that served it", with}} {
		bc, _ := plotter.NewBarChart(b.v, w)
		bc.Color = plotutil.Color(i)
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(2*i-1) / 2
		p.Add(bc)
		p.Legend.Add(b.label, bc)
	}
	g := hline(1, -0.5, float64(len(ds))-0.5, goalStyle)
	p.Add(g)
	p.Legend.Add("goal ≤ 1.0 (1,000-row), ≤ 1.5 (single-row)", g)
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max = math.Max(1.6, p.Y.Max*1.05)
	return chart{file: "drain-cpu.svg", plot: p, width: 8 * vg.Inch, height: 4.5 * vg.Inch}
}

// memoryChart: the relay's peak RSS in each shape the run measured.
func memoryChart(r *run) (chart, bool) {
	type shape struct {
		name string
		mib  float64
	}
	var shapes []shape
	for _, d := range r.relay.Drains {
		if !d.Loaded && d.Relay.PeakRSS > 0 {
			shapes = append(shapes, shape{fmt.Sprintf("backlog of %s events, %s", thousands(d.Events), strings.TrimSuffix(drainLabel(d.Name), " tx")+" transactions"), d.Relay.PeakRSS})
		}
	}
	if b := r.relay.BigTx; b != nil {
		shapes = append(shapes, shape{fmt.Sprintf("one transaction of %s rows", thousands(b.Rows)), b.PeakRSS})
	}
	for _, g := range r.find("Bootstrap") {
		if v, ok := g.values["peak_rss_MiB"]; ok {
			shapes = append(shapes, shape{fmt.Sprintf("bootstrap over %.0f topics", g.values["topics"]), v})
		}
	}
	for _, g := range r.find("ManyTopics/") {
		if v, ok := g.values["peak-RSS-MiB"]; ok && strings.HasSuffix(g.name, "/local") {
			n := strings.TrimSuffix(strings.TrimPrefix(g.name, "ManyTopics/"), "/local")
			n = strings.NewReplacer("_topics_x", " topics × ", "_1KB", " of 1 KiB", "10000", "10,000", "1000", "1,000").Replace(n)
			shapes = append(shapes, shape{"one batch over " + n, v})
		}
	}
	if len(shapes) == 0 {
		return chart{}, false
	}
	p := newPlot("Peak RSS of the relay by shape (100 MiB soft heap limit, GOGC=off)", "MiB", "")
	var vals plotter.Values
	var names []string
	for i := len(shapes) - 1; i >= 0; i-- { // the first on top
		vals = append(vals, shapes[i].mib)
		names = append(names, shapes[i].name)
	}
	bc, _ := plotter.NewBarChart(vals, vg.Points(14))
	bc.Horizontal = true
	bc.Color = plotutil.Color(0)
	bc.LineStyle.Width = 0
	p.Add(bc)
	l := vline(200, -0.5, float64(len(shapes))-0.5, goalStyle)
	p.Add(l)
	p.Legend.Add("goal ≤ 200 MiB", l)
	p.NominalY(names...)
	p.X.Min = 0
	p.X.Max = 300 // the legend right of the goal
	return chart{file: "memory.svg", plot: p, width: 8 * vg.Inch, height: vg.Length(1.2+0.35*float64(len(shapes))) * vg.Inch}, true
}

// costChart: what one topic's S3 requests cost a month, by its rate and
// the topic commit interval, with the p99 latency each interval gives.
func costChart(gs []goResult) (chart, bool) {
	series := map[string]plotter.XYs{}
	p99 := map[string][]float64{}
	for _, g := range gs {
		// TopicCost/interval=none/rate=10
		parts := strings.Split(g.name, "/")
		if len(parts) < 3 {
			continue
		}
		interval := strings.TrimPrefix(parts[1], "interval=")
		rate, err := strconv.ParseFloat(strings.TrimPrefix(parts[2], "rate="), 64)
		cost, ok := g.values["$/month"]
		if err != nil || !ok {
			continue
		}
		series[interval] = append(series[interval], plotter.XY{X: rate, Y: cost})
		p99[interval] = append(p99[interval], g.values["p99-ms"])
	}
	if len(series) == 0 {
		return chart{}, false
	}
	p := newPlot("S3 request cost of one topic per month (PUT $0.005, GET $0.0004 per 1,000)", "events/s in the topic", "$ per topic per month")
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Left = true
	names := []string{"none", "default", "5s"}
	labels := map[string]string{"none": "no commit interval (-1s)", "default": "1 s interval (the S3 default)", "5s": "5 s interval"}
	for i, n := range names {
		xy, ok := series[n]
		if !ok {
			continue
		}
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		ln, pts, _ := plotter.NewLinePoints(xy)
		ln.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		ln.Width = vg.Points(1.5)
		p.Add(ln, pts)
		lo, hi := minMax(p99[n])
		p.Legend.Add(fmt.Sprintf("%s: p99 %s–%s", labels[n], msText(lo), msText(hi)), ln, pts)
	}
	p.Y.Max *= 8 // room for the legend above the lines (log scale)
	return chart{file: "cost.svg", plot: p, width: 8 * vg.Inch, height: 4.5 * vg.Inch}, true
}

func msText(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func minMax(v []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func medianOr(v []float64, def float64) float64 {
	if len(v) == 0 {
		return def
	}
	return bench.Median(v)
}

func allNaN(v plotter.Values) bool {
	for _, x := range v {
		if !math.IsNaN(x) {
			return false
		}
	}
	return true
}

func zeroNaN(v plotter.Values) plotter.Values {
	out := make(plotter.Values, len(v))
	for i, x := range v {
		if !math.IsNaN(x) {
			out[i] = x
		}
	}
	return out
}

// thousands formats n with commas: 1,000,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
