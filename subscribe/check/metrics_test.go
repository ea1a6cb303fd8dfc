package check

import (
	"testing"

	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestMetricsGolden: `relay check consumers --every` exposes the metric
// names, types, help texts and labels it always did (testdata/metrics.golden
// was taken from the prometheus client_golang implementation), and each
// check replaces the previous rows' series.
func TestMetricsGolden(t *testing.T) {
	tel := metricstest.Telemetry(t)
	m, err := NewMetrics(tel.Meter)
	if err != nil {
		t.Fatal(err)
	}
	m.Set([]Row{
		{Group: "g", Topic: "orders", LagVersions: 3, Completeness: &Completeness{Ratio: 1}},
		{Group: "h", Topic: "orders", Breaches: []string{"lag"}},
	})
	mfs := metricstest.Gathered(t, tel.Gatherer)
	metricstest.Golden(t, "testdata/metrics.golden", metricstest.Shape(mfs))
	if got := metricstest.Value(mfs["deltabus_consumer_breach"], "group", "h"); got != 1 {
		t.Errorf("breach of group h = %v, want 1", got)
	}
	if got := metricstest.Value(mfs["deltabus_consumer_completeness_ratio"], "group", "h"); got != -1 {
		t.Errorf("completeness of group h (not checked) = %v, want no series", got)
	}
	m.Set([]Row{{Group: "g", Topic: "orders", LagVersions: 7}})
	mfs = metricstest.Gathered(t, tel.Gatherer)
	if got := metricstest.Value(mfs["deltabus_consumer_lag_versions"], "group", "h"); got != -1 {
		t.Errorf("lag of group h = %v after a check without it; want no series", got)
	}
	if got := metricstest.Value(mfs["deltabus_consumer_lag_versions"], "group", "g"); got != 7 {
		t.Errorf("lag of group g = %v, want 7", got)
	}
}
