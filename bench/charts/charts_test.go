package main

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDrawAllWritesEveryChart: from a results directory holding every
// kind of figure, each chart is written as well-formed SVG that names
// what it shows.
func TestDrawAllWritesEveryChart(t *testing.T) {
	out := t.TempDir()
	written, err := drawAll("testdata/results", out, "svg")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"latency.svg":          {"End-to-end latency", "p99 102 ms", "goal p99"},
		"drain-throughput.svg": {"pg_recvlogical", "control", "1,000-row tx"},
		"drain-cpu.svg":        {"CPU per event", "walsender"},
		"memory.svg":           {"Peak RSS", "one transaction of 1,000,000 rows", "bootstrap over 40 topics", "10,000 topics", "goal"},
		"cost.svg":             {"S3 request cost", "p99 987 ms–995 ms"},
		"fanin.svg":            {"five shared topics", "2 sources", "÷ one source: 4.4×", "lost races per commit", "goals"},
	}
	var names []string
	for _, f := range written {
		names = append(names, filepath.Base(f))
	}
	for file, texts := range want {
		if !slices.Contains(names, file) {
			t.Errorf("%s not written (wrote %v)", file, names)
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		text := svgText(t, file, b)
		for _, w := range texts {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not say %q", file, w)
			}
		}
	}
}

// TestDrawAllSkipsWhatWasNotMeasured: a run with only Go benchmarks
// writes only their charts, leaving the others alone.
func TestDrawAllSkipsWhatWasNotMeasured(t *testing.T) {
	in := t.TempDir()
	b, err := os.ReadFile("testdata/results/topic_cost.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "topic_cost.txt"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := drawAll(in, t.TempDir(), "svg")
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 1 || filepath.Base(written[0]) != "cost.svg" {
		t.Fatalf("wrote %v, want only cost.svg", written)
	}
	if _, err := drawAll(t.TempDir(), t.TempDir(), "svg"); err == nil || !strings.Contains(err.Error(), "make bench") {
		t.Fatalf("an empty results directory: %v, want an error naming make bench", err)
	}
}

// svgText checks that b is well-formed XML and returns its text.
func svgText(t *testing.T, name string, b []byte) string {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(string(b)))
	var text strings.Builder
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed: %v", name, err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
		case xml.CharData:
			text.Write(v)
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", name, root)
	}
	return text.String()
}
