package relay

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
)

// Runtime defaults of the relay process (TuneRuntime).
const (
	// DefaultMemoryLimit is the floor of the Go heap's soft limit: rows
	// stream through bounded row groups and files spill to the store, so
	// the heap of a relay with a small state stays below it.
	DefaultMemoryLimit = 100 << 20
	// DefaultGCPercent is off: the heap grows to the memory limit before
	// a collection. Collections empty the Parquet encoder's buffer pools,
	// which are then regrown: against GOGC=100 a bootstrap spent 8% more
	// CPU per row, against 400 it was about 8% slower (paired runs), with
	// the same peak RSS (the soft limit bounds both).
	DefaultGCPercent = -1
	// liveHeapHalves is how far above the live heap the limit follows it
	// (followLiveHeap), in halves: 3/2 is GOGC=50's heap target.
	liveHeapHalves = 3
)

// TuneRuntime sets the relay's memory limit and turns the proportional GC
// off, each unless the operator set it (GOMEMLIMIT, GOGC): collections
// then happen as the heap nears the limit. The limit is DefaultMemoryLimit
// or 1.5 times the heap the last collection found live, whichever is larger
// (followLiveHeap): the tables a relay keeps open (their active files and
// tombstones) grow with every commit until maintenance compacts them, and
// under a fixed limit barely above that state the collector would run
// without pause. An operator's GOMEMLIMIT is a budget and stays fixed.
// The relay binary calls it once at start; benchmarks call it to measure
// the relay as it runs.
func TuneRuntime() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
		followLiveHeap(DefaultMemoryLimit)
	} else {
		stopFollowing()
	}
	// Without a memory limit (GOMEMLIMIT=off) the proportional GC is the
	// only trigger left: keep it.
	if os.Getenv("GOGC") == "" && debug.SetMemoryLimit(-1) < math.MaxInt64 {
		debug.SetGCPercent(DefaultGCPercent)
	}
}

// ShareCores leaves half the machine's cores to the database the relay
// runs beside: unless the operator set GOMAXPROCS, or a container CPU limit
// already gives the relay fewer cores than the machine has, the relay runs
// Go code on half the cores, at least one. It returns the number in use.
//
// A streaming relay needs well under a core (about 2-5 µs of CPU per
// event), and on every extra core Go's scheduler spins looking for work,
// on the cores the walsender needs. On 2 cores with a CPU hog on one
// (side by side, one run each): drains against pg_recvlogical 0.84/0.80
// -> 1.00/1.13 (single-row transactions) and 0.95 -> 1.17 (1,000-row),
// CPU per event 9-20% lower; unloaded drains unchanged. The bootstrap and
// the maintenance commands, which encode in parallel, keep every core.
func ShareCores() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := sharedCores(runtime.GOMAXPROCS(0), runtime.NumCPU())
	runtime.GOMAXPROCS(n)
	return n
}

// sharedCores is ShareCores' rule: procs is Go's default (the machine's
// cores, or fewer under a container CPU limit), cpus the machine's cores.
// A limit below the machine is a budget made for the relay and is kept.
func sharedCores(procs, cpus int) int {
	if procs < cpus {
		return procs
	}
	return max(1, procs/2)
}
