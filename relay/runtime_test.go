package relay

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestTuneRuntime: by default a 100 MiB limit and no proportional GC; an
// operator's GOGC is kept; without a memory limit the proportional GC
// stays on, since nothing else would trigger a collection.
func TestTuneRuntime(t *testing.T) {
	limit, percent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() { stopFollowing(); debug.SetMemoryLimit(limit); debug.SetGCPercent(percent) })

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	TuneRuntime()
	if l, p := debug.SetMemoryLimit(-1), debug.SetGCPercent(100); l != DefaultMemoryLimit || p != -1 {
		t.Errorf("defaults: limit %d, GOGC %d; want %d, off", l, p, DefaultMemoryLimit)
	}

	t.Setenv("GOGC", "200")
	debug.SetMemoryLimit(math.MaxInt64)
	TuneRuntime()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("with GOGC set: GOGC changed to %d", p)
	}

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "off")
	debug.SetMemoryLimit(math.MaxInt64)
	TuneRuntime()
	if l, p := debug.SetMemoryLimit(-1), debug.SetGCPercent(100); l != math.MaxInt64 || p != 100 {
		t.Errorf("without a memory limit: limit %d, GOGC %d; want none, 100", l, p)
	}
}

// TestLimitFollowsLiveHeap: after a collection the limit is 1.5 times
// the live heap, never below the floor; an operator's GOMEMLIMIT stops it.
func TestLimitFollowsLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int64
	}{{0, DefaultMemoryLimit}, {30 * mib, DefaultMemoryLimit}, {66 * mib, DefaultMemoryLimit}, {80 * mib, 120 * mib}, {200 * mib, 300 * mib}, {math.MaxUint64, math.MaxInt64}} {
		if got := limitFor(c.live, DefaultMemoryLimit); got != c.want {
			t.Errorf("limitFor(%d MiB) = %d MiB; want %d MiB", c.live/mib, got/mib, c.want/mib)
		}
	}

	limit, percent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() { stopFollowing(); debug.SetMemoryLimit(limit); debug.SetGCPercent(percent) })
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	TuneRuntime()
	live := make([][]byte, 160) // 160 MiB the collector must keep
	for i := range live {
		live[i] = make([]byte, mib)
		live[i][0] = 1
	}
	if l := limitAfterGC(t, 2*time.Second, func(l int64) bool { return l >= 230*mib }); l < 230*mib {
		t.Fatalf("with 160 MiB live the limit stayed %d MiB; want at least 240 MiB", l/mib)
	}
	runtime.KeepAlive(live)
	live = nil
	if l := limitAfterGC(t, 2*time.Second, func(l int64) bool { return l == DefaultMemoryLimit }); l != DefaultMemoryLimit {
		t.Errorf("once the heap was let go the limit stayed %d MiB; want the floor, %d MiB", l/mib, DefaultMemoryLimit/mib)
	}

	t.Setenv("GOMEMLIMIT", "150MiB")
	debug.SetMemoryLimit(150 * mib)
	TuneRuntime()
	if l := limitAfterGC(t, 200*time.Millisecond, func(l int64) bool { return l != 150*mib }); l != 150*mib {
		t.Errorf("with GOMEMLIMIT=150MiB the limit moved to %d MiB", l/mib)
	}
}

// limitAfterGC collects and reads the memory limit until done says so or
// within passed (the follower runs on the cleanup goroutine, after the
// collection).
func limitAfterGC(t *testing.T, within time.Duration, done func(int64) bool) int64 {
	t.Helper()
	var l int64
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if l = debug.SetMemoryLimit(-1); done(l) {
			break
		}
	}
	return l
}

// TestShareCores: half the cores by default, at least one; an operator's
// GOMAXPROCS is kept.
func TestShareCores(t *testing.T) {
	for _, c := range []struct{ procs, cpus, want int }{
		{1, 1, 1}, {2, 2, 1}, {3, 3, 1}, {8, 8, 4}, {16, 8, 8},
		{1, 2, 1}, {2, 8, 2}, {6, 8, 6}, // a CPU limit is the relay's own budget
	} {
		if got := sharedCores(c.procs, c.cpus); got != c.want {
			t.Errorf("sharedCores(%d, %d) = %d; want %d", c.procs, c.cpus, got, c.want)
		}
	}

	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(runtime.NumCPU())
	if got, want := ShareCores(), max(1, runtime.NumCPU()/2); got != want || runtime.GOMAXPROCS(0) != want {
		t.Errorf("ShareCores = %d, GOMAXPROCS %d; want %d", got, runtime.GOMAXPROCS(0), want)
	}
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	if got := ShareCores(); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("with GOMAXPROCS=3: ShareCores = %d, GOMAXPROCS %d; want 3 kept", got, runtime.GOMAXPROCS(0))
	}
}
