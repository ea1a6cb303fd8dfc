package storage_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// Upload benchmark dimensions: the relay's worst case, four data files of
// the maximum size committed at once.
const (
	uploadWriters = 4
	uploadSize    = 64 << 20
	uploadChunk   = 1 << 20
)

// BenchmarkS3Upload64MiBx4 commits four 64 MiB objects written through
// Create concurrently to versitygw and reports the peak Go heap in use and
// the peak process RSS above their level before the round (sampled every
// millisecond), per upload, plus throughput. The "buffered" case is the old
// path (one PutObject whose body go-retryablehttp reads into memory), kept
// behind a test-only switch for this comparison.
func BenchmarkS3Upload64MiBx4(b *testing.B) {
	for _, c := range []struct {
		name     string
		buffered bool
	}{{"streamed", false}, {"buffered", true}} {
		b.Run(c.name, func(b *testing.B) {
			restore := storage.SetBufferedUploads(c.buffered)
			defer restore()
			s, err := storage.NewS3(b.Context(), s3test.NewBucket(b).S3Config("bench"))
			if err != nil {
				b.Fatal(err)
			}
			benchUploads(b, s)
		})
	}
}

func benchUploads(b *testing.B, s storage.Store) {
	chunks := make([][]byte, uploadWriters)
	for i := range chunks {
		chunks[i] = make([]byte, uploadChunk)
		r := rand.New(rand.NewPCG(uint64(i), 1))
		for j := range chunks[i] {
			chunks[i][j] = byte(r.Uint32())
		}
	}
	var heapPeak, rssPeak float64
	round := 0
	for b.Loop() {
		b.StopTimer()
		debug.FreeOSMemory()
		m := startMemSampler()
		b.StartTimer()
		var wg sync.WaitGroup
		errs := make([]error, uploadWriters)
		for i := range uploadWriters {
			wg.Go(func() {
				errs[i] = uploadOne(b.Context(), s, fmt.Sprintf("r%d/part-%d.parquet", round, i), chunks[i])
			})
		}
		wg.Wait()
		b.StopTimer()
		heap, rss := m.stop()
		heapPeak, rssPeak = max(heapPeak, heap), max(rssPeak, rss)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		round++
		b.StartTimer()
	}
	const mib = 1 << 20
	b.ReportMetric(heapPeak/mib/uploadWriters, "heap-MiB/upload")
	b.ReportMetric(rssPeak/mib/uploadWriters, "rss-MiB/upload")
	b.ReportMetric(float64(round*uploadWriters*uploadSize)/mib/b.Elapsed().Seconds(), "MiB/s")
}

func uploadOne(ctx context.Context, s storage.Store, key string, chunk []byte) error {
	w, err := s.Create(ctx, key)
	if err != nil {
		return err
	}
	defer w.Abort()
	for range uploadSize / uploadChunk {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return w.Commit(ctx)
}

// memSampler records the peak heap in use and the peak RSS above the level
// at its start.
type memSampler struct {
	stopc     chan struct{}
	done      chan struct{}
	heap0     uint64
	rss0      uint64
	heap, rss uint64
}

var heapMetrics = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
}

// heapInuse is MemStats.HeapInuse without stopping the world.
func heapInuse() uint64 {
	s := append([]metrics.Sample(nil), heapMetrics...)
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// rss reads the resident set size from /proc/self/statm.
func rss() uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

func startMemSampler() *memSampler {
	runtime.GC()
	m := &memSampler{stopc: make(chan struct{}), done: make(chan struct{}), heap0: heapInuse(), rss0: rss()}
	go func() {
		defer close(m.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			m.heap, m.rss = max(m.heap, heapInuse()), max(m.rss, rss())
			select {
			case <-m.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// stop returns the peaks above the starting levels, in bytes.
func (m *memSampler) stop() (heap, rss float64) {
	close(m.stopc)
	<-m.done
	return float64(m.heap - min(m.heap, m.heap0)), float64(m.rss - min(m.rss, m.rss0))
}
