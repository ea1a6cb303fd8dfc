package delta

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// TestCheckAheadStandsForTheCommitsRead: a read started by CheckAhead
// (as while a batch's data files are written) is the commit's check of
// the version it follows, so the commit itself reads nothing; it serves
// one commit only, and a commit without one reads as before.
func TestCheckAheadStandsForTheCommitsRead(t *testing.T) {
	bothStores(t, func(t *testing.T, store storage.Store) {
		ctx := context.Background()
		f := storage.NewFaulty(store)
		tbl := newTestTable(t, f, 100)
		commitN := func(n int64) {
			t.Helper()
			if v, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(n)}, Txn: &Txn{AppID: "a", Version: n}}); err != nil || v != n {
				t.Fatalf("commit %d: version %d, %v", n, v, err)
			}
		}
		commitN(1)
		tbl.CheckAhead(ctx)
		waitAhead(t, tbl)
		gets := f.Calls(storage.OpGet)
		commitN(2)
		if got := f.Calls(storage.OpGet) - gets; got != 0 {
			t.Fatalf("commit after CheckAhead made %d reads, want 0", got)
		}
		gets = f.Calls(storage.OpGet)
		commitN(3)
		if got := f.Calls(storage.OpGet) - gets; got != 1 {
			t.Fatalf("commit without CheckAhead made %d reads, want 1 (its version check)", got)
		}
	})
}

// TestCheckAheadNeverHidesADeletedTable: a table deleted before the read
// ahead, or after a read ahead grown older than aheadFresh, still fails
// the commit with ErrTableGone, and nothing is written.
func TestCheckAheadNeverHidesADeletedTable(t *testing.T) {
	for _, c := range []struct {
		name         string
		deleteBefore bool          // delete the log before CheckAhead
		wait         time.Duration // between the read ahead and the deletion
	}{
		{name: "deleted before the read", deleteBefore: true},
		{name: "read ahead too old", wait: aheadFresh + 50*time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := newDirStore(t, "")
			tbl := newTestTable(t, store, 100)
			if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(1)}, Txn: &Txn{AppID: "a", Version: 1}}); err != nil {
				t.Fatal(err)
			}
			deleteLog := func() {
				for _, k := range []string{CommitKey(0), CommitKey(1)} {
					if err := store.Delete(ctx, k); err != nil {
						t.Fatal(err)
					}
				}
			}
			if c.deleteBefore {
				deleteLog()
			}
			tbl.CheckAhead(ctx)
			waitAhead(t, tbl)
			time.Sleep(c.wait)
			if !c.deleteBefore {
				deleteLog()
			}
			_, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(2)}, Txn: &Txn{AppID: "a", Version: 2}})
			if !errors.Is(err, ErrTableGone) {
				t.Fatalf("commit into a deleted table: %v, want ErrTableGone", err)
			}
			if _, err := store.Get(ctx, CommitKey(2)); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("version 2 was written into the deleted table (%v)", err)
			}
		})
	}
}

// TestCheckAheadSkipsAStaleOrBusyTable: no read ahead for a table whose
// state may be behind, or that a commit holds.
func TestCheckAheadSkipsAStaleOrBusyTable(t *testing.T) {
	tbl := newTestTable(t, newDirStore(t, ""), 100)
	tbl.stale = true
	tbl.CheckAhead(context.Background())
	if tbl.ahead.Load() != nil {
		t.Fatal("a stale table read ahead")
	}
	tbl.stale = false
	tbl.mu.Lock()
	tbl.CheckAhead(context.Background())
	tbl.mu.Unlock()
	if tbl.ahead.Load() != nil {
		t.Fatal("a table held by a commit read ahead")
	}
}

// waitAhead waits for the read CheckAhead started.
func waitAhead(t *testing.T, tbl *Table) {
	t.Helper()
	a := tbl.ahead.Load()
	if a == nil {
		t.Fatal("CheckAhead started no read")
	}
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the read ahead did not end")
	}
}
