package txlog

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// TestCompactKeepsEveryRecord: two sources commit records one small file
// per batch; compaction leaves one file per source, every record read back
// as before, the writers' positions untouched, and appends after it still
// land and are fenced as before.
func TestCompactKeepsEveryRecord(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC).UnixMicro()
	for s, src := range []string{"deltabus-1-a", "deltabus-2-b"} {
		w := NewWriter(root, src)
		for batch := range 20 {
			var ents []Entry
			for i := range 3 {
				n := batch*3 + i
				ents = append(ents, Entry{Xid: int64(100*s + n), CommitLSN: int64(0x1000 + 0x10*n), EndLSN: int64(0x1008 + 0x10*n),
					CommitTime: base + int64(n), Events: 1, Topics: fmt.Sprintf(`{"t%d":1}`, n%4)})
			}
			if err := w.Commit(ctx, ents); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, err := Read(ctx, root, Filter{})
	if err != nil || len(before) != 120 {
		t.Fatalf("read %d records before compaction: %v", len(before), err)
	}
	res, err := Compact(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != 40 || res.FilesAdded != 2 {
		t.Fatalf("compaction removed %d files and added %d, want 40 and 2", res.FilesRemoved, res.FilesAdded)
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, Table), -1)
	if err != nil || len(snap.Files) != 2 {
		t.Fatalf("%d active files after compaction (%v), want 2", len(snap.Files), err)
	}
	after, err := Read(ctx, root, Filter{})
	if err != nil || !reflect.DeepEqual(after, before) {
		t.Fatalf("records after compaction differ (%v)", err)
	}
	if part, err := Read(ctx, root, Filter{Source: "deltabus-2-b", After: 0x1000 + 0x10*29, Through: 0x1000 + 0x10*31}); err != nil || len(part) != 2 {
		t.Fatalf("a range of one source read %d records after compaction (%v), want 2", len(part), err)
	}
	w := NewWriter(root, "deltabus-1-a")
	if pos, err := w.Position(ctx); err != nil || pos != 0x1000+0x10*59 {
		t.Fatalf("position after compaction %#x, %v", pos, err)
	}
	if err := w.Commit(ctx, []Entry{{Xid: 1, CommitLSN: 0x1000, EndLSN: 0x1001, CommitTime: base, Events: 1, Topics: `{"t0":1}`}}); err == nil {
		t.Fatal("a commit below the position was not fenced after compaction")
	}
	if res, err := Compact(ctx, root, nil); err != nil || res.FilesRemoved != 0 {
		t.Fatalf("a second compaction removed %d files (%v), want none", res.FilesRemoved, err)
	}
}
