// Package metricstest compares what a /metrics endpoint exposes with a
// committed golden list: every metric family's name, type and help text,
// and the label names of its samples (for histograms and summaries also
// the bucket bounds and quantiles). Label values (topics, versions) and
// sample values are left out, so the list is stable across runs while any
// change of a name, type, help text or label set shows.
//
// Run a test with DELTABUS_UPDATE_GOLDEN=1 to rewrite its golden file.
package metricstest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/deltabus/deltabus/telemetry"
)

// Telemetry returns the providers a command builds with default options
// (metrics served, no OTLP), shut down when the test ends.
func Telemetry(t testing.TB) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.New(t.Context(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel
}

// Scrape GETs url (a /metrics endpoint) and returns its families.
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return Parse(resp.Body)
}

// Parse reads the Prometheus text format.
func Parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(r)
}

// Shape returns the families' description, one sorted line per family
// (name, type, help) and per distinct sample name and label-name set.
func Shape(mfs map[string]*dto.MetricFamily) []string {
	set := map[string]bool{}
	for name, mf := range mfs {
		set[fmt.Sprintf("%s %s %q", name, strings.ToLower(mf.GetType().String()), mf.GetHelp())] = true
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			sort.Strings(labels)
			ls := "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				var le []string
				for _, b := range m.GetHistogram().GetBucket() {
					le = append(le, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				set[name+"_bucket"+ls+" le="+strings.Join(le, ",")] = true
				set[name+"_sum"+ls] = true
				set[name+"_count"+ls] = true
			case dto.MetricType_SUMMARY:
				var q []string
				for _, v := range m.GetSummary().GetQuantile() {
					q = append(q, strconv.FormatFloat(v.GetQuantile(), 'g', -1, 64))
				}
				set[name+ls+" quantile="+strings.Join(q, ",")] = true
				set[name+"_sum"+ls] = true
				set[name+"_count"+ls] = true
			default:
				set[name+ls] = true
			}
		}
	}
	lines := make([]string, 0, len(set))
	for l := range set {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return lines
}

// Gathered returns the families a Gatherer (what /metrics serves) holds.
func Gathered(t testing.TB, g interface {
	Gather() ([]*dto.MetricFamily, error)
}) map[string]*dto.MetricFamily {
	t.Helper()
	list, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	mfs := make(map[string]*dto.MetricFamily, len(list))
	for _, mf := range list {
		mfs[mf.GetName()] = mf
	}
	return mfs
}

// Value is the value of the family's first sample whose label name has
// value v (a counter's or a gauge's), or -1 when there is none.
func Value(mf *dto.MetricFamily, name, v string) float64 {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == v {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// Golden compares lines with the file at path (one line each), or writes
// the file when DELTABUS_UPDATE_GOLDEN=1. It reports every line missing
// and every line added.
func Golden(t testing.TB, path string, lines []string) {
	t.Helper()
	got := strings.Join(lines, "\n") + "\n"
	if os.Getenv("DELTABUS_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with DELTABUS_UPDATE_GOLDEN=1 to create it)", err)
	}
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	var missing, added []string
	for _, l := range want {
		if !slices.Contains(lines, l) {
			missing = append(missing, l)
		}
	}
	for _, l := range lines {
		if !slices.Contains(want, l) {
			added = append(added, l)
		}
	}
	if len(missing)+len(added) > 0 {
		t.Errorf("/metrics differs from %s:\nmissing:\n  %s\nadded:\n  %s", path,
			strings.Join(missing, "\n  "), strings.Join(added, "\n  "))
	}
}
