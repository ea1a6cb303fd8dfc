package delta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestRacingWritersDifferentAppIDs: two handles append concurrently with
// their own appIds; every batch lands exactly once, versions are contiguous.
func TestRacingWritersDifferentAppIDs(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	store.sync = false
	newTestTable(t, store, 10)
	const perWriter = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tbl, err := OpenTable(ctx, store, Options{})
			if err != nil {
				errs <- err
				return
			}
			for i := int64(1); i <= perWriter; i++ {
				add := testAdd(int64(w)*1000 + i)
				if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{add}, Txn: &Txn{AppID: fmt.Sprint("w", w), Version: i}}); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version != 2*perWriter || len(snap.Files) != 2*perWriter {
		t.Fatalf("version %d files %d, want %d each", snap.Version, len(snap.Files), 2*perWriter)
	}
	if snap.Txns["w0"].Version != perWriter || snap.Txns["w1"].Version != perWriter {
		t.Fatalf("txns %+v", snap.Txns)
	}
}

// TestRacingWritersSameAppID: two handles (a live instance and a zombie)
// race to commit the same batches under one appId. Each batch must land
// exactly once; the loser learns ErrAlreadyCommitted (or, when it is behind,
// ErrConcurrentWriter) and writes nothing.
func TestRacingWritersSameAppID(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	store.sync = false
	newTestTable(t, store, 10)
	const batches = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[int64]int{}
	errs := make(chan error, 2)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tbl, err := OpenTable(ctx, store, Options{})
			if err != nil {
				errs <- err
				return
			}
			for i := int64(1); i <= batches; i++ {
				_, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(int64(w)*1000 + i)}, Txn: &Txn{AppID: "slot", Version: i}})
				switch {
				case err == nil:
					mu.Lock()
					wins[i]++
					mu.Unlock()
				case errors.Is(err, ErrAlreadyCommitted), errors.Is(err, ErrConcurrentWriter):
				default:
					errs <- fmt.Errorf("writer %d batch %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Txns["slot"].Version != batches {
		t.Fatalf("txn = %d, want %d", snap.Txns["slot"].Version, batches)
	}
	var total int
	for _, n := range wins {
		if n > 1 {
			t.Fatalf("a batch committed %d times", n)
		}
		total += n
	}
	if int64(len(snap.Files)) != snap.Version || len(snap.Files) != total {
		t.Fatalf("files %d, version %d, successful commits %d: must all match", len(snap.Files), snap.Version, total)
	}
	// txn versions in the log strictly increase: no batch landed twice.
	last := int64(0)
	for v := int64(1); v <= snap.Version; v++ {
		data, _ := store.Get(ctx, CommitKey(v))
		acts, _ := ParseCommit(data)
		for _, a := range acts {
			if a.Txn != nil {
				if a.Txn.Version <= last {
					t.Fatalf("version %d: txn %d after %d", v, a.Txn.Version, last)
				}
				last = a.Txn.Version
			}
		}
	}
}
