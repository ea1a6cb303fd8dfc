package delta

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestCheckpointShadowMatchesTheLog: a writer with background checkpoints
// keeps the checkpointer's copy of the state by replaying the commits it
// applies (its own, another writer's it lost a race to, its own rewrites
// with their tombstones, and checkpoints skipped while one was running);
// every checkpoint it writes holds exactly the state a replay of the JSON
// commits gives at that version.
func TestCheckpointShadowMatchesTheLog(t *testing.T) {
	ctx := context.Background()
	st := checkpointEvery10(t)
	a, err := OpenTable(ctx, st, Options{AsyncCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenTable(ctx, st, Options{AsyncCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	add := func(name string) Add { return Add{Path: name + ".parquet", Size: 1, Stats: `{"numRecords":1}`} }
	var mine []string
	for i := 1; i <= 160; i++ {
		next := a.Version() + 1
		switch {
		case i%7 == 0 && (next+1)%10 != 0 && next%10 != 0:
			// Another writer takes the next version: a's commit below
			// loses the race and applies b's on catching up.
			if _, err := b.Commit(ctx, CommitActions{Adds: []Add{add(fmt.Sprintf("b%03d", i))}, Txn: &Txn{AppID: "b", Version: int64(i)}}); err != nil {
				t.Fatal(err)
			}
		case i%11 == 0 && len(mine) >= 3:
			// A rewrite: two of a's files replaced by one, two tombstones.
			if _, err := a.CommitRewrite(ctx, Rewrite{Removes: mine[:2], Adds: []Add{add(fmt.Sprintf("r%03d", i))}}); err != nil {
				t.Fatal(err)
			}
			mine = mine[2:]
		}
		p := add(fmt.Sprintf("a%03d", i))
		if _, err := a.Commit(ctx, CommitActions{Adds: []Add{p}, Txn: &Txn{AppID: "a", Version: int64(i)}}); err != nil {
			t.Fatal(err)
		}
		mine = append(mine, p.Path)
		if i%3 != 0 {
			a.Wait() // else the next checkpoint due may be skipped: more commits to replay
		}
	}
	a.Wait()
	b.Wait()

	// The JSON commits alone, in a store of their own.
	jsonOnly, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, "_delta_log/", "")
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".json") {
			data, err := st.Get(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			if err := jsonOnly.Put(ctx, o.Key, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	for v := int64(10); v <= a.Version(); v += 10 {
		if _, err := st.Get(ctx, CheckpointKey(v)); err != nil {
			continue // skipped while another was written, or b's
		}
		fromCP, err := loadSnapshot(ctx, st, v, slog.Default(), true)
		if err != nil {
			t.Fatal(err)
		}
		if fromCP.CheckpointVersion != v {
			t.Fatalf("version %d loaded from checkpoint %d", v, fromCP.CheckpointVersion)
		}
		fromJSON, err := loadSnapshot(ctx, jsonOnly, v, slog.Default(), true)
		if err != nil {
			t.Fatal(err)
		}
		sameState(t, v, fromCP, fromJSON)
		checked++
	}
	if checked < 8 {
		t.Fatalf("only %d checkpoints checked", checked)
	}
}

func sameState(t *testing.T, v int64, got, want *Snapshot) {
	t.Helper()
	if g, w := slices.Sorted(maps.Keys(got.Files)), slices.Sorted(maps.Keys(want.Files)); !slices.Equal(g, w) {
		t.Fatalf("checkpoint %d: files %v, the log has %v", v, g, w)
	}
	if g, w := slices.Sorted(maps.Keys(got.Tombstones)), slices.Sorted(maps.Keys(want.Tombstones)); !slices.Equal(g, w) {
		t.Fatalf("checkpoint %d: tombstones %v, the log has %v", v, g, w)
	}
	if !maps.EqualFunc(got.Txns, want.Txns, func(a, b Txn) bool { return a.Version == b.Version }) {
		t.Fatalf("checkpoint %d: txns %v, the log has %v", v, got.Txns, want.Txns)
	}
}
