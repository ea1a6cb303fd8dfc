package relay

import (
	"os"
	"runtime/debug"
)

// Runtime defaults of the relay process (TuneRuntime).
const (
	// DefaultMemoryLimit is the Go heap's soft limit: rows stream through
	// bounded row groups and files spill to the store, so the heap stays
	// well below it.
	DefaultMemoryLimit = 100 << 20
	// DefaultGCPercent lets the heap grow to 5x the live data before a
	// collection, still capped by the memory limit. Collections empty the
	// Parquet encoder's buffer pools, which are then rebuilt: at the
	// default of 100, a bootstrap spent 8% more CPU per row.
	DefaultGCPercent = 400
)

// TuneRuntime sets the relay's memory limit and GC percent, each unless
// the operator set it (GOMEMLIMIT, GOGC). The relay binary calls it once
// at start; benchmarks call it to measure the relay as it runs.
func TuneRuntime() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(DefaultMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
}
