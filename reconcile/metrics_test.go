package reconcile

import (
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestMetricsGolden: `relay reconcile --every` exposes the metric names,
// types, help texts and labels it always did (testdata/metrics.golden was
// taken from the prometheus client_golang implementation), and each run
// replaces the previous run's series.
func TestMetricsGolden(t *testing.T) {
	tel := metricstest.Telemetry(t)
	m, err := NewMetrics(tel.Meter)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(5)
	m.Observe(&Report{RunAt: time.Now(), Results: []Result{
		{Topic: "orders", Status: StatusClean, SourceCount: 5, LogCount: &n},
		{Topic: "users", Status: StatusDiverged, SourceCount: 5, MissingCount: 1, LogCount: &n},
		{Topic: "users", Status: StatusClean, SourceCount: 2, MissingCount: 2, LogCount: &n},
	}, Skipped: []Skipped{{}}})
	mfs := metricstest.Gathered(t, tel.Gatherer)
	metricstest.Golden(t, "testdata/metrics.golden", metricstest.Shape(mfs))
	if got := metricstest.Value(mfs["deltabus_reconcile_missing_events"], "topic", "users"); got != 3 {
		t.Errorf("missing events of users = %v, want 3 (summed over windows)", got)
	}
	if got := metricstest.Value(mfs["deltabus_reconcile_topic_status"], "status", "diverged"); got != 1 {
		t.Errorf("topic_status{status=diverged} = %v, want 1", got)
	}
	m.Observe(&Report{RunAt: time.Now(), Results: []Result{{Topic: "orders", Status: StatusClean, SourceCount: 1, LogCount: &n}}})
	mfs = metricstest.Gathered(t, tel.Gatherer)
	for _, name := range []string{"deltabus_reconcile_missing_events", "deltabus_reconcile_topic_status"} {
		if got := metricstest.Value(mfs[name], "topic", "users"); got != -1 {
			t.Errorf("%s{topic=users} = %v after a run without users; want no series", name, got)
		}
	}
	if got := metricstest.Value(mfs["deltabus_reconcile_source_events"], "topic", "orders"); got != 1 {
		t.Errorf("source_events of orders = %v after the second run, want 1", got)
	}
}
