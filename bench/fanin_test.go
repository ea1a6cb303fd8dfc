package bench

import (
	"strings"
	"testing"
)

// TestMetricSumAddsEveryTopic: the fan-in run sums a counter over its
// labels from the relay's Prometheus text, and no other metric whose name
// it prefixes.
func TestMetricSumAddsEveryTopic(t *testing.T) {
	text := `# HELP deltabus_delta_commits_total Delta commits, by topic.
# TYPE deltabus_delta_commits_total counter
deltabus_delta_commits_total{otel_scope_name="relay",topic="orders"} 12
deltabus_delta_commits_total{otel_scope_name="relay",topic="payments"} 30
deltabus_delta_commits_total_extra 1000
deltabus_commit_races_total 7
`
	if got := metricSum(text, "deltabus_delta_commits_total"); got != 42 {
		t.Errorf("commits = %v, want 42", got)
	}
	if got := metricSum(text, "deltabus_commit_races_total"); got != 7 {
		t.Errorf("races = %v, want 7", got)
	}
}

func TestParseCountsRefusesNonsense(t *testing.T) {
	got, err := parseCounts("2, 4")
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Fatalf("parseCounts(2, 4) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "two", "2,,4", "99"} {
		if _, err := parseCounts(bad); err == nil || !strings.Contains(err.Error(), "--fanin-sources") {
			t.Errorf("parseCounts(%q): %v, want an error naming --fanin-sources", bad, err)
		}
	}
}
