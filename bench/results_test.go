package bench

import (
	"path/filepath"
	"testing"
	"time"
)

// TestHistogramCountsEveryLatency: buckets of a round width up to the
// 99.9th percentile, the last holding the tail, every value counted once.
func TestHistogramCountsEveryLatency(t *testing.T) {
	var lat []time.Duration
	for i := range 1000 {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	lat = append(lat, time.Minute) // one far outlier
	h := histogram(lat, 80)
	if h.BucketMs != 20 {
		t.Fatalf("bucket width %v ms, want 20 (999 ms / 80 rounded up to 1, 2 or 5 times a power of ten)", h.BucketMs)
	}
	total := 0
	for _, n := range h.Counts {
		total += n
	}
	if total != len(lat) {
		t.Fatalf("histogram counts %d values, want %d", total, len(lat))
	}
	if h.Counts[0] != 20 || h.Counts[len(h.Counts)-1] == 0 {
		t.Fatalf("first bucket %d (want 20), last %d (want the tail)", h.Counts[0], h.Counts[len(h.Counts)-1])
	}
	for v, want := range map[float64]float64{0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 12.5: 20} {
		if got := roundStep(v); got != want {
			t.Errorf("roundStep(%v) = %v, want %v", v, got, want)
		}
	}
}

// TestResultsRoundTrip: what WriteFile writes, ReadResults reads back.
func TestResultsRoundTrip(t *testing.T) {
	in := &Results{Started: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Machine: "2 cores",
		Drains:  []DrainResult{{Name: "drain_1000row_tx", Events: 10, Ratio: 1.05, Rounds: []float64{1.05}}},
		BigTx:   &BigTxResult{Rows: 5, RowsPerSec: 1, PeakRSS: 100},
		Latency: []LatencyResult{latencyResult("latency", "file:///x", 2000, 1999, time.Minute, []time.Duration{time.Millisecond, 3 * time.Millisecond})}}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := in.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	out, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if out.Drains[0].Ratio != 1.05 || out.BigTx.PeakRSS != 100 || out.Latency[0].Percentiles["100"] != 3 || out.Latency[0].Events != 2 {
		t.Fatalf("read back %+v", out)
	}
}
