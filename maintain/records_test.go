package maintain

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/txlog"
)

// TestRunCompactsTheTransactionRecords: a relay commits its records a
// small file at a time; a maintenance run over the store compacts them
// with the topics, and every record reads back.
func TestRunCompactsTheTransactionRecords(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := txlog.NewWriter(root, "deltabus-1-s")
	for i := range 30 {
		e := txlog.Entry{Xid: int64(i), CommitLSN: int64(0x100 + i), EndLSN: int64(0x100 + i), CommitTime: 1, Events: 1, Topics: `{"orders":1}`}
		if err := w.Commit(ctx, []txlog.Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(ctx, root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, tr := range rep.Tables {
		if tr.Table == txlog.Table {
			found = true
			if tr.Compacted != 30 || tr.Written != 1 || len(tr.Errors) > 0 {
				t.Fatalf("records table: compacted %d files into %d (%v), want 30 into 1", tr.Compacted, tr.Written, tr.Errors)
			}
		}
	}
	if !found {
		t.Fatalf("the run did not maintain %s: %+v", txlog.Table, rep.Tables)
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, txlog.Table), -1)
	if err != nil || len(snap.Files) != 1 {
		t.Fatalf("%d active files after the run (%v), want 1", len(snap.Files), err)
	}
	if recs, err := txlog.Read(ctx, root, txlog.Filter{}); err != nil || len(recs) != 30 {
		t.Fatalf("read %d records after the run (%v), want 30", len(recs), err)
	}
}
