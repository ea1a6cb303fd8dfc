package bootstrap_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// BenchmarkBootstrapCPU bootstraps an outbox of DELTABUS_BENCH_ROWS rows
// (default 2M) DELTABUS_BENCH_REPEAT times (default 3) with each number of
// connections in DELTABUS_BENCH_CONNS (default "1,2"; one connection is the
// case of a single huge topic) and reports, besides the rate, the CPU time
// per row of this process and of the PostgreSQL backends: on a shared
// machine these vary much less than the rates. The Go runtime is set up
// as the relay binary sets it (relay.TuneRuntime).
func BenchmarkBootstrapCPU(b *testing.B) {
	relay.TuneRuntime()
	n := 2_000_000
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_BENCH_ROWS")); err == nil && v > 0 {
		n = v
	}
	db := newOutbox(b)
	fillOrdered(b, db, n)
	db.Exec(b, "VACUUM ANALYZE outbox")
	reps := 3
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_BENCH_REPEAT")); err == nil && v > 0 {
		reps = v
	}
	connsList := []int{1, 2}
	if v := os.Getenv("DELTABUS_BENCH_CONNS"); v != "" {
		connsList = nil
		for _, f := range strings.Split(v, ",") {
			if c, err := strconv.Atoi(f); err == nil && c > 0 {
				connsList = append(connsList, c)
			}
		}
	}
	for _, conns := range connsList {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			for b.Loop() {
				var rates, ours, pgs, refs, refPGs []float64
				for range reps {
					ref, refPG := copyCPU(b, db, n)
					rate, relayCPU, pgCPU := bootstrapCPU(b, db, n, conns)
					rates, ours, pgs = append(rates, rate), append(ours, relayCPU), append(pgs, pgCPU)
					refs, refPGs = append(refs, ref), append(refPGs, refPG)
				}
				for _, s := range [][]float64{rates, ours, pgs, refs, refPGs} {
					slices.Sort(s)
				}
				b.ReportMetric(refs[len(refs)/2], "copy_binary_rows/s")
				b.ReportMetric(refPGs[len(refPGs)/2], "copy_pg_cpu_us/row")
				b.ReportMetric(rates[len(rates)-1], "best_rows/s")
				b.ReportMetric(rates[len(rates)/2], "median_rows/s")
				b.ReportMetric(ours[len(ours)/2], "relay_cpu_us/row")
				b.ReportMetric(pgs[len(pgs)/2], "pg_cpu_us/row")
			}
		})
	}
}

// bootstrapCPU runs one bootstrap and returns its rate and the CPU time
// per row of this process and of the database's backends.
func bootstrapCPU(b *testing.B, db *pgtest.DB, n, conns int) (rate, relayCPU, pgCPU float64) {
	ctx := testCtx(b, time.Hour)
	store, url := localStore(b)
	pg := watchBackends(db.Name)
	self := cpuTicks("self")
	start := time.Now()
	res, err := bootstrap.Snapshot(ctx, testConfig(b, db, url), store, bootstrap.Options{Log: testLog(b), Connections: conns})
	took := time.Since(start)
	ours := cpuTicks("self") - self
	pgTicks := pg()
	if err != nil {
		b.Fatal(err)
	}
	if res.Rows != int64(n) {
		b.Fatalf("bootstrap copied %d rows, want %d", res.Rows, n)
	}
	db.Exec(b, "SELECT pg_drop_replication_slot('deltabus')")
	perRow := func(ticks int64) float64 { return float64(ticks) * 1e4 / float64(n) } // 100 Hz ticks
	return float64(n) / took.Seconds(), perRow(ours), perRow(pgTicks)
}

// copyCPU runs the reference, COPY (SELECT * FROM outbox) TO STDOUT
// (FORMAT binary) into io.Discard, and returns its rate and the CPU time
// per row of the database's backends.
func copyCPU(b *testing.B, db *pgtest.DB, n int) (rate, pgCPU float64) {
	ctx := testCtx(b, time.Hour)
	conn, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	pg := watchBackends(db.Name)
	rate = copyBinaryRate(b, ctx, conn, n)
	return rate, float64(pg()) * 1e4 / float64(n)
}

// cpuTicks returns utime+stime of a process in clock ticks.
func cpuTicks(pid string) int64 {
	st, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(st, ')')
	f := strings.Fields(string(st[i+2:]))
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// watchBackends polls the backends of database dbname every 100 ms until
// the returned function is called, which returns the CPU ticks they used
// meanwhile (backends that end are counted up to their last poll).
func watchBackends(dbname string) func() int64 {
	var mu sync.Mutex
	first, last := map[string]int64{}, map[string]int64{}
	poll := func() {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !bytes.HasPrefix(cmd, []byte("postgres: ")) || !bytes.Contains(cmd, []byte(" "+dbname+" ")) {
				continue
			}
			if t := cpuTicks(e.Name()); t >= 0 {
				mu.Lock()
				if _, ok := first[e.Name()]; !ok {
					first[e.Name()] = t
				}
				last[e.Name()] = t
				mu.Unlock()
			}
		}
	}
	poll()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				poll()
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		var sum int64
		for pid, t := range last {
			sum += t - first[pid]
		}
		return sum
	}
}
