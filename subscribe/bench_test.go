package subscribe

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/grouptest"
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

// BenchmarkSubscribeGroupTopic: a subscription of one of the 10 topics of
// a group's table, reading 200,000 rows interleaved round-robin in
// versions of 10,000 (one mixed file each; 20,000 are its events), with
// BenchmarkSubscribeBacklog's handler. cpu-ns/row is the process's CPU
// time per row of the table (each mixed file is decoded whole, then its
// rows filtered), cpu-ns/event per event delivered.
func BenchmarkSubscribeGroupTopic(b *testing.B) {
	root := localRoot(b)
	g := grouptest.New(b, root, "m", []string{"m.*"}, grouptest.Options{})
	defer g.Close()
	const n, topics = 200_000, 10
	names := make([]string, 0, 10_000)
	for i := range 10_000 {
		names = append(names, fmt.Sprintf("m.t%d", i%topics))
	}
	for range n / 10_000 {
		g.Commit(names...)
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
		if err := Subscribe(ctx, root, "m.t3", fmt.Sprintf("g%d", i), h, Options{BatchSize: benchBatch}); err != nil {
			b.Fatal(err)
		}
	}
	cpu := float64((processCPU(b) - cpu0).Nanoseconds())
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "rows/s")
	b.ReportMetric(cpu/float64(n*b.N), "cpu-ns/row")
	b.ReportMetric(cpu/float64(n/topics*b.N), "cpu-ns/event")
}
