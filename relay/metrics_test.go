package relay

import (
	"fmt"
	"testing"

	"github.com/deltabus/deltabus/telemetry"
	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestTopicSeriesAreBounded: producers choose topic names, so 5,000 topics
// must not make 5,000 series per metric: each per-topic family keeps at
// most telemetry.DefaultCardinalityLimit series, the rest aggregated into
// the overflow series, whose counts still add up.
func TestTopicSeriesAreBounded(t *testing.T) {
	tel := metricstest.Telemetry(t)
	m, err := NewMetrics(tel.Meter)
	if err != nil {
		t.Fatal(err)
	}
	const topics = 5000
	for i := range topics {
		name := fmt.Sprintf("topic-%04d", i)
		m.topicCommitted(name, 2)
		m.paused(name, uint64(i), true)
	}
	mfs := metricstest.Gathered(t, tel.Gatherer)
	for _, name := range []string{"deltabus_events_committed_total", "deltabus_delta_commits_total",
		"deltabus_last_commit_timestamp_seconds", "deltabus_rebuild_paused_since_lsn"} {
		n := len(mfs[name].GetMetric())
		if n == 0 || n > telemetry.DefaultCardinalityLimit+1 {
			t.Errorf("%s: %d series for %d topics, want 1..%d", name, n, topics, telemetry.DefaultCardinalityLimit+1)
		}
	}
	var sum float64
	for _, s := range mfs["deltabus_events_committed_total"].GetMetric() {
		sum += s.GetCounter().GetValue()
	}
	if sum != 2*topics {
		t.Errorf("events committed over every series = %v, want %d", sum, 2*topics)
	}
	if v := metricstest.Value(mfs["deltabus_events_committed_total"], "otel_metric_overflow", "true"); v <= 0 {
		t.Errorf("no overflow series (got %v)", v)
	}
}
