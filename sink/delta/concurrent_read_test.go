package delta

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestReadWhileWriting: snapshots load cleanly while a writer commits and
// checkpoints in the background (readers and the relay run side by side).
func TestReadWhileWriting(t *testing.T) {
	ctx := context.Background()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	meta := Metadata{SchemaString: `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`,
		Configuration: map[string]string{"delta.checkpointInterval": "5"}}
	if err := CreateTable(ctx, st, meta, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenTable(ctx, st, Options{AsyncCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := int64(0)
		for {
			select {
			case <-done:
				return
			default:
			}
			snap, err := LoadSnapshot(ctx, st, -1)
			if err != nil {
				readErr = err
				return
			}
			if snap.Version < last || int64(len(snap.Files)) != snap.Version {
				readErr = fmt.Errorf("snapshot version %d with %d files after version %d", snap.Version, len(snap.Files), last)
				return
			}
			last = snap.Version
		}
	}()
	for i := 1; i <= 150 && readErr == nil; i++ {
		add := Add{Path: fmt.Sprintf("f%04d.parquet", i), Size: 1, Stats: `{"numRecords":1}`}
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{add}, Txn: &Txn{AppID: "app", Version: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	tbl.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
}
