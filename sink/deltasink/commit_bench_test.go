package deltasink

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
)

// BenchmarkSmallCommit is the relay's per-commit cost at low latency: a
// batch of 20 events of one topic on local disk (fsync on), committed as
// one Delta commit (data file, commit, a checkpoint every 100). It reports
// the CPU (user+system) per topic commit.
func BenchmarkSmallCommit(b *testing.B) {
	root, err := storage.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := New(root, Options{AppID: "deltabus-bench"})
	ctx := context.Background()
	pos := int64(100)
	var cpu time.Duration
	n := 0
	for b.Loop() {
		began := rusage()
		batch := s.NewBatch()
		for range 20 {
			n++
			ev := outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Topic: "orders", Key: "k-1", Type: "OrderPlaced",
				SchemaVersion: 1, Payload: `{"order_id": 123456, "customer": "customer-4242", "amount": 12.5, "currency": "EUR"}`,
				OccurredAt: time.Now(), CommitLSN: pos, Seq: 0, Xid: 7, CommitTime: time.Now()}
			if err := batch.Append(&ev); err != nil {
				b.Fatal(err)
			}
			pos++
		}
		if _, err := batch.Commit(ctx, "orders", pos); err != nil {
			b.Fatal(err)
		}
		cpu += rusage() - began
	}
	s.Close(ctx)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/commit")
}

func rusage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
