package subscribe

import (
	"context"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// BenchmarkDecodeEvents: decoding one 10,000-event data file as the relay
// writes it, in memory, by one decode worker recycling its buffers and
// chunks: cpu-ns/event is the decode path alone (no store, no log).
func BenchmarkDecodeEvents(b *testing.B) {
	root := localRoot(b)
	tt := newTestTopic(b, root, "orders")
	tt.commit(10_000, 10_000)
	ctx := context.Background()
	st := storage.Sub(root, "orders")
	acts, err := readCommit(ctx, st, 1)
	if err != nil {
		b.Fatal(err)
	}
	var data []byte
	for _, a := range acts {
		if a.Add != nil {
			if data, err = st.Get(ctx, a.Add.Path); err != nil {
				b.Fatal(err)
			}
		}
	}
	reuse := &decodeReuse{chunks: make(chan *chunk, 16)}
	events := 0
	emit := func(c *chunk) error {
		events += c.n
		select {
		case reuse.chunks <- c:
		default:
		}
		return nil
	}
	b.ReportAllocs()
	start, cpu0 := time.Now(), processCPU(b)
	for b.Loop() {
		if err := decodeEvents(ctx, data, reuse, emit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(events), "cpu-ns/event")
}
