package bootstrap_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/bench"
	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
)

// BenchmarkBootstrap compares a bootstrap of an outbox of
// DELTABUS_BENCH_ROWS rows (default 2M) over DELTABUS_BENCH_TOPICS topics
// (default 4), judged against the store's contracts as
// DELTABUS_BENCH_CONTRACTS says (benchContracts), with `COPY (SELECT * FROM outbox)
// TO STDOUT (FORMAT binary)` into io.Discard on the same database, and
// reports the peak RSS of the bootstrap (VmHWM after a reset) and the CPU
// time the process used per row. The Go runtime is set up as the relay
// binary sets it (relay.TuneRuntime). Each iteration runs the COPY, then
// the bootstrap; with several (-benchtime 3x) the figures are the medians
// (a shared machine moves a single ratio by a quarter).
func BenchmarkBootstrap(b *testing.B) {
	relay.TuneRuntime()
	n := 2_000_000
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_BENCH_ROWS")); err == nil && v > 0 {
		n = v
	}
	db := newOutbox(b)
	fillOrdered(b, db, n)
	db.Exec(b, "VACUUM ANALYZE outbox")
	// The fill leaves about a gigabyte of dirty pages (the test cluster
	// runs with fsync off); flush them so the kernel's writeback does not
	// compete with the first measurement.
	syscall.Sync()
	ctx := testCtx(b, time.Hour)
	conn := db.Conn(b)
	var rates, copies, ratios, cpus []float64 // per iteration: the figures are their medians
	for b.Loop() {
		copyRate := copyBinaryRate(b, ctx, conn, n)
		store, url := localStore(b)
		runtime.GC()
		resetPeakRSS(b)
		baseRSS := rssKiB(b, "VmRSS")
		cpu := processCPU(b)
		start := time.Now()
		res, err := bootstrap.Snapshot(ctx, testConfig(b, db, url), store, bootstrap.Options{Log: testLog(b), Contracts: benchContracts(b, store)})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		cpu = processCPU(b) - cpu
		if res.Rows != int64(n) {
			b.Fatalf("bootstrap copied %d rows, want %d", res.Rows, n)
		}
		rate := float64(n) / took.Seconds()
		rates, copies, ratios = append(rates, rate), append(copies, copyRate), append(ratios, rate/copyRate)
		cpus = append(cpus, float64(cpu.Nanoseconds())/float64(n))
		b.ReportMetric(bench.Median(rates), "bootstrap_rows/s")
		b.ReportMetric(bench.Median(copies), "copy_binary_rows/s")
		b.ReportMetric(bench.Median(ratios), "ratio")
		b.ReportMetric(float64(rssKiB(b, "VmHWM"))/1024, "peak_rss_MiB")
		b.ReportMetric(bench.Median(cpus), "cpu_ns/row")
		b.ReportMetric(float64(baseRSS)/1024, "base_rss_MiB")
		b.ReportMetric(float64(fillTopics()), "topics")
		db.Exec(b, "SELECT pg_drop_replication_slot('deltabus')")
	}
}

func copyBinaryRate(b *testing.B, ctx context.Context, conn *pgx.Conn, n int) float64 {
	start := time.Now()
	tag, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT * FROM outbox) TO STDOUT (FORMAT binary)")
	if err != nil {
		b.Fatal(err)
	}
	if tag.RowsAffected() != int64(n) {
		b.Fatalf("COPY read %d rows", tag.RowsAffected())
	}
	return float64(n) / time.Since(start).Seconds()
}

// processCPU is the user and system CPU time the process has used: a
// bootstrap's CPU per row varies much less than its rate on a shared
// machine.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset peak RSS: %v", err)
	}
}

func rssKiB(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	b.Fatalf("%s not in /proc/self/status", field)
	return 0
}

// benchContracts is the contract cache of a bootstrap benchmark, by
// DELTABUS_BENCH_CONTRACTS: "" none (nil); "registry" a cache of the
// store's registry, which holds nothing (the relay's first start without
// contracts: it must cost nothing per row); "all" a contract for the
// events of every topic, each event validated.
func benchContracts(b *testing.B, store storage.Store) *contract.Cache {
	switch os.Getenv("DELTABUS_BENCH_CONTRACTS") {
	case "":
		return nil
	case "all":
		reg := contract.NewRegistry(store, nil)
		schema := `{"type":"object","required":["i"],"properties":{"i":{"type":"integer"},"note":{"type":"string"}}}`
		for i := range fillTopics() {
			if _, err := reg.Register(context.Background(), contract.Registration{Topic: "topic-" + strconv.Itoa(i), Type: "created",
				Version: 1, Schema: []byte(schema), Mode: compat.None}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return contract.New(store, contract.Options{Poll: -1})
}
