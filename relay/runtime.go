package relay

import (
	"math"
	"os"
	"runtime/debug"
)

// Runtime defaults of the relay process (TuneRuntime).
const (
	// DefaultMemoryLimit is the Go heap's soft limit: rows stream through
	// bounded row groups and files spill to the store, so the heap stays
	// well below it.
	DefaultMemoryLimit = 100 << 20
	// DefaultGCPercent is off: the heap grows to the memory limit before
	// a collection. Collections empty the Parquet encoder's buffer pools,
	// which are then regrown: against GOGC=100 a bootstrap spent 8% more
	// CPU per row, against 400 it was about 8% slower (paired runs), with
	// the same peak RSS (the soft limit bounds both).
	DefaultGCPercent = -1
)

// TuneRuntime sets the relay's memory limit and turns the proportional GC
// off, each unless the operator set it (GOMEMLIMIT, GOGC): collections
// then happen as the heap nears the limit. The relay binary calls it once
// at start; benchmarks call it to measure the relay as it runs.
func TuneRuntime() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
	// Without a memory limit (GOMEMLIMIT=off) the proportional GC is the
	// only trigger left: keep it.
	if os.Getenv("GOGC") == "" && debug.SetMemoryLimit(-1) < math.MaxInt64 {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
