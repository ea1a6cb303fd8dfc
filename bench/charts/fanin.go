package main

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/deltabus/deltabus/bench"
)

// faninClip is where the chart cuts a bar (its value goes into the label).
const faninClip = 3.0

// faninChart: for each count of sources and store, what sharing five
// topics costs against the same relays into separate stores and against
// one source alone, with both goals, and the lost races per commit.
func faninChart(fs []bench.FaninResult) (chart, bool) {
	if len(fs) == 0 {
		return chart{}, false
	}
	p := newPlot("Many sources, five shared topics: against separate stores and one source, same run", "", "ratio (races: per commit)")
	var names []string
	var eps, p99Single, p99Sep, races plotter.Values
	for _, f := range fs {
		worst := slices.Max(f.SharedP99)
		name := fmt.Sprintf("%d sources\n%s", f.Sources, storeKind(f.Store))
		single := ratio(worst, f.SingleP99)
		if single > faninClip {
			name += fmt.Sprintf("\n(÷ one source: %.1f×)", single)
			single = faninClip
		}
		names = append(names, name)
		eps = append(eps, f.Ratio)
		p99Single = append(p99Single, single)
		p99Sep = append(p99Sep, ratio(worst, slices.Max(f.SeparateP99)))
		races = append(races, ratio(float64(f.SteadyRaces), float64(f.SteadyCommits)))
	}
	w := vg.Points(14)
	bars := []struct {
		label string
		v     plotter.Values
	}{
		{"events/s, shared ÷ separate stores (drain, median of rounds)", eps},
		{"worst source's p99, shared ÷ one source alone", p99Single},
		{"worst source's p99, shared ÷ separate stores (same load)", p99Sep},
		{"lost races per commit (steady load)", races},
	}
	for i, b := range bars {
		bc, _ := plotter.NewBarChart(zeroNaN(b.v), w)
		bc.Color = plotutil.Color(i)
		bc.LineStyle.Width = 0
		bc.Offset = w * vg.Length(2*i-len(bars)+1) / 2
		p.Add(bc)
		p.Legend.Add(b.label, bc)
	}
	right := float64(len(fs)) - 0.5
	g1 := hline(0.9, -0.5, right, goalStyle)
	p.Add(g1)
	p.Legend.Add("goals: events/s ≥ 0.9, p99 ≤ 1.5× one source", g1)
	p.Add(hline(1.5, -0.5, right, goalStyle))
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max = faninClip + 1.5 // room for the legend above the bars
	p.Legend.Left = true
	return chart{file: "fanin.svg", plot: p, width: 8 * vg.Inch, height: 5 * vg.Inch}, true
}
