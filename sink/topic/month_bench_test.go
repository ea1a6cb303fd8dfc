package topic

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// monthTable is a topic table that lived through a simulated month.
type monthTable struct {
	store                  storage.Store
	Commits, Compactions   int
	Build                  time.Duration
	LogBefore, LogAfter    int // _delta_log entries before and after the clean-up
	Vacuumed, Files, Tombs int
	Latest                 int64
	OpenTable              time.Duration // OpenTable (the writer's load, every tombstone)
}

// buildMonth runs a relay handle through n commits of one event each (a
// ~210-byte payload), with a simulated clock spanning 30 days (it ends at
// the real now), compacting every simulated hour and, every simulated day,
// cleaning the log up and vacuuming, as the relay's schedule would. Log clean-up and VACUUM judge
// by file modification times, which are real, so they run with an
// accelerated retention (everything before the newest checkpoint, and
// every file no longer referenced). The build uses a checkpoint interval
// of n/100 (each checkpoint holds a simulated week of tombstones; at
// interval 100 the build alone would take hours), then goes back to the
// topic default of 100, commits up to the version before the next
// checkpoint and compacts, so the table ends compacted, at a checkpoint.
func buildMonth(b *testing.B, dir string, n int) *monthTable {
	ctx := context.Background()
	local, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	start, step := time.Now().Add(-30*24*time.Hour), 30*24*time.Hour/time.Duration(n)
	sim := start
	clock := func() time.Time { return sim }
	st := storage.Sub(local, "orders")
	md, proto := NewTableMetadata("orders")
	md.Configuration[delta.PropCheckpointInterval] = strconv.Itoa(max(100, n/100))
	if err := delta.CreateTable(ctx, st, md, proto, nil); err != nil {
		b.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{Now: clock})
	if err != nil {
		b.Fatal(err)
	}
	m := &monthTable{store: st}
	began := time.Now()
	hourly, daily := max(1, n/720), max(1, n/30)
	g := newGen()
	commit := func(i int) {
		sim = start.Add(time.Duration(i) * step)
		ev := *g.next(i)
		ev.CommitLSN, ev.Seq = int64(0x1000+i*0x100), 0
		if err := relayCommit(b, st, tbl, FileOptions{}, []outbox.Event{ev}); err != nil {
			b.Fatal(err)
		}
		m.Commits++
	}
	compact := func() {
		if _, err := Compact(ctx, st, CompactOptions{Now: clock}); err != nil {
			b.Fatal(err)
		}
		m.Compactions++
	}
	for i := range n {
		commit(i)
		if (i+1)%hourly == 0 {
			compact()
		}
		if (i+1)%daily == 0 {
			m.Vacuumed += maintain(b, st, time.Now(), time.Nanosecond)
		}
	}
	if _, err := delta.SetProperties(ctx, tbl, map[string]string{delta.PropCheckpointInterval: "100"}); err != nil {
		b.Fatal(err)
	}
	i := n
	for ; tbl.Version()%100 != 99; i++ {
		commit(i)
	}
	compact()
	for ; latestVersion(b, st)%100 != 0; i++ {
		commit(i) // the compaction found nothing to do: reach the checkpoint
	}
	tbl.Wait()
	m.LogBefore = countKeys(b, st, delta.LogDir)
	m.Vacuumed += maintain(b, st, time.Now(), time.Nanosecond)
	m.Build = time.Since(began)
	m.LogAfter, m.Latest = countKeys(b, st, delta.LogDir), latestVersion(b, st)
	t0 := time.Now()
	w, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		b.Fatal(err)
	}
	m.OpenTable = time.Since(t0)
	m.Files, m.Tombs = w.NumFiles(), w.NumTombstones()
	return m
}

