package storage_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

func TestFaultyCountsAndFailsNth(t *testing.T) {
	f := storage.NewFaulty(newLocal(t))
	ctx := t.Context()
	boom := errors.New("boom")
	f.FailNth(storage.OpGet, 2, boom)
	if err := f.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		_, err := f.Get(ctx, "k")
		if (i == 2) != errors.Is(err, boom) || (i != 2 && err != nil) {
			t.Fatalf("Get call %d: %v", i, err)
		}
	}
	if f.Calls(storage.OpGet) != 3 || f.Calls(storage.OpPut) != 1 || f.Calls(storage.OpList) != 0 {
		t.Fatalf("counts Get=%d Put=%d List=%d", f.Calls(storage.OpGet), f.Calls(storage.OpPut), f.Calls(storage.OpList))
	}
	f.FailNth(storage.OpList, 0, nil) // every call
	for range 2 {
		if _, err := f.List(ctx, "", ""); !errors.Is(err, storage.ErrInjected) {
			t.Fatalf("List: %v, want ErrInjected", err)
		}
	}
	f.Reset()
	if _, err := f.List(ctx, "", ""); err != nil || f.Calls(storage.OpList) != 1 {
		t.Fatalf("after Reset: List err %v, calls %d", err, f.Calls(storage.OpList))
	}
}

func TestFaultyFailAfterPerformsTheCall(t *testing.T) {
	inner := newLocal(t)
	f := storage.NewFaulty(inner)
	f.FailAfterNth(storage.OpPut, 1, nil)
	f.FailAfterNth(storage.OpDelete, 1, nil)
	ctx := t.Context()
	if err := f.Put(ctx, "k", []byte("landed")); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("Put: %v, want ErrInjected", err)
	}
	if got, err := inner.Get(ctx, "k"); err != nil || string(got) != "landed" {
		t.Fatalf("inner Get = %q, %v; the write should have landed", got, err)
	}
	if err := f.Delete(ctx, "k"); !errors.Is(err, storage.ErrInjected) {
		t.Fatalf("Delete: %v, want ErrInjected", err)
	}
	if _, err := inner.Get(ctx, "k"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("inner Get after Delete: %v, want ErrNotFound", err)
	}
}

func TestFaultyDelayHonoursContext(t *testing.T) {
	f := storage.NewFaulty(newLocal(t))
	f.DelayNth(storage.OpPut, 1, 50*time.Millisecond)
	f.DelayNth(storage.OpPut, 2, time.Hour)
	start := time.Now()
	if err := f.Put(t.Context(), "k", nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("delayed Put took %v, want >= 50ms", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := f.Put(ctx, "k2", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put with an hour's delay and a 20ms ctx: %v", err)
	}
	if _, err := f.Inner().Get(t.Context(), "k2"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("k2 was written despite the canceled delay: %v", err)
	}
}
