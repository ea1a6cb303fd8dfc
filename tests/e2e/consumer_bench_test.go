package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/deltabus/deltabus/bench/visible"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/tests/duckdbtest"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/tests/s3test"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkConsumerBacklog: one consumer reads a backlog of events
// (DELTABUS_BENCH_BACKLOG, default 200,000; 1,000,000 for the figure in the
// brief) in versions of 10,000 events, checkpointing every batch (default
// 1,000 events, DELTABUS_BENCH_BATCH) in the local store, and DuckDB scans
// the same data files reading every column; the two alternate
// DELTABUS_BENCH_ROUNDS times (default 3) in the same run. Reports both
// medians and their ratio, and the median CPU time each spent per event
// (the machine is shared: CPU time is steadier than the rates). A third
// reader in the same alternation, the consumer with batches by column
// (subscribe.Options.Columns, the handler reading each payload), reports
// columns-ev/s, columns-ratio and columns-cpu-ns/ev.
func BenchmarkConsumerBacklog(b *testing.B) {
	n := envInt("DELTABUS_BENCH_BACKLOG", 200_000)
	dir := b.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	files := writeBacklog(b, root, "orders", n, 10_000)
	ctx := context.Background()
	var got, bytes int
	h := func(_ context.Context, batch *subscribe.Batch) error {
		for i := range batch.Events {
			bytes += len(batch.Events[i].Payload)
		}
		got += len(batch.Events)
		return nil
	}
	byColumn := func(_ context.Context, batch *subscribe.Batch) error {
		cs := batch.Columns
		for i := range cs.Len() {
			bytes += len(cs.Payload(i))
		}
		got += cs.Len()
		return nil
	}
	consume := func(group string, h subscribe.Handler, columns bool) (evs, cpuNs float64) {
		got = 0
		start, cpu0 := time.Now(), processCPU(b)
		opts := subscribe.Options{BatchSize: envInt("DELTABUS_BENCH_BATCH", subscribe.DefaultBatchSize), Columns: columns}
		if err := subscribe.Subscribe(ctx, root, "orders", group, h, opts); err != nil {
			b.Fatal(err)
		}
		secs, cpu := time.Since(start).Seconds(), processCPU(b)-cpu0
		if got != n {
			b.Fatalf("consumer read %d events, want %d", got, n)
		}
		return float64(n) / secs, float64(cpu.Nanoseconds()) / float64(n)
	}
	rounds := envInt("DELTABUS_BENCH_ROUNDS", 3)
	for b.Loop() {
		// Alternate the readers and keep each one's median: the machine is
		// shared and noisy.
		var ours, duck, cols, oursCPU, duckCPU, colsCPU []float64
		for r := range rounds {
			evs, cpu := consume(fmt.Sprintf("bench-%d", r), h, false)
			ours, oursCPU = append(ours, evs), append(oursCPU, cpu)
			res := duckScan(b, dir, files)
			if res.Rows != n {
				b.Fatalf("DuckDB read %d rows, want %d", res.Rows, n)
			}
			duck, duckCPU = append(duck, float64(n)/(res.Ms/1000)), append(duckCPU, res.CPUMs*1e6/float64(n))
			evs, cpu = consume(fmt.Sprintf("columns-%d", r), byColumn, true)
			cols, colsCPU = append(cols, evs), append(colsCPU, cpu)
		}
		median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
		b.ReportMetric(median(ours), "consumer-ev/s")
		b.ReportMetric(median(duck), "duckdb-ev/s")
		b.ReportMetric(median(ours)/median(duck), "ratio")
		b.ReportMetric(median(oursCPU), "consumer-cpu-ns/ev")
		b.ReportMetric(median(duckCPU), "duckdb-cpu-ns/ev")
		b.ReportMetric(median(cols), "columns-ev/s")
		b.ReportMetric(median(cols)/median(duck), "columns-ratio")
		b.ReportMetric(median(colsCPU), "columns-cpu-ns/ev")
	}
}

