package delta

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// overlapStore records how many checkpoint files are being written at once.
type overlapStore struct {
	storage.Store
	inFlight, most *atomic.Int32
}

func (s overlapStore) Put(ctx context.Context, key string, data []byte) error {
	if !strings.HasSuffix(key, ".checkpoint.parquet") {
		return s.Store.Put(ctx, key, data)
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	time.Sleep(20 * time.Millisecond) // a checkpoint that takes a while
	return s.Store.Put(ctx, key, data)
}

// TestCheckpointGate: tables that reach the interval in the same step and
// share a gate write their checkpoints one at a time, and every checkpoint
// still lands.
func TestCheckpointGate(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var inFlight, most atomic.Int32
	gate := NewCheckpointGate()
	meta := Metadata{SchemaString: `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`,
		Configuration: map[string]string{"delta.checkpointInterval": "5"}}
	var tables []*Table
	var stores []storage.Store
	for i := range 4 {
		st := overlapStore{storage.Sub(root, fmt.Sprintf("t%d", i)), &inFlight, &most}
		if err := CreateTable(ctx, st, meta, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil); err != nil {
			t.Fatal(err)
		}
		tbl, err := OpenTable(ctx, st, Options{AsyncCheckpoints: true, CheckpointGate: gate})
		if err != nil {
			t.Fatal(err)
		}
		tables, stores = append(tables, tbl), append(stores, st)
	}
	for v := 1; v <= 5; v++ {
		var wg sync.WaitGroup
		for i, tbl := range tables {
			wg.Go(func() {
				add := Add{Path: fmt.Sprintf("f%d-%d.parquet", i, v), Size: 1, Stats: `{"numRecords":1}`}
				if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{add}}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for i, tbl := range tables {
		tbl.Wait()
		if _, err := stores[i].Get(ctx, CheckpointKey(5)); err != nil {
			t.Fatalf("table %d: checkpoint 5: %v", i, err)
		}
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("%d checkpoints written at once through one gate, want 1", m)
	}
}

// TestCheckpointSpacing: a table reaching the interval sooner than
// CheckpointSpacing after its last checkpoint skips the checkpoint, but
// never past maxSpacedIntervals intervals; once the spacing has passed,
// the next checkpoint due is written; every load of the table sees all
// of its commits.
func TestCheckpointSpacing(t *testing.T) {
	ctx := context.Background()
	st := checkpointEvery10(t)
	var clock atomic.Int64 // seconds
	now := func() time.Time { return time.Unix(1e9+clock.Load(), 0) }
	tbl, err := OpenTable(ctx, st, Options{AsyncCheckpoints: true, CheckpointSpacing: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(to int) {
		for v := tbl.Version() + 1; v <= int64(to); v++ {
			add := Add{Path: fmt.Sprintf("f%d.parquet", v), Size: 1, Stats: `{"numRecords":1}`}
			if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{add}}); err != nil {
				t.Fatal(err)
			}
			tbl.Wait()
		}
	}
	commit(250) // all within the minute: 10, then 10 intervals later 110, 210
	clock.Add(61)
	commit(270) // the spacing has passed: 260 is written, 270 is not
	var got []int64
	for v := int64(10); v <= 270; v += 10 {
		if _, err := st.Get(ctx, CheckpointKey(v)); err == nil {
			got = append(got, v)
		}
	}
	if want := []int64{10, 110, 210, 260}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("checkpoints at %v, want %v", got, want)
	}
	snap, err := LoadSnapshot(ctx, st, -1)
	if err != nil || snap.Version != 270 || len(snap.Files) != 270 || snap.CheckpointVersion != 260 {
		t.Fatalf("load: %v, version %d, %d files, from checkpoint %d", err, snap.Version, len(snap.Files), snap.CheckpointVersion)
	}
}
