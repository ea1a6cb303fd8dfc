package deltasink

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// BenchmarkManyTopics commits one batch spread over many topics, as the
// relay does with one large source transaction: rows appended in
// transaction order (topic i mod T), then one commit per topic, four at a
// time. It reports the process's peak RSS (VmHWM, reset at the start) and
// the peak live heap, under the relay's runtime settings (100 MiB soft
// limit, GOGC off). Goal: peak RSS ≤ 200 MiB.
func BenchmarkManyTopics(b *testing.B) {
	for _, shape := range []struct {
		name           string
		topics, events int
		payload        int
	}{{"10000_topics_x1", 10_000, 10_000, 200}, {"1000_topics_x1000_1KB", 1000, 1_000_000, 1000}, {"300_topics_x1000_1KB", 300, 300_000, 1000}} {
		for _, backend := range []string{"local", "s3"} {
			b.Run(shape.name+"/"+backend, func(b *testing.B) {
				for b.Loop() {
					root := benchStore(b, backend)
					manyTopics(b, root, shape.topics, shape.events, shape.payload)
				}
			})
		}
	}
}

func benchStore(b *testing.B, backend string) storage.Store {
	if backend == "local" {
		st, err := storage.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	bucket := s3test.NewBucket(b)
	st, err := storage.Open(context.Background(), bucket.URL("many"), bucket.Options())
	if err != nil {
		b.Fatal(err)
	}
	return st
}

func manyTopics(b *testing.B, root storage.Store, topics, events, payload int) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(100 << 20))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
	stopHeap := sampleLiveHeap()
	ctx := context.Background()
	s := New(root, Options{AppID: "deltabus-bench"})
	batch := s.NewBatch()
	rnd := rand.NewChaCha8([32]byte{3})
	raw := make([]byte, payload/4)
	start := time.Now()
	for i := range events {
		_, _ = rnd.Read(raw)
		hexed := hex.EncodeToString(raw)
		ev := outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Topic: fmt.Sprintf("topic-%05d", i%topics),
			Key: "k", Type: "T", SchemaVersion: 1, Payload: `{"a":"` + hexed + `","b":"` + strings.ToUpper(hexed) + `"}`,
			OccurredAt: time.Unix(1700000000, 0), CommitLSN: 100, Seq: int32(i), Xid: 7, CommitTime: time.Unix(1700000000, 0)}
		if err := batch.Append(&ev); err != nil {
			b.Fatal(err)
		}
	}
	appended := time.Since(start)
	if path := os.Getenv("DELTABUS_HEAP_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			runtime.GC()
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for t := range topics {
		g.Go(func() error {
			_, err := batch.Commit(gctx, fmt.Sprintf("topic-%05d", t), 100)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
	b.ReportMetric(float64(stopHeap())/(1<<20), "peak-live-heap-MiB")
	b.ReportMetric(appended.Seconds(), "append-s")
	b.ReportMetric(time.Since(start).Seconds(), "total-s")
	b.ReportMetric(0, "ns/op")
}

// sampleLiveHeap samples the live heap the last GC marked, every 10 ms,
// until the returned function is called; it returns the peak.
func sampleLiveHeap() func() uint64 {
	done, res := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				res <- peak
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); return <-res }
}

func peakRSSMiB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