// writeBacklog writes n events into a topic table, perVersion per commit
// (one data file each, as the relay writes a batch), and returns the data
// files' paths.
func writeBacklog(b *testing.B, root storage.Store, name string, n, perVersion int) []string {
	ctx := context.Background()
	st := storage.Sub(root, name)
	meta, proto := topic.NewTableMetadata(name)
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil {
		b.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var paths []string
	now := time.Now()
	for done := 0; done < n; done += perVersion {
		w := topic.NewFileWriter(st, topic.FileOptions{})
		for i := done; i < min(n, done+perVersion); i++ {
			h := `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
			ev := &outbox.Event{ID: fmt.Sprintf("0190a8b2-7c3d-7000-8000-%012d", i), Topic: name, Key: fmt.Sprintf("customer-%d", i%1000),
				Type: "OrderPlaced", SchemaVersion: 1, Headers: &h,
				Payload:    fmt.Sprintf(`{"order_id":%d,"customer":"customer-%d","amount":99.5,"currency":"EUR","note":"padding padding padding"}`, i, i%1000),
				OccurredAt: now, CommitLSN: int64(1000 + i/3), Seq: int32(i % 3), Xid: int64(700 + i/3), CommitTime: now}
			if err := w.Append(ev); err != nil {
				b.Fatal(err)
			}
		}
		adds, err := w.Close(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: "bench", Version: int64(done + 1)}}); err != nil {
			b.Fatal(err)
		}
		for _, a := range adds {
			paths = append(paths, name+"/"+a.Path)
		}
	}
	tbl.Wait()
	return paths
}

// duckResult is what duckdb_scan.mjs prints: the rows, the query's wall
// time and the CPU time DuckDB spent in it.
type duckResult struct {
	Rows  int
	Ms    float64
	CPUMs float64 `json:"cpuMs"`
}

// processCPU returns the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// duckScan has DuckDB read every column of files (relative to dir).
func duckScan(b *testing.B, dir string, files []string) duckResult {
	pkg := duckdbtest.Dir(b)
	abs := make([]string, len(files))
	for i, f := range files {
		abs[i] = filepath.Join(dir, f)
	}
	list := filepath.Join(b.TempDir(), "files.txt")
	if err := os.WriteFile(list, []byte(strings.Join(abs, "\n")), 0o644); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("node", "testdata/duckdb_scan.mjs", pkg, list).Output()
	if err != nil {
		b.Fatalf("duckdb_scan.mjs: %v", err)
	}
	var res duckResult
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("duckdb_scan.mjs output %q: %v", out, err)
	}
	return res
}

// BenchmarkConsumerLatency: the relay at a steady rate (DELTABUS_BENCH_RATE,
// default 2,000 events/s, single- and multi-event transactions) for
// DELTABUS_BENCH_SECONDS (default 5); a consumer with the default poll
// interval follows "orders"; latency = handler time minus the event's
// source commit time. Local FS and versitygw.
func BenchmarkConsumerLatency(b *testing.B) {
	b.Run("local", func(b *testing.B) {
		dir := b.TempDir()
		st, err := storage.NewLocal(dir)
		if err != nil {
			b.Fatal(err)
		}
		benchLatency(b, "file://"+dir, st, nil)
	})
	b.Run("s3", func(b *testing.B) {
		bk := s3test.NewBucket(b)
		st, err := storage.Open(context.Background(), bk.URL("bus"), bk.Options())
		if err != nil {
			b.Fatal(err)
		}
		env := []string{"DELTABUS_S3_ENDPOINT=" + bk.Endpoint, "DELTABUS_S3_PATH_STYLE=true", "AWS_REGION=" + bk.Region,
			"AWS_ACCESS_KEY_ID=" + bk.AccessKey, "AWS_SECRET_ACCESS_KEY=" + bk.SecretKey}
		benchLatency(b, bk.URL("bus"), st, env)
	})
}

func benchLatency(b *testing.B, storeURL string, store storage.Store, extraEnv []string) {
	rate, secs := envInt("DELTABUS_BENCH_RATE", 2000), envInt("DELTABUS_BENCH_SECONDS", 5)
	db := pgtest.NewDB(b)
	conn := db.Conn(b)
	if _, err := migrations.Apply(context.Background(), conn, migrations.Options{}); err != nil {
		b.Fatal(err)
	}
	var watch *visible.Watcher // local stores: when each commit became visible
	if dir, local := strings.CutPrefix(storeURL, "file://"); local {
		w, err := visible.Watch(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer w.End()
		watch = w
	}
	env := append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}, extraEnv...)
	relay := startProc(b, buildBinary(b, "cmd/relay"), env, "run", "--metrics-addr", "")
	for !strings.Contains(relay.output(), "msg=streaming") {
		if done, err := relay.exited(); done {
			b.Fatalf("relay exited: %v\n%s", err, relay.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	type seen struct {
		version    int64
		commit, at time.Time
	}
	var all []seen
	h := func(_ context.Context, batch *subscribe.Batch) error {
		now := time.Now()
		mu.Lock()
		for _, e := range batch.Events {
			lat = append(lat, now.Sub(e.CommitTime))
			all = append(all, seen{e.Version, e.CommitTime, now})
		}
		mu.Unlock()
		return nil
	}
	subDone := make(chan error, 1)
	subCtx, stopSub := context.WithCancel(ctx)
	go func() {
		subDone <- subscribe.Subscribe(subCtx, store, "orders", "latency", h, subscribe.Options{Follow: true})
	}()
	// Steady state: the topic's table exists and the consumer follows it.
	durable := db.DSN + "&options=-c%20synchronous_commit%3Don"
	var warm pacedProducer
	warm.run(ctx, b, durable, 100, 3)
	waitEvents := func(want int) {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n := len(lat)
			mu.Unlock()
			if n >= want {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("consumer got %d of %d events", n, want)
			}
		}
	}
	waitEvents(2)
	mu.Lock()
	lat, all = lat[:0], all[:0]
	mu.Unlock()
	b.ResetTimer()
	var prod pacedProducer
	total := rate * secs
	prod.run(ctx, b, durable, rate, total)
	want := total - total/3 // "orders" gets two thirds
	waitEvents(want)
	b.StopTimer()
	stopSub()
	<-subDone
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	// The relay's share: source commit -> the commit file visible (the
	// moment it got its name, package visible; local only).
	if watch != nil {
		if err := watch.End(); err != nil {
			b.Fatal(err)
		}
		var relay, consumer []time.Duration
		for _, e := range all {
			at, _, err := watch.At("orders", delta.CommitKey(e.version))
			if err != nil {
				b.Fatal(err)
			}
			relay, consumer = append(relay, at.Sub(e.commit)), append(consumer, e.at.Sub(at))
		}
		slices.Sort(relay)
		slices.Sort(consumer)
		b.ReportMetric(float64(relay[len(relay)*99/100].Microseconds())/1000, "relay-p99-ms")
		b.ReportMetric(float64(consumer[len(consumer)*99/100].Microseconds())/1000, "consumer-p99-ms")
	}
	b.ReportMetric(float64(len(lat)), "events")
}
