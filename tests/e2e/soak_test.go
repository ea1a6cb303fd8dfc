package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/tests/s3test"
)

// BenchmarkSoak is the "months unattended" soak: producers write a steady
// 1,000 events/s over 5 topics for DELTABUS_SOAK_MINUTES (default 30) while
// the relay compacts, cleans up the log and vacuums every 30 s at
// accelerated retention (2 minutes), and a consumer group follows every
// topic's change feed. Every minute it samples each topic's active files,
// _delta_log entries and snapshot load time, the relay's RSS and the
// slot's lag. At the end every topic must equal the source (an independent
// slot's commit order), the consumer must have received each event exactly
// once, and DuckDB must read the maintained tables. DELTABUS_SOAK_S3=1 runs
// it on versitygw.
//
//	DELTABUS_SOAK_MINUTES=30 go test -run '^$' -bench BenchmarkSoak -benchtime 1x -timeout 60m ./tests/e2e
func BenchmarkSoak(b *testing.B) {
	minutes := envInt("DELTABUS_SOAK_MINUTES", 30)
	rate := envInt("DELTABUS_SOAK_RATE", 1000)
	for b.Loop() {
		url, store, env := soakStore(b)
		s := newScenario(b, url, store, env, "--maintenance", "30s", "--maintenance-log-retention", "2m",
			"--maintenance-file-retention", "2m")
		p := s.relay()
		waitSlotActive(b, s.db.DSN, s.slot, p)
		ctx, stop := context.WithCancel(context.Background())
		cons := followAll(ctx, b, store)
		s.produce(rate*60*minutes, rate)
		samples := s.sample(b, p, store, minutes)
		select {
		case <-s.produced:
		case <-time.After(10 * time.Minute):
			b.Fatal("producers did not finish")
		}
		waitDrained(b, s.db.DSN, s.slot, 5*time.Minute)
		rows := s.truth.read(b)
		cons.waitFor(b, len(rows), 5*time.Minute)
		stop()
		cons.wg.Wait()
		s.stopWithin(p, 30*time.Second)
		checkAgainstTruth(b, store, rows)
		cons.checkOnce(b, rows)
		duckSummary(b, url, store)
		report(b, samples)
	}
}

func soakStore(b *testing.B) (string, storage.Store, []string) {
	if os.Getenv("DELTABUS_SOAK_S3") == "" {
		dir := b.TempDir()
		st, err := storage.NewLocal(dir)
		if err != nil {
			b.Fatal(err)
		}
		return "file://" + dir, st, nil
	}
	bk := s3test.NewBucket(b)
	st, err := storage.Open(context.Background(), bk.URL("bus"), bk.Options())
	if err != nil {
		b.Fatal(err)
	}
	return bk.URL("bus"), st, s3Env(bk, bk.Endpoint)
}

// soakSample is one minute of the soak.
type soakSample struct {
	minute                int
	maxFiles, maxLog      int
	loadMax               time.Duration
	rssMiB, peakMiB       float64
	lagMiB                float64
	written, versionsSeen int64
}

