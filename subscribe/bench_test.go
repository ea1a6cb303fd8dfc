package subscribe

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSubscribeBacklog: one subscription reading 200,000 events in
// versions of 10,000 (one file each) from the local store, checkpointing
// every 1,000, with a handler that touches each payload. cpu-ns/event is
// the process's CPU time per event delivered.
var benchBatch = 1000

func BenchmarkSubscribeBacklog(b *testing.B) {
	root := localRoot(b)
	tt := newTestTopic(b, root, "orders")
	const n = 200_000
	for range n / 10_000 {
		tt.commit(10_000, 10_000)
	}
	ctx := context.Background()
	var bytes int
	h := func(_ context.Context, batch *Batch) error {
		for i := range batch.Events {
			bytes += len(batch.Events[i].Payload)
		}
		return nil
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU(b)
	for i := 0; b.Loop(); i++ {
		if err := Subscribe(ctx, root, "orders", fmt.Sprintf("g%d", i), h, Options{BatchSize: benchBatch}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(n*b.N), "cpu-ns/event")
}

// processCPU returns the CPU time (user and system) the process used so
// far: steadier than a rate on a shared machine.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
