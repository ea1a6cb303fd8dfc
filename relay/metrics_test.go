package relay

import (
	"fmt"
	"math"
	"testing"
	"time"

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

// TestBatchStagesAddUp: a durable batch records one observation per stage
// of the pipeline (open, files, queued, logs), and the stages add up to
// the batch's time from its first row to durable.
func TestBatchStagesAddUp(t *testing.T) {
	tel := metricstest.Telemetry(t)
	m, err := NewMetrics(tel.Meter)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Second)
	b := &batch{events: 3, openedAt: t0, startedAt: t0.Add(4 * time.Millisecond),
		filedAt: t0.Add(9 * time.Millisecond), loggingAt: t0.Add(10 * time.Millisecond)}
	done := t0.Add(16 * time.Millisecond)
	want := map[string]float64{"open": 0.004, "files": 0.005, "queued": 0.001, "logs": 0.006}
	var total time.Duration
	for _, st := range batchStages(b, done) {
		total += st.d
	}
	if total != done.Sub(t0) {
		t.Errorf("stages add up to %v, want %v", total, done.Sub(t0))
	}
	m.batchCommitted(b, b.filedAt.Sub(b.startedAt))
	fam := metricstest.Gathered(t, tel.Gatherer)["deltabus_batch_stage_seconds"]
	if fam == nil {
		t.Fatal("no deltabus_batch_stage_seconds")
	}
	seen := map[string]bool{}
	for _, s := range fam.GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() != "stage" {
				continue
			}
			h := s.GetHistogram()
			if h.GetSampleCount() != 1 {
				t.Errorf("stage %s: %d samples, want 1", l.GetValue(), h.GetSampleCount())
			}
			// logs is measured to time.Now() by batchCommitted, so only the
			// stages fixed by the batch's times are compared exactly.
			if w, ok := want[l.GetValue()]; ok && l.GetValue() != "logs" && math.Abs(h.GetSampleSum()-w) > 1e-9 {
				t.Errorf("stage %s: %v s, want %v", l.GetValue(), h.GetSampleSum(), w)
			}
			seen[l.GetValue()] = true
		}
	}
	for st := range want {
		if !seen[st] {
			t.Errorf("no series for stage %q", st)
		}
	}
	// A batch of carried rows only (no first row of its own) has no open
	// stage.
	if got := len(batchStages(&batch{startedAt: t0, filedAt: t0, loggingAt: t0}, done)); got != 3 {
		t.Errorf("carried-only batch: %d stages, want 3", got)
	}
}