// keptMonth returns the month of n commits kept in
// DELTABUS_BENCH_MONTH_KEEP, building it there first if it is not; nil
// when the variable is unset.
func keptMonth(b *testing.B, n int) *monthTable {
	keep := os.Getenv("DELTABUS_BENCH_MONTH_KEEP")
	if keep == "" {
		return nil
	}
	dir := filepath.Join(keep, fmt.Sprintf("month-%d", n))
	stats := dir + ".json"
	m := new(monthTable)
	if data, err := os.ReadFile(stats); err == nil {
		if err := json.Unmarshal(data, m); err != nil {
			b.Fatalf("%s: %v", stats, err)
		}
	} else {
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		m = buildMonth(b, dir, n)
		data, _ := json.Marshal(m)
		if err := os.WriteFile(stats, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	local, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	m.store = storage.Sub(local, "orders")
	return m
}

// maintain cleans the log up and vacuums the table as of now with the
// given retention, and returns how many data files it deleted.
func maintain(b *testing.B, st storage.Store, now time.Time, retention time.Duration) int {
	ctx := context.Background()
	if _, err := delta.CleanupLog(ctx, st, delta.CleanupOptions{Now: now, Retention: retention}); err != nil {
		b.Fatal(err)
	}
	vac, err := delta.Vacuum(ctx, st, delta.VacuumOptions{Now: now, Retention: retention})
	if err != nil {
		b.Fatal(err)
	}
	return len(vac.Deleted)
}

func latestVersion(b *testing.B, st storage.Store) int64 {
	snap, err := delta.LoadSnapshot(context.Background(), st, -1)
	if err != nil {
		b.Fatal(err)
	}
	return snap.Version
}

func countKeys(b *testing.B, st storage.Store, prefix string) int {
	objs, err := st.List(context.Background(), prefix, "")
	if err != nil {
		b.Fatal(err)
	}
	return len(objs)
}

// twentyVersions is the reference: a topic table of 20 relay commits.
func twentyVersions(b *testing.B, dir string) storage.Store {
	local, err := storage.NewLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	st, tbl := openTopic(b, local, "small")
	for i := range 20 {
		if err := relayCommit(b, st, tbl, FileOptions{}, testEvents(1, 1, int64(0x1000+i*0x100))); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// The month is built once per test binary (a benchmark function runs again
// for each b.N); TestMain removes its directories.
var (
	monthCache *monthTable
	smallCache storage.Store
	monthDirs  []string
)

// BenchmarkMonthInMinutes builds a topic table of
// DELTABUS_BENCH_MONTH_COMMITS commits (default 2,000; the issue asks for
// 1,000,000) in a simulated month with hourly compaction, cleans its log
// and vacuums it, then compares its snapshot load (LoadSnapshot, the
// readers' load) with a 20-version table's, loads interleaved in one run.
// Set DELTABUS_BENCH_DIR to build on tmpfs (e.g. /dev/shm), and
// DELTABUS_BENCH_MONTH_KEEP to a directory to keep the built month there
// and reuse it in later runs (a million commits take most of an hour).
func BenchmarkMonthInMinutes(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("DELTABUS_BENCH_MONTH_COMMITS")); err == nil && v > 0 {
		n = v
	}
	if monthCache == nil || monthCache.Commits < n {
		dir, err := os.MkdirTemp(os.Getenv("DELTABUS_BENCH_DIR"), "deltabus-month-")
		if err != nil {
			b.Fatal(err)
		}
		monthDirs = append(monthDirs, dir)
		monthCache, smallCache = keptMonth(b, n), twentyVersions(b, dir)
		if monthCache == nil {
			monthCache = buildMonth(b, dir, n)
		}
	}
	month, small := monthCache, smallCache
	ctx := context.Background()
	var tMonth, tSmall time.Duration
	load := func(st storage.Store) time.Duration {
		t0 := time.Now()
		if _, err := delta.LoadSnapshot(ctx, st, -1); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	for range b.N {
		tMonth += load(month.store)
		tSmall += load(small)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(tMonth), "month-load-ms")
	b.ReportMetric(ms(tSmall), "20v-load-ms")
	b.ReportMetric(float64(tMonth)/float64(tSmall), "ratio")
	b.ReportMetric(float64(month.Commits), "commits")
	b.ReportMetric(float64(month.Latest), "version")
	b.ReportMetric(month.Build.Seconds(), "build-s")
	b.ReportMetric(float64(month.LogBefore), "log-files-before")
	b.ReportMetric(float64(month.LogAfter), "log-files-after")
	b.ReportMetric(float64(month.Files), "active-files")
	b.ReportMetric(float64(month.Tombs), "tombstones")
	b.ReportMetric(float64(month.Vacuumed), "vacuumed-files")
	b.ReportMetric(float64(month.OpenTable.Microseconds())/1000, "writer-open-ms")
}
