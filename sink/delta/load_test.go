package delta

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// listRecorder records the startAfter of every List.
type listRecorder struct {
	storage.Store
	mu     sync.Mutex
	starts []string
}

func (r *listRecorder) List(ctx context.Context, prefix, startAfter string) ([]storage.Object, error) {
	r.mu.Lock()
	r.starts = append(r.starts, startAfter)
	r.mu.Unlock()
	return r.Store.List(ctx, prefix, startAfter)
}

func (r *listRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.starts
	r.starts = nil
	return s
}

// TestLoadListsFromCheckpoint: with a valid _last_checkpoint the load lists
// _delta_log from the checkpoint on (one List, startAfter at the
// checkpoint's version); a missing, corrupt, or wrong hint falls back to a
// full listing; an old hint lists from that older checkpoint.
func TestLoadListsFromCheckpoint(t *testing.T) {
	bothStores(t, func(t *testing.T, store storage.Store) {
		ctx := context.Background()
		rec := &listRecorder{Store: store}
		tbl := newTestTable(t, rec, 10)
		appendRange(t, tbl, 1, 25)
		load := func(name string, want ...string) {
			t.Helper()
			rec.take()
			snap, err := LoadSnapshot(ctx, rec, -1)
			if err != nil || snap.Version != 25 || snap.CheckpointVersion != 20 {
				t.Fatalf("%s: %v %v", name, snap, err)
			}
			if got := rec.take(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: lists after %q, want %q", name, got, want)
			}
		}
		at := func(v int64) string { return fmt.Sprintf("%s%020d", LogDir, v) }
		load("valid hint", at(20))
		for _, c := range []struct{ name, hint string }{{"corrupt", `{"version":`}, {"ahead", `{"version":40,"size":1}`}, {"empty", ``}} {
			if err := rec.Put(ctx, LastCheckpointKey, []byte(c.hint)); err != nil {
				t.Fatal(err)
			}
			if c.name == "ahead" {
				load(c.name, at(40), "")
			} else {
				load(c.name, "")
			}
		}
		if err := rec.Put(ctx, LastCheckpointKey, []byte(`{"version":10,"size":1}`)); err != nil {
			t.Fatal(err)
		}
		load("stale hint", at(10))
		if err := rec.Delete(ctx, LastCheckpointKey); err != nil {
			t.Fatal(err)
		}
		load("missing hint", "")
	})
}

// TestReadersSkipTombstones: a checkpoint keeps the unexpired tombstones
// in row groups of their own; LoadSnapshot skips them, OpenTable and
// Vacuum read them; a writer forgets expired tombstones at a checkpoint.
func TestReadersSkipTombstones(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	clock := time.Now()
	meta := Metadata{SchemaString: testSchema, Configuration: map[string]string{"delta.checkpointInterval": "5"}}
	if err := CreateTable(ctx, store, meta, topicProtocol, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenTable(ctx, store, Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := int64(1); i <= 3; i++ {
		a := testAdd(i)
		paths = append(paths, a.Path)
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{a}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.CommitRewrite(ctx, Rewrite{Removes: paths, Adds: []Add{testAdd(9)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := appendOne(ctx, tbl, 5); err != nil { // version 5: checkpoint
		t.Fatal(err)
	}
	data, err := store.Get(ctx, CheckpointKey(5))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := openParquet(data)
	if err != nil {
		t.Fatal(err)
	}
	if groups := rowGroupsWithout(pf, "remove.path"); pf.NumRowGroups() != 2 || len(groups) != 1 {
		t.Fatalf("%d row groups, %v without tombstones", pf.NumRowGroups(), groups)
	}
	pf.Close()
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil || len(snap.Files) != 2 || len(snap.Tombstones) != 0 {
		t.Fatalf("reader's load: %d files %d tombstones %v", len(snap.Files), len(snap.Tombstones), err)
	}
	full, err := OpenTable(ctx, store, Options{})
	if err != nil || len(full.snap.Tombstones) != 3 {
		t.Fatalf("writer's load: %v", err)
	}
	// Eight days later the next checkpoint drops them, from memory too.
	clock = clock.Add(8 * 24 * time.Hour)
	appendRange(t, tbl, 6, 10)
	if n := len(tbl.snap.Tombstones); n != 0 {
		t.Fatalf("writer keeps %d expired tombstones", n)
	}
	full, _ = OpenTable(ctx, store, Options{})
	if n := len(full.snap.Tombstones); n != 0 {
		t.Fatalf("checkpoint 10 keeps %d expired tombstones", n)
	}
}
