package delta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// putFiles writes data files with the adds' paths as keys.
func putFiles(t *testing.T, store storage.Store, adds ...Add) {
	t.Helper()
	for _, a := range adds {
		if err := store.Put(context.Background(), a.Path, []byte("PAR1 "+a.Path)); err != nil {
			t.Fatal(err)
		}
	}
}

func removeLine(t *testing.T, a Add, deletedAt time.Time) string {
	ms := deletedAt.UnixMilli()
	ext := true
	return `{"remove":` + jsonString(t, Remove{Path: a.Path, DeletionTimestamp: &ms, ExtendedFileMetadata: &ext,
		PartitionValues: map[string]*string{}, Size: &a.Size}) + `}`
}

// TestVacuum: files removed before the horizon, never-referenced files and
// cdc files older than it go; active files, files removed inside the
// retention, fresh files and everything hidden (_delta_log, _deltabus,
// dot files) stay.
func TestVacuum(t *testing.T) {
	bothStores(t, func(t *testing.T, store storage.Store) {
		ctx := context.Background()
		tbl := newTestTable(t, store, 100)
		f := []Add{testAdd(1), testAdd(2), testAdd(3), testAdd(4)}
		putFiles(t, store, f...)
		if _, err := tbl.Commit(ctx, CommitActions{Adds: f, Txn: &Txn{AppID: "relay", Version: 1}}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		g := testAdd(5)
		putFiles(t, store, g)
		orphan, cdc := testAdd(6), Add{Path: "_change_data/cdc-00000-x.c000.snappy.parquet"}
		hidden := []Add{{Path: "_deltabus/marker.json"}, {Path: ".part-0.tmp"}, {Path: "sub/_SUCCESS"}}
		putFiles(t, store, append([]Add{orphan, cdc}, hidden...)...)
		// f[0] removed 10 days ago, f[1] 90 minutes after start: with a
		// 1-hour retention judged at start+2h, the first is expired.
		putRaw(t, store, 2, `{"commitInfo":{"operation":"OPTIMIZE"}}`, removeLine(t, f[0], start.Add(-240*time.Hour)),
			removeLine(t, f[1], start.Add(90*time.Minute)), `{"add":`+jsonString(t, g)+`}`)
		logBefore := logNames(t, store)

		opts := VacuumOptions{Now: start.Add(2 * time.Hour), Retention: time.Hour, DryRun: true}
		res, err := Vacuum(ctx, store, opts)
		want := []string{cdc.Path, f[0].Path, orphan.Path}
		slices.Sort(want)
		if err != nil || !slices.Equal(res.Deleted, want) || res.Active != 3 || res.Retained != 1 || res.Version != 2 {
			t.Fatalf("dry run: %+v %v\nwant deleted %v", res, err, want)
		}
		if _, err := store.Get(ctx, f[0].Path); err != nil {
			t.Fatalf("dry run deleted: %v", err)
		}
		opts.DryRun = false
		var swept []string
		opts.SweepTemp = func(_ context.Context, prefix string, olderThan time.Time) error {
			swept = append(swept, fmt.Sprintf("%q %v", prefix, olderThan.Equal(start.Add(time.Hour))))
			return nil
		}
		if res, err = Vacuum(ctx, store, opts); err != nil || !slices.Equal(res.Deleted, want) {
			t.Fatalf("vacuum: %+v %v", res, err)
		}
		for _, a := range append([]Add{f[1], f[2], f[3], g}, hidden...) {
			if _, err := store.Get(ctx, a.Path); err != nil {
				t.Errorf("kept file %s: %v", a.Path, err)
			}
		}
		for _, k := range want {
			if _, err := store.Get(ctx, k); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("deleted file %s: %v", k, err)
			}
		}
		if !slices.Equal(logNames(t, store), logBefore) || !slices.Equal(swept, []string{`"" true`}) {
			t.Fatalf("log touched, or sweep hook %v", swept)
		}
		// Judged now, with the default retention, nothing is old enough.
		fresh := testAdd(7)
		putFiles(t, store, fresh)
		if res, err := Vacuum(ctx, store, VacuumOptions{}); err != nil || len(res.Deleted) != 0 {
			t.Fatalf("vacuum with default retention: %+v %v", res, err)
		}
	})
}

// TestVacuumRefusesShortRetentionProperty: a table property below the
// safe minimum (set by another engine) is refused unless overridden.
func TestVacuumRefusesShortRetentionProperty(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 100)
	m := cloneMetadata(tbl.Metadata())
	m.Configuration[PropDeletedFileRetention] = "interval 5 minutes"
	putRaw(t, store, 1, `{"commitInfo":{}}`, `{"metaData":`+jsonString(t, m)+`}`)
	if _, err := Vacuum(ctx, store, VacuumOptions{}); err == nil || !strings.Contains(err.Error(), "below the safe minimum") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Vacuum(ctx, store, VacuumOptions{Retention: time.Minute}); err != nil {
		t.Fatalf("explicit retention: %v", err)
	}
}

// TestVacuumKeepsInFlightFiles: a file no snapshot references, older than
// the horizon, is kept when it was written since InFlightSince (a writer's
// lease: uploaded, not committed yet); a file removed by a commit is not.
func TestVacuumKeepsInFlightFiles(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 100)
	f := testAdd(1)
	putFiles(t, store, f)
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{f}, Txn: &Txn{AppID: "relay", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	inFlight := testAdd(2)
	putFiles(t, store, inFlight)
	putRaw(t, store, 2, `{"commitInfo":{"operation":"OPTIMIZE"}}`, removeLine(t, f, start.Add(-240*time.Hour)))
	opts := VacuumOptions{Now: start.Add(2 * time.Hour), Retention: time.Hour, DryRun: true, InFlightSince: start.Add(-time.Minute)}
	res, err := Vacuum(ctx, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Deleted, []string{f.Path}) {
		t.Fatalf("deleted %q, want only the removed file %q (the in-flight %q kept)", res.Deleted, f.Path, inFlight.Path)
	}
	opts.InFlightSince = time.Time{}
	if res, _ := Vacuum(ctx, store, opts); len(res.Deleted) != 2 {
		t.Fatalf("without a lease: deleted %q, want both", res.Deleted)
	}
}
