package storagetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// testCreate writes a 3 MiB object in uneven pieces: invisible until
// Commit, then identical to the bytes written, replacing an older object.
func testCreate(t *testing.T, s storage.Store) {
	ctx := t.Context()
	mustPut(t, s, "t/part-0.parquet", []byte("old"))
	w, err := s.Create(ctx, "t/part-0.parquet")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer w.Abort()
	var want []byte
	for i := range 40 {
		piece := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*3931)
		if _, err := w.Write(piece); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		want = append(want, piece...)
	}
	mustGet(t, s, "t/part-0.parquet", []byte("old"))
	wantKeys(t, s, "", "", "t/part-0.parquet")
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	mustGet(t, s, "t/part-0.parquet", want)
	objs, err := s.List(ctx, "t/", "")
	if err != nil || len(objs) != 1 || objs[0].Size != int64(len(want)) {
		t.Fatalf("List after Commit = %+v, %v; want one object of %d bytes", objs, err, len(want))
	}
	w.Abort() // after Commit: a no-op
	mustGet(t, s, "t/part-0.parquet", want)
	if err := w.Commit(ctx); err == nil {
		t.Fatal("second Commit succeeded")
	}
}

// testCreateAbort leaves nothing behind, and an empty object commits.
func testCreateAbort(t *testing.T, s storage.Store) {
	ctx := t.Context()
	w, err := s.Create(ctx, "a/b/c")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := w.Write([]byte("discard me")); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := w.Write([]byte("x")); err == nil {
		t.Error("Write after Abort succeeded")
	}
	if _, err := s.Get(ctx, "a/b/c"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after Abort: %v, want ErrNotFound", err)
	}
	wantKeys(t, s, "", "")
	e, err := s.Create(ctx, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Commit(ctx); err != nil {
		t.Fatalf("Commit of an empty object: %v", err)
	}
	mustGet(t, s, "empty", []byte{})
	if _, err := s.Create(ctx, "../x"); !errors.Is(err, storage.ErrInvalidKey) {
		t.Errorf("Create of an invalid key: %v, want ErrInvalidKey", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Create(canceled, "y"); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a canceled context: %v", err)
	}
}
