package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// BenchmarkCommit1000Rows: latency of one topic commit of 1,000 events
// (parquet file upload + Delta commit with txn), on local FS and on
// versitygw; reports p50 and p99.
func BenchmarkCommit1000Rows(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		st, err := storage.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		benchCommits(b, st)
	})
	b.Run("s3", func(b *testing.B) {
		bk := s3test.NewBucket(b)
		st, err := storage.Open(context.Background(), bk.URL("bench"), bk.Options())
		if err != nil {
			b.Fatal(err)
		}
		benchCommits(b, st)
	})
}

func benchCommits(b *testing.B, st storage.Store) {
	ctx := context.Background()
	meta, proto := topic.NewTableMetadata("bench")
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil {
		b.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{AsyncCheckpoints: true})
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		w := topic.NewFileWriter(st, topic.FileOptions{})
		for r := range 1000 {
			ev := &outbox.Event{ID: fmt.Sprintf("%08d-%04d", i, r), Topic: "bench", Key: "k", Type: "T", SchemaVersion: 1,
				Payload:    `{"order_id":12345,"customer":"customer-42","amount":99.5,"currency":"EUR","note":"padding padding padding"}`,
				OccurredAt: start, CommitLSN: int64(i + 1), Seq: int32(r), CommitTime: start}
			if err := w.Append(ev); err != nil {
				b.Fatal(err)
			}
		}
		adds, err := w.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: "bench", Version: int64(i + 1)}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	tbl.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
