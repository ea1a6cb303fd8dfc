package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// TestCommitRewrite: a rewrite replaces files with dataChange=false, keeps
// every txn, yields nothing to the change feed, commutes with a blind
// append that wins the race, and conflicts with another rewrite of the
// same files.
func TestCommitRewrite(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	relay := newTestTable(t, store, 100)
	var paths []string
	for i := int64(1); i <= 6; i++ {
		a := testAdd(i)
		paths = append(paths, a.Path)
		if _, err := relay.Commit(ctx, CommitActions{Adds: []Add{a}, Txn: &Txn{AppID: "relay", Version: i}}); err != nil {
			t.Fatal(err)
		}
	}
	r1, _ := OpenTable(ctx, store, Options{})
	r2, _ := OpenTable(ctx, store, Options{})
	if _, err := appendOne(ctx, relay, 7); err != nil { // the rewriters are now behind
		t.Fatal(err)
	}
	v, err := r1.CommitRewrite(ctx, Rewrite{Removes: paths[:4], Adds: []Add{testAdd(100)}})
	if err != nil || v != 8 {
		t.Fatalf("rewrite after a lost race with an append: v=%d %v", v, err)
	}
	_, err = r2.CommitRewrite(ctx, Rewrite{Removes: paths[3:5], Adds: []Add{testAdd(101)}})
	if !errors.Is(err, ErrRewriteConflict) {
		t.Fatalf("second rewrite of a removed file: %v", err)
	}
	if _, err := r1.CommitRewrite(ctx, Rewrite{Removes: paths[:1], Adds: []Add{testAdd(102)}}); !errors.Is(err, ErrRewriteConflict) {
		t.Fatalf("rewrite of an inactive file: %v", err)
	}
	if v, err := appendOne(ctx, relay, 8); err != nil || v != 9 {
		t.Fatalf("append after the rewrite: v=%d %v", v, err)
	}
	if iso := isolationOf(t, store, 8); iso != "SnapshotIsolation" {
		t.Errorf("OPTIMIZE commit isolationLevel %s, want SnapshotIsolation (as delta-spark writes it)", iso)
	}
	if iso := isolationOf(t, store, 9); iso != "Serializable" {
		t.Errorf("append commit isolationLevel %s, want Serializable", iso)
	}
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 9 || len(snap.Files) != 5 || len(snap.Tombstones) != 4 || snap.Txns["relay"].Version != 8 {
		t.Fatalf("snapshot v=%d files=%d tombstones=%d txn=%+v", snap.Version, len(snap.Files), len(snap.Tombstones), snap.Txns)
	}
	for _, r := range snap.Tombstones {
		if r.DataChange || r.DeletionTimestamp == nil || r.Size == nil || r.ExtendedFileMetadata == nil || !*r.ExtendedFileMetadata {
			t.Errorf("tombstone %+v", r)
		}
	}
	compareSnapshots(t, relay.snap, snap)
	var changes []int64
	if err := ReadChanges(ctx, store, 7, -1, func(cf ChangeFile) error { changes = append(changes, cf.Version); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0] != 7 || changes[1] != 9 {
		t.Fatalf("change feed of versions 7..9: %v (the rewrite must yield nothing)", changes)
	}
}

func isolationOf(t *testing.T, store storage.Store, v int64) string {
	t.Helper()
	data, err := store.Get(context.Background(), CommitKey(v))
	if err != nil {
		t.Fatal(err)
	}
	acts, err := ParseCommit(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.CommitInfo != nil {
			var iso string
			_ = json.Unmarshal(a.CommitInfo.Raw["isolationLevel"], &iso)
			return iso
		}
	}
	t.Fatalf("commit %d has no commitInfo", v)
	return ""
}

// TestStateSizeFollowsTheState: StateSize, read without the lock, counts
// what the state holds after every commit, rewrite and checkpoint,
// including the tombstones a checkpoint forgets once they expire.
func TestStateSizeFollowsTheState(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	store.sync = false
	tbl := newTestTable(t, store, 5)
	now := time.Now()
	tbl.opts.Now = func() time.Time { return now }
	check := func(when string) {
		t.Helper()
		files, tombstones := tbl.StateSize()
		if files != int64(tbl.NumFiles()) || tombstones != int64(tbl.NumTombstones()) {
			t.Fatalf("%s: StateSize %d files, %d tombstones; the state holds %d, %d", when, files, tombstones, tbl.NumFiles(), tbl.NumTombstones())
		}
	}
	var paths []string
	for i := int64(1); i <= 3; i++ {
		a := testAdd(i)
		paths = append(paths, a.Path)
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{a}, Txn: &Txn{AppID: "relay", Version: i}}); err != nil {
			t.Fatal(err)
		}
		check("after an append")
	}
	if _, err := tbl.CommitRewrite(ctx, Rewrite{Removes: paths, Adds: []Add{testAdd(100)}}); err != nil {
		t.Fatal(err)
	}
	check("after a rewrite")
	if tbl.NumTombstones() != 3 {
		t.Fatalf("%d tombstones after rewriting 3 files", tbl.NumTombstones())
	}
	now = now.Add(DefaultDeletedFileRetention + time.Hour) // the tombstones expire at the next checkpoint
	for i := int64(4); tbl.Version() < 10; i++ {
		if _, err := appendOne(ctx, tbl, i); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("after version %d", tbl.Version()))
	}
	if tbl.NumTombstones() != 0 {
		t.Fatalf("%d tombstones after a checkpoint past their retention", tbl.NumTombstones())
	}
}
