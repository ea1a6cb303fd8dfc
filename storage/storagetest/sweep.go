package storagetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Leftover leaves in s what a writer of key killed mid-write leaves behind
// on that backend (local: a temporary file being written; S3: a multipart
// upload with a part and no complete), without any visible object.
type Leftover func(t *testing.T, s storage.Store, key string)

// Sweep ages: the old leftovers are sweepWait old when swept with
// sweepAge, the young ones under a second; S3 reports upload times in
// whole seconds, which can add up to one to the apparent age.
const (
	sweepAge  = 2 * time.Second
	sweepWait = 3100 * time.Millisecond
)

// RunSweep runs the conformance cases of storage.Sweeper, each on its own
// store from newStore, which must implement it; leave makes the leftovers
// of killed writers the way the backend's writers would.
func RunSweep(t *testing.T, newStore NewStore, leave Leftover) {
	t.Run("OldOnly", func(t *testing.T) { testSweepOldOnly(t, newStore(t), leave) })
	t.Run("BadArguments", func(t *testing.T) { testSweepBadArguments(t, newStore(t)) })
}

func sweeper(t *testing.T, s storage.Store) storage.Sweeper {
	t.Helper()
	sw, ok := s.(storage.Sweeper)
	if !ok {
		t.Fatalf("%T does not implement storage.Sweeper", s)
	}
	return sw
}

func mustSweep(t *testing.T, s storage.Store, prefix string, age time.Duration, want int) {
	t.Helper()
	n, err := sweeper(t, s).SweepTemp(t.Context(), prefix, age)
	if err != nil {
		t.Fatalf("SweepTemp(%q, %v): %v", prefix, age, err)
	}
	if n != want {
		t.Fatalf("SweepTemp(%q, %v) removed %d, want %d", prefix, age, n, want)
	}
}

// testSweepOldOnly: leftovers older than the age go, by prefix and through
// Sub; young ones, live writers and objects stay.
func testSweepOldOnly(t *testing.T, s storage.Store, leave Leftover) {
	ctx := t.Context()
	mustPut(t, s, "t1/obj", []byte("object"))
	leave(t, s, "t1/old")
	leave(t, s, "t2/old")
	leave(t, s, "t2/deep/old")
	leave(t, s, "t10/old") // shares the prefix "t1" but not "t1/"
	time.Sleep(sweepWait)
	leave(t, s, "t1/young")
	live, err := s.Create(ctx, "t1/live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	if _, err := live.Write([]byte("live writer")); err != nil {
		t.Fatal(err)
	}

	mustSweep(t, storage.Sub(s, "t1"), "", sweepAge, 1)
	mustSweep(t, s, "t2/deep/", sweepAge, 1)
	mustSweep(t, s, "", time.Hour, 0)
	mustSweep(t, s, "", sweepAge, 2)
	mustSweep(t, s, "", sweepAge, 0)
	if err := live.Commit(ctx); err != nil {
		t.Fatalf("Commit of a live writer after sweeps: %v", err)
	}
	wantKeys(t, s, "", "", "t1/live", "t1/obj")
	mustGet(t, s, "t1/obj", []byte("object"))
	// The young leftover was spared, not missed: it goes once old enough.
	time.Sleep(10 * time.Millisecond)
	mustSweep(t, s, "t1/", time.Millisecond, 1)
	wantKeys(t, s, "", "", "t1/live", "t1/obj")
}

func testSweepBadArguments(t *testing.T, s storage.Store) {
	sw := sweeper(t, s)
	ctx := t.Context()
	for _, age := range []time.Duration{0, -time.Hour} {
		if _, err := sw.SweepTemp(ctx, "", age); err == nil {
			t.Errorf("SweepTemp with age %v succeeded", age)
		}
	}
	for _, prefix := range []string{"/a", "a//b/", "../x"} {
		if _, err := sw.SweepTemp(ctx, prefix, time.Hour); !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("SweepTemp(%q): %v, want ErrInvalidKey", prefix, err)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sw.SweepTemp(canceled, "", time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("SweepTemp with a canceled context: %v, want context.Canceled", err)
	}
}