func (s *scenario) sample(b testing.TB, p *relayProc, store storage.Store, minutes int) []soakSample {
	var out []soakSample
	ctx := context.Background()
	for m := 1; m <= minutes; m++ {
		time.Sleep(time.Minute)
		smp := soakSample{minute: m, written: s.written()}
		for _, tp := range topics {
			table := storage.Sub(store, tp)
			start := time.Now()
			snap, err := delta.LoadSnapshot(ctx, table, -1)
			if err != nil {
				b.Fatalf("minute %d: load %s: %v", m, tp, err)
			}
			smp.loadMax = max(smp.loadMax, time.Since(start))
			smp.maxFiles = max(smp.maxFiles, len(snap.Files))
			smp.versionsSeen = max(smp.versionsSeen, snap.Version)
			logs, err := table.List(ctx, delta.LogDir, "")
			if err != nil {
				b.Fatal(err)
			}
			smp.maxLog = max(smp.maxLog, len(logs))
		}
		smp.rssMiB, smp.peakMiB = procMemMiB(p.cmd.Process.Pid)
		var lag int64
		if err := pgxQueryRow(b, s.db.DSN, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
			FROM pg_replication_slots WHERE slot_name = '`+s.slot+`'`, &lag); err != nil {
			b.Fatal(err)
		}
		smp.lagMiB = float64(lag) / (1 << 20)
		b.Logf("minute %2d: %7d events written, max %4d active files and %4d log entries per topic, snapshot load %6.1f ms, relay RSS %5.1f MiB (peak %5.1f), slot lag %.2f MiB",
			m, smp.written, smp.maxFiles, smp.maxLog, float64(smp.loadMax.Microseconds())/1000, smp.rssMiB, smp.peakMiB, smp.lagMiB)
		out = append(out, smp)
	}
	return out
}

// procMemMiB returns a process's current and peak resident set size.
func procMemMiB(pid int) (rss, peak float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}

func report(b *testing.B, samples []soakSample) {
	if len(samples) == 0 {
		return
	}
	var maxFiles, maxLog int
	var peak, maxLag float64
	for _, s := range samples {
		maxFiles, maxLog = max(maxFiles, s.maxFiles), max(maxLog, s.maxLog)
		peak, maxLag = max(peak, s.peakMiB), max(maxLag, s.lagMiB)
	}
	first, last := samples[0].loadMax, samples[len(samples)-1].loadMax
	b.ReportMetric(float64(maxFiles), "max_active_files/topic")
	b.ReportMetric(float64(maxLog), "max_log_entries/topic")
	b.ReportMetric(peak, "peak_rss_MiB")
	b.ReportMetric(maxLag, "max_slot_lag_MiB")
	b.ReportMetric(float64(first.Microseconds())/1000, "load_ms_first_minute")
	b.ReportMetric(float64(last.Microseconds())/1000, "load_ms_last_minute")
}

// consumers follow every topic as one group and count what they receive.
type consumers struct {
	mu    sync.Mutex
	seen  map[string]int
	total int
	wg    sync.WaitGroup
	errs  []error
}

func followAll(ctx context.Context, b testing.TB, store storage.Store) *consumers {
	c := &consumers{seen: map[string]int{}}
	for _, tp := range topics {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			err := subscribe.Subscribe(ctx, store, tp, "soak", func(_ context.Context, batch *subscribe.Batch) error {
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, e := range batch.Events {
					c.seen[e.ID]++
					c.total++
				}
				return nil
			}, subscribe.Options{Follow: true, Start: subscribe.FromVersion(0)})
			if err != nil && ctx.Err() == nil {
				c.mu.Lock()
				c.errs = append(c.errs, fmt.Errorf("topic %s: %w", tp, err))
				c.mu.Unlock()
			}
		}()
	}
	return c
}

func (c *consumers) waitFor(b testing.TB, n int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		c.mu.Lock()
		got, errs := len(c.seen), c.errs
		c.mu.Unlock()
		if len(errs) > 0 {
			b.Fatalf("consumer: %v", errs)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the consumer received %d distinct events, the source has %d", got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *consumers) checkOnce(b testing.TB, rows []truthRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total != len(rows) || len(c.seen) != len(rows) {
		b.Errorf("the consumer received %d events (%d distinct), the source has %d", c.total, len(c.seen), len(rows))
	}
	for _, r := range rows {
		if c.seen[r.ID] != 1 && !strings.HasPrefix(r.Topic, "_") {
			b.Errorf("event %s received %d times", r.ID, c.seen[r.ID])
			return
		}
	}
}

// duckSummary has DuckDB replay each maintained topic table's log
// (checkpoint, then commits) and read its active files: every row once,
// each file in (commit_lsn, seq) order. Local stores only (DuckDB reads
// the files directly).
func duckSummary(b testing.TB, url string, store storage.Store) {
	dir, ok := strings.CutPrefix(url, "file://")
	if !ok {
		return
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "sink", "topic", "testdata", "duckdb_check.mjs")
	home, _ := os.UserHomeDir()
	pkg := envOr("DELTABUS_DUCKDB_DIR", filepath.Join(home, ".cache", "deltabus", "duckdb"))
	var dirs []string
	for _, tp := range topics {
		dirs = append(dirs, filepath.Join(dir, tp))
	}
	out, err := exec.Command("node", append([]string{script, "--summary", pkg}, dirs...)...).Output()
	if err != nil {
		b.Fatalf("duckdb_check.mjs --summary: %v", err)
	}
	var res map[string]struct {
		CheckpointVersion int64
		Files             int
		Rows, IDs         int64
		Ordered           bool
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("duckdb output: %v", err)
	}
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := res[n]
		if r.Rows != r.IDs || !r.Ordered {
			b.Errorf("DuckDB reads %s: %d rows, %d distinct ids, files ordered %v", n, r.Rows, r.IDs, r.Ordered)
		}
		b.Logf("DuckDB replays %s from checkpoint %d: %d files, %d rows", filepath.Base(n), r.CheckpointVersion, r.Files, r.Rows)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
