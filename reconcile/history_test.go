package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// TestLastResults: per topic, the newest recorded run that checked it,
// summed over its windows; an older run of the topic and a newer run of
// another topic do not mix in.
func TestLastResults(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := LastResults(ctx, root, 10); err != nil || len(got) != 0 {
		t.Fatalf("no table: %v %v", got, err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := func(h int) Window {
		return Window{Start: t0.Add(time.Duration(h) * time.Hour), End: t0.Add(time.Duration(h+1) * time.Hour)}
	}
	runs := []*Report{
		{RunID: "r1", RunAt: t0.Add(5 * time.Hour), Results: []Result{
			{Topic: "orders", Window: w(0), Status: StatusDiverged, MissingCount: 3},
			{Topic: "payments", Window: w(0), Status: StatusClean}}},
		{RunID: "r2", RunAt: t0.Add(6 * time.Hour), Results: []Result{
			{Topic: "orders", Window: w(1), Status: StatusClean},
			{Topic: "orders", Window: w(2), Status: StatusDiverged, DuplicateCount: 2, UnexpectedCount: 1}}},
		{RunID: "r3", RunAt: t0.Add(7 * time.Hour), Results: []Result{{Topic: "tenants", Window: w(3), Status: StatusError, Error: "boom"}}},
	}
	for _, r := range runs {
		if _, err := Record(ctx, root, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LastResults(ctx, root, 10)
	if err != nil {
		t.Fatal(err)
	}
	o, p, tn := got["orders"], got["payments"], got["tenants"]
	if o.RunID != "r2" || o.Windows != 2 || o.Status != StatusDiverged || o.Missing != 0 || o.Duplicates != 2 || o.Unexpected != 1 || !o.RunAt.Equal(runs[1].RunAt) {
		t.Errorf("orders: %+v", o)
	}
	if p.RunID != "r1" || p.Status != StatusClean || tn.Status != StatusError || tn.Error != "boom" || len(got) != 3 {
		t.Errorf("payments %+v tenants %+v (%d topics)", p, tn, len(got))
	}
}
