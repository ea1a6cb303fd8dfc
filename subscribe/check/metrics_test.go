package check

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestMetricsGolden: `relay check consumers --every` exposes the metric
// names, types, help texts and labels it always did (testdata/metrics.golden
// was taken from the prometheus client_golang implementation).
func TestMetricsGolden(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Set([]Row{
		{Group: "g", Topic: "orders", LagVersions: 3, Completeness: &Completeness{Ratio: 1}},
		{Group: "h", Topic: "orders", Breaches: []string{"lag"}},
	})
	metricstest.Golden(t, "testdata/metrics.golden", metricstest.Shape(metricstest.Gathered(t, reg)))
}
