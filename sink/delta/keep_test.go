package delta

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// TestCleanupKeepsFrom: with KeepFrom, commits from that version on stay
// whatever their age, and the result says the retention was held back.
func TestCleanupKeepsFrom(t *testing.T) {
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := newTestTable(t, store, 10)
	appendRange(t, tbl, 1, 35)
	opts := CleanupOptions{Now: time.Now().Add(2 * time.Hour), Retention: time.Hour, KeepFrom: 25, DryRun: true}
	res, err := CleanupLog(ctx, store, opts)
	if err != nil || res.Checkpoint != 20 || !res.HeldBack {
		t.Fatalf("keep from 25: %+v %v; want the checkpoint at 20 kept, held back", res, err)
	}
	opts.KeepFrom = 5
	if res, err = CleanupLog(ctx, store, opts); err != nil || res.Checkpoint != -1 || !res.HeldBack || len(res.Deleted) != 0 {
		t.Fatalf("keep from 5: %+v %v; want nothing deleted (no checkpoint before 5)", res, err)
	}
	opts.KeepFrom = 0
	if res, err = CleanupLog(ctx, store, opts); err != nil || res.Checkpoint != 30 || res.HeldBack {
		t.Fatalf("no keep: %+v %v", res, err)
	}
}

// TestVacuumKeepsRemovedSince: files removed at or after KeepRemovedSince
// stay whatever the retention; earlier removes go.
func TestVacuumKeepsRemovedSince(t *testing.T) {
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := newTestTable(t, store, 100)
	f := []Add{testAdd(1), testAdd(2), testAdd(3)}
	putFiles(t, store, f...)
	if _, err := tbl.Commit(ctx, CommitActions{Adds: f, Txn: &Txn{AppID: "relay", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	putRaw(t, store, 2, `{"commitInfo":{"operation":"OPTIMIZE"}}`, removeLine(t, f[0], start.Add(-240*time.Hour)),
		removeLine(t, f[1], start.Add(-48*time.Hour)))
	opts := VacuumOptions{Now: start.Add(2 * time.Hour), Retention: time.Hour, DryRun: true, KeepRemovedSince: start.Add(-72 * time.Hour)}
	res, err := Vacuum(ctx, store, opts)
	if err != nil || !slices.Equal(res.Deleted, []string{f[0].Path}) || res.HeldBack != 1 {
		t.Fatalf("vacuum keeping removes of the last 72 h: %+v %v", res, err)
	}
}
