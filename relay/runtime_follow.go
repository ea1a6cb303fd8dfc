package relay

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The follower: after every garbage collection the memory limit is set to
// limitFor(the live heap it found, floor). With the proportional GC off
// and a fixed soft limit, a live heap near the limit makes every
// allocation trigger a collection (a relay at 2,000 tx/s, whose five
// tables' state passed 90 MiB after 2.5 minutes: 227 collections, p99
// latency 400 ms against 97 ms with a 1 GiB limit). Following the live
// heap keeps the GOGC=off economy while the state is small and becomes
// GOGC=50 once it is not.
var (
	followOnce  sync.Once
	followFloor atomic.Int64 // 0: stopped
)

// followLiveHeap starts the follower (once per process) with floor as the
// smallest limit; a later call only changes the floor.
func followLiveHeap(floor int64) {
	followFloor.Store(floor)
	followOnce.Do(func() { afterEachGC(followed) })
}

// stopFollowing stops adjusting the limit (tests restore their own).
func stopFollowing() { followFloor.Store(0) }

// followed is the follower's step, run after a collection.
func followed() {
	if floor := followFloor.Load(); floor > 0 {
		debug.SetMemoryLimit(limitFor(liveHeap(), floor))
	}
}

// limitFor is the follower's rule: liveHeapHalves/2 times the live heap,
// at least floor.
func limitFor(live uint64, floor int64) int64 {
	if live > math.MaxInt64/liveHeapHalves {
		return math.MaxInt64
	}
	return max(floor, int64(live)*liveHeapHalves/2)
}

// liveHeap reads the bytes the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// gcSentinel is allocated to be collected: its cleanup runs once the
// collection that found it unreachable has finished. It holds a pointer so
// that it is never one of the tiny allocator's shared blocks.
type gcSentinel struct{ _ *byte }

// afterEachGC runs f on the cleanup goroutine after every collection from
// now on: each run arms the next sentinel.
func afterEachGC(f func()) {
	s := &gcSentinel{}
	runtime.AddCleanup(s, func(struct{}) { f(); afterEachGC(f) }, struct{}{})
}
