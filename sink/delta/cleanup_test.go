package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

func logNames(t *testing.T, store storage.Store) []string {
	t.Helper()
	objs, err := store.List(context.Background(), LogDir, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, strings.TrimPrefix(o.Key, LogDir))
	}
	return out
}

func wantCleaned(t *testing.T, err error, version, earliest int64) {
	t.Helper()
	var lc *LogCleanedError
	if !errors.As(err, &lc) || lc.Version != version || lc.Earliest != earliest || !errors.Is(err, ErrLogCleaned) ||
		errors.Is(err, ErrBrokenLog) || !strings.Contains(err.Error(), fmt.Sprintf("log cleaned up: version %d is no longer in the log, the earliest version is %d", version, earliest)) {
		t.Fatalf("err = %v, want log cleaned up (version %d, earliest %d)", err, version, earliest)
	}
}

// TestCleanupLog: commits written before the horizon are deleted up to the
// newest checkpoint at or before it; that checkpoint, its JSON and every
// later file stay; the latest snapshot is unchanged; older versions fail
// with LogCleanedError; the writer goes on.
func TestCleanupLog(t *testing.T) {
	bothStores(t, func(t *testing.T, store storage.Store) {
		ctx := context.Background()
		tbl := newTestTable(t, store, 10)
		appendRange(t, tbl, 1, 25)
		mid := time.Now()
		time.Sleep(1200 * time.Millisecond) // S3 LastModified has second precision
		appendRange(t, tbl, 26, 35)
		before, err := LoadSnapshot(ctx, store, -1)
		if err != nil {
			t.Fatal(err)
		}
		opts := CleanupOptions{Now: mid.Add(time.Hour), Retention: time.Hour, DryRun: true}
		all := logNames(t, store)
		res, err := CleanupLog(ctx, store, opts)
		if err != nil || res.Checkpoint != 20 || res.Earliest != 20 || len(res.Deleted) != 21 || !slices.Equal(logNames(t, store), all) {
			t.Fatalf("dry run: %+v %v", res, err)
		}
		opts.DryRun = false
		if res, err = CleanupLog(ctx, store, opts); err != nil || res.Checkpoint != 20 || len(res.Deleted) != 21 {
			t.Fatalf("cleanup: %+v %v", res, err)
		}
		var want []string
		for v := int64(20); v <= 35; v++ {
			if v == 20 || v == 30 {
				want = append(want, fmt.Sprintf("%020d.checkpoint.parquet", v))
			}
			want = append(want, fmt.Sprintf("%020d.json", v))
		}
		want = append(want, "_last_checkpoint")
		if got := logNames(t, store); !slices.Equal(got, want) {
			t.Fatalf("log after cleanup:\n%v\nwant\n%v", got, want)
		}
		after, err := LoadSnapshot(ctx, store, -1)
		if err != nil {
			t.Fatal(err)
		}
		compareSnapshots(t, after, before)
		if s, err := LoadSnapshot(ctx, store, 20); err != nil || len(s.Files) != 20 {
			t.Fatalf("load at the kept checkpoint: %v", err)
		}
		_, err = LoadSnapshot(ctx, store, 19)
		wantCleaned(t, err, 19, 20)
		wantCleaned(t, ReadChanges(ctx, store, 5, -1, func(ChangeFile) error { return nil }), 5, 20)
		wantCleaned(t, Tail(ctx, store, 3, -1, io.Discard), 3, 20)
		n := 0
		if err := ReadChanges(ctx, store, 20, -1, func(ChangeFile) error { n++; return nil }); err != nil || n != 16 {
			t.Fatalf("changes from the earliest version: %d, %v", n, err)
		}
		if v, err := appendOne(ctx, tbl, 36); err != nil || v != 36 {
			t.Fatalf("append after cleanup: v=%d %v", v, err)
		}
		if res, err := CleanupLog(ctx, store, opts); err != nil || len(res.Deleted) != 0 || res.Checkpoint != 20 {
			t.Fatalf("second cleanup: %+v %v", res, err)
		}
	})
}

// TestCleanupLogKeepsEverythingWithoutCheckpoint: no checkpoint at or
// before the horizon, nothing deleted; a disabled cleanup is skipped.
func TestCleanupLogKeepsEverythingWithoutCheckpoint(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 10)
	appendRange(t, tbl, 1, 9)
	all := logNames(t, store)
	res, err := CleanupLog(ctx, store, CleanupOptions{Now: time.Now().Add(365 * 24 * time.Hour)})
	if err != nil || res.Checkpoint != -1 || len(res.Deleted) != 0 || res.Earliest != 0 || !slices.Equal(logNames(t, store), all) {
		t.Fatalf("cleanup without checkpoint: %+v %v", res, err)
	}
	appendRange(t, tbl, 10, 10) // checkpoint 10
	if _, err := SetProperties(ctx, tbl, map[string]string{PropExpiredLogCleanup: "false"}); err != nil {
		t.Fatal(err)
	}
	res, err = CleanupLog(ctx, store, CleanupOptions{Now: time.Now().Add(365 * 24 * time.Hour)})
	if err != nil || res.Skipped == "" || len(res.Deleted) != 0 {
		t.Fatalf("cleanup of a table with expired-log cleanup off: %+v %v", res, err)
	}
}

