package relay

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestTuneRuntime: by default a 100 MiB limit and no proportional GC; an
// operator's GOGC is kept; without a memory limit the proportional GC
// stays on, since nothing else would trigger a collection.
func TestTuneRuntime(t *testing.T) {
	limit, percent := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetMemoryLimit(limit); debug.SetGCPercent(percent) })

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
