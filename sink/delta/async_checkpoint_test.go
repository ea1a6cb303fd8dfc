package delta

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestAsyncCheckpoints: with AsyncCheckpoints the checkpoints still land at
// the interval (after Wait) and a snapshot loaded from them equals the
// writer's state.
func TestAsyncCheckpoints(t *testing.T) {
	ctx := context.Background()
	st := checkpointEvery10(t)
	tbl, err := OpenTable(ctx, st, Options{AsyncCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 35; i++ {
		add := Add{Path: "f" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".parquet", Size: 1, Stats: `{"numRecords":1}`}
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{add}, Txn: &Txn{AppID: "app", Version: int64(i)}}); err != nil {
			t.Fatal(err)
		}
		tbl.Wait() // one checkpoint at a time: wait so none is skipped
	}
	for _, v := range []int64{10, 20, 30} {
		if _, err := st.Get(ctx, CheckpointKey(v)); err != nil {
			t.Fatalf("checkpoint %d: %v", v, err)
		}
	}
	snap, err := LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.CheckpointVersion != 30 || snap.Version != 35 || len(snap.Files) != 35 || snap.Txns["app"].Version != 35 {
		t.Fatalf("snapshot from checkpoint: cp=%d v=%d files=%d txn=%d", snap.CheckpointVersion, snap.Version, len(snap.Files), snap.Txns["app"].Version)
	}
}

// checkpointEvery10 creates a table of one long column with
// delta.checkpointInterval 10 in a new local store.
func checkpointEvery10(t *testing.T) storage.Store {
	t.Helper()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meta := Metadata{SchemaString: `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`,
		Configuration: map[string]string{"delta.checkpointInterval": "10"}}
	if err := CreateTable(context.Background(), st, meta, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil); err != nil {
		t.Fatal(err)
	}
	return st
}
