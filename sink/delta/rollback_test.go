package delta

import (
	"context"
	"errors"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestRolledBackTableIsNotWrittenOn: a table restored to an older copy of
// itself (a backup, S3 object versions: the same table id, a lower latest
// version) lost the commits past the copy, whose rows were acknowledged
// long ago. A writer that knew those commits never commits on top of the
// older log: its commit fails with ErrRolledBack, which is ErrTableGone
// to it, and nothing is written, whether the log simply went back, was
// written on by another writer up to the version the writer knew, or was
// read ahead (CheckAhead).
func TestRolledBackTableIsNotWrittenOn(t *testing.T) {
	for _, c := range []struct {
		name      string
		refill    bool // another writer commits on the restored log up to the version the writer knew
		readAhead bool
	}{
		{name: "went back"},
		{name: "written on again", refill: true},
		{name: "went back, read ahead", readAhead: true},
		{name: "written on again, read ahead", refill: true, readAhead: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := newDirStore(t, "")
			tbl := newTestTable(t, store, 100)
			commit := func(tb *Table, app string, v int64) error {
				_, err := tb.Commit(ctx, CommitActions{Adds: []Add{testAdd(v)}, Txn: &Txn{AppID: app, Version: v}})
				return err
			}
			for v := int64(1); v <= 4; v++ {
				if err := commit(tbl, "a", v*100); err != nil {
					t.Fatal(err)
				}
			}
			// Restored to the copy taken at version 2: commits 3 and 4 are gone.
			for _, v := range []int64{3, 4} {
				if err := store.Delete(ctx, CommitKey(v)); err != nil {
					t.Fatal(err)
				}
			}
			next := int64(3) // the version a commit on the restored log would take
			if c.refill {
				other, err := OpenTable(ctx, store, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for v := int64(1); v <= 2; v++ {
					if err := commit(other, "b", v); err != nil {
						t.Fatal(err)
					}
				}
				next = 5
			}
			if c.readAhead {
				tbl.CheckAhead(ctx)
				waitAhead(t, tbl)
			}
			err := commit(tbl, "a", 500)
			if !errors.Is(err, ErrRolledBack) || !errors.Is(err, ErrTableGone) {
				t.Fatalf("commit on a table restored to an older copy: %v, want ErrRolledBack and ErrTableGone", err)
			}
			if _, err := store.Get(ctx, CommitKey(next)); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("version %d was written on the restored log (%v)", next, err)
			}
			if err := commit(tbl, "a", 600); !errors.Is(err, ErrRolledBack) {
				t.Fatalf("a second commit through the same handle: %v, want ErrRolledBack again", err)
			}
		})
	}
}

// TestReloadAcceptsALogThatMovedOn: a reload that finds the log past the
// handle's version, or at it with the same commit, is no rollback.
func TestReloadAcceptsALogThatMovedOn(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 100)
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(1)}, Txn: &Txn{AppID: "a", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatalf("reload at the same commit: %v", err)
	}
	other, err := OpenTable(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Commit(ctx, CommitActions{Adds: []Add{testAdd(2)}, Txn: &Txn{AppID: "b", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatalf("reload past the handle's version: %v", err)
	}
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(3)}, Txn: &Txn{AppID: "a", Version: 2}}); err != nil {
		t.Fatalf("commit after the reload: %v", err)
	}
}
