package delta

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestWithStorageLocal runs the shared tables and a write/read round trip
// through the real local backend (storage.NewLocal, storage.Sub), not only
// this package's test store.
func TestWithStorageLocal(t *testing.T) {
	ctx := context.Background()
	for root, exp := range conformanceTables(t) {
		if exp.Expected.Error != "" {
			continue
		}
		st, err := storage.NewLocal(root)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Inspect(ctx, st)
		if err != nil || res.Version != *exp.Expected.Version || res.NumFiles != exp.Expected.NumActiveFiles {
			t.Errorf("%s: %+v %v", filepath.Base(root), res, err)
		}
	}
	base, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := storage.Sub(base, "orders")
	meta := Metadata{SchemaString: testSchema, Configuration: map[string]string{
		"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true", "delta.checkpointInterval": "5"}}
	if err := CreateTable(ctx, st, meta, topicProtocol, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := OpenTable(ctx, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 12; i++ {
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(i)}, Txn: &Txn{AppID: "a", Version: i}}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := LoadSnapshot(ctx, st, -1)
	if err != nil || snap.Version != 12 || snap.CheckpointVersion != 10 || len(snap.Files) != 12 {
		t.Fatalf("snapshot %v / %v", snap, err)
	}
	var n int
	if err := ReadChanges(ctx, st, 1, -1, func(cf ChangeFile) error {
		if cf.ChangeType != ChangeInsert {
			return fmt.Errorf("version %d: %s", cf.Version, cf.ChangeType)
		}
		n++
		return nil
	}); err != nil || n != 12 {
		t.Fatalf("changes %d, %v", n, err)
	}
}
