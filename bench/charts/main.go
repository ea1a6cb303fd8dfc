// Command charts draws the figures of a `make bench` run as SVG charts:
// the latency distribution of each steady-load run, the drains' throughput
// and CPU against pg_recvlogical, peak memory by shape, and S3 request
// cost per topic by rate and commit interval. It reads what scripts/bench.sh
// keeps in its results directory: `relay bench --json` files (*.json) and
// Go benchmark output (*.txt: BenchmarkTopicCost, BenchmarkBootstrap,
// BenchmarkManyTopics). A chart whose figures the run did not measure is
// not written, so a partial run leaves the others as they were.
//
//	go run ./bench/charts -results bin/bench-results -out docs/img
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/perf/benchfmt"

	"github.com/deltabus/deltabus/bench"
)

func main() {
	results := flag.String("results", "bin/bench-results", "directory of relay bench --json files (*.json) and Go benchmark output (*.txt)")
	out := flag.String("out", "docs/img", "directory to write the charts into")
	format := flag.String("format", "svg", "svg, or png to look at them without a browser")
	flag.Parse()
	if *format != "svg" && *format != "png" {
		fmt.Fprintf(os.Stderr, "charts: -format %q: use svg or png\n", *format)
		os.Exit(2)
	}
	written, err := drawAll(*results, *out, *format)
	if err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
	for _, f := range written {
		fmt.Println("wrote", f)
	}
}

// run is one bench run's figures.
type run struct {
	relay   bench.Results
	gobench []goResult
}

// goResult is one Go benchmark line: its name without "Benchmark" and
// the GOMAXPROCS suffix, and its metrics by unit.
type goResult struct {
	name   string
	values map[string]float64
}

// load reads every results file in dir.
func load(dir string) (*run, error) {
	var r run
	jsons, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	texts, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	if len(jsons)+len(texts) == 0 {
		return nil, fmt.Errorf("no results in %s: run make bench (scripts/bench.sh) first", dir)
	}
	sort.Strings(jsons)
	for _, f := range jsons {
		res, err := bench.ReadResults(f)
		if err != nil {
			return nil, err
		}
		if r.relay.Started.IsZero() {
			r.relay.Started, r.relay.Machine = res.Started, res.Machine
		}
		r.relay.Drains = append(r.relay.Drains, res.Drains...)
		r.relay.Latency = append(r.relay.Latency, res.Latency...)
		r.relay.Fanin = append(r.relay.Fanin, res.Fanin...)
		if res.BigTx != nil {
			r.relay.BigTx = res.BigTx
		}
	}
	for _, f := range texts {
		gr, err := readGoBench(f)
		if err != nil {
			return nil, err
		}
		r.gobench = append(r.gobench, gr...)
	}
	return &r, nil
}

func readGoBench(path string) ([]goResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []goResult
	rd := benchfmt.NewReader(f, path)
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			continue // unit metadata or a syntax error: not a figure
		}
		base, parts := res.Name.Parts()
		name := strings.TrimPrefix(string(base), "Benchmark")
		for _, p := range parts {
			if !strings.HasPrefix(string(p), "-") { // the GOMAXPROCS suffix
				name += string(p)
			}
		}
		g := goResult{name: name, values: map[string]float64{}}
		for _, v := range res.Values {
			g.values[v.Unit] = v.Value
		}
		out = append(out, g)
	}
	return out, rd.Err()
}

// find returns the Go benchmark results whose name starts with prefix.
func (r *run) find(prefix string) []goResult {
	var out []goResult
	for _, g := range r.gobench {
		if strings.HasPrefix(g.name, prefix) {
			out = append(out, g)
		}
	}
	return out
}

// drawAll draws every chart the results hold into out, as svg or png,
// and returns the files written.
func drawAll(results, out, format string) ([]string, error) {
	r, err := load(results)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, c := range charts(r) {
		path := filepath.Join(out, strings.TrimSuffix(c.file, ".svg")+"."+format)
		if err := c.plot.Save(c.width, c.height, path); err != nil {
			return written, fmt.Errorf("write %s: %w", path, err)
		}
		written = append(written, path)
	}
	return written, nil
}
