package reconcile

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestMetricsGolden: `relay reconcile --every` exposes the metric names,
// types, help texts and labels it always did (testdata/metrics.golden was
// taken from the prometheus client_golang implementation).
func TestMetricsGolden(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	n := int64(5)
	m.Observe(&Report{RunAt: time.Now(), Results: []Result{
		{Topic: "orders", Status: StatusClean, SourceCount: 5, LogCount: &n},
		{Topic: "users", Status: StatusDiverged, SourceCount: 5, MissingCount: 1, LogCount: &n},
	}, Skipped: []Skipped{{}}})
	metricstest.Golden(t, "testdata/metrics.golden", metricstest.Shape(metricstest.Gathered(t, reg)))
}