// TestRealGapIsBrokenLog: a commit missing after the newest checkpoint is
// damage, not cleanup.
func TestRealGapIsBrokenLog(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 10)
	appendRange(t, tbl, 1, 14)
	if err := store.Delete(ctx, CommitKey(12)); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		func() error { _, err := LoadSnapshot(ctx, store, -1); return err }(),
		ReadChanges(ctx, store, 11, -1, func(ChangeFile) error { return nil }),
	} {
		if !errors.Is(err, ErrBrokenLog) || errors.Is(err, ErrLogCleaned) {
			t.Fatalf("err = %v, want ErrBrokenLog", err)
		}
	}
}

func TestCleanupHorizon(t *testing.T) {
	now := time.Date(2026, 11, 30, 18, 44, 0, 0, time.UTC)
	if h := cleanupHorizon(now, DefaultLogRetention); !h.Equal(time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("30 days: %v", h)
	}
	if h := cleanupHorizon(now, 90*time.Minute); !h.Equal(now.Add(-90 * time.Minute)) {
		t.Errorf("90 minutes: %v", h)
	}
}

// TestIdleWriterAfterCleanup: a writer handle idle while another writer
// moves on and the log is cleaned up past its last known version reloads
// before committing, so it commits at the tip instead of re-creating a
// cleaned-up version.
func TestIdleWriterAfterCleanup(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	other := newTestTable(t, store, 5)
	idle, err := OpenTable(ctx, store, Options{ReloadAfter: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, idle, 1, 2)
	for i := int64(3); i <= 12; i++ { // checkpoints 5 and 10
		if _, err := other.Commit(ctx, CommitActions{Adds: []Add{testAdd(i)}, Txn: &Txn{AppID: "other", Version: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := CleanupLog(ctx, store, CleanupOptions{Now: time.Now().Add(time.Hour), Retention: time.Hour}); err != nil || res.Checkpoint != 10 {
		t.Fatalf("cleanup: %+v %v", res, err)
	}
	time.Sleep(60 * time.Millisecond)
	if v, err := appendOne(ctx, idle, 13); err != nil || v != 13 {
		t.Fatalf("idle writer committed at %d (%v), want 13", v, err)
	}
	if _, err := store.Get(ctx, CommitKey(3)); err == nil {
		t.Fatalf("a cleaned-up version was written again")
	}
	if _, err := LoadSnapshot(ctx, store, -1); err != nil {
		t.Fatal(err)
	}
}

// TestWriterBehindCleanupNeverCommitsOnAFreedVersion: a handle whose last
// known version was cleaned up (log retention shorter than its idle time,
// or the cleaning host's clock ahead) is not saved by ReloadAfter; before
// putting version v it checks that v−1 is still there, and reads the log
// again instead of committing where no reader would ever look.
func TestWriterBehindCleanupNeverCommitsOnAFreedVersion(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	other := newTestTable(t, store, 5)
	behind, err := OpenTable(ctx, store, Options{ReloadAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, behind, 1, 2)
	for i := int64(3); i <= 12; i++ { // checkpoints 5 and 10
		if _, err := other.Commit(ctx, CommitActions{Adds: []Add{testAdd(i)}, Txn: &Txn{AppID: "other", Version: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := CleanupLog(ctx, store, CleanupOptions{Now: time.Now().Add(time.Hour), Retention: MinExplicitRetention}); err != nil || res.Checkpoint != 10 {
		t.Fatalf("cleanup: %+v %v", res, err)
	}
	if v, err := appendOne(ctx, behind, 13); err != nil || v != 13 {
		t.Fatalf("the writer behind committed at %d (%v), want 13", v, err)
	}
	if _, err := store.Get(ctx, CommitKey(3)); err == nil {
		t.Fatalf("a cleaned-up version was written again")
	}
	if behind.LostRaces() != 0 {
		t.Fatalf("a re-read counted as %d lost races", behind.LostRaces())
	}
}

// TestExplicitRetentionHasAFloor: an explicit retention shorter than a
// writer's reload interval could clean up the version an idle writer
// commits after.
func TestExplicitRetentionHasAFloor(t *testing.T) {
	store := newDirStore(t, "")
	newTestTable(t, store, 5)
	if _, err := CleanupLog(context.Background(), store, CleanupOptions{Retention: time.Second}); err == nil {
		t.Fatal("a 1 s log retention was accepted")
	}
	if _, err := Vacuum(context.Background(), store, VacuumOptions{Retention: time.Second}); err == nil {
		t.Fatal("a 1 s file retention was accepted")
	}
}
