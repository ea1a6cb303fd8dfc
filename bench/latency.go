package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/bench/visible"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

// bigTransaction: one source transaction of o.big rows must stream through
// parquet files with bounded memory and land as one commit per topic.
func (b *bench) bigTransaction(ctx context.Context) error {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	store := b.storeDir("big")
	defer os.RemoveAll(store)
	if err := b.createRelaySlot(ctx, dsn, store, "deltabus"); err != nil {
		return err
	}
	t0 := time.Now()
	if err := execSQL(ctx, dsn, insertRowsSQL, 0, b.o.Big-1); err != nil {
		return err
	}
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# big_tx: one transaction of %d rows loaded in %.1fs\n", b.o.Big, time.Since(t0).Seconds())
	d, err := b.relayDrain(ctx, dsn, store, "deltabus", end)
	if err != nil {
		return err
	}
	b.res.BigTx = &BigTxResult{Rows: b.o.Big, RowsPerSec: float64(b.o.Big) / d.secs, PeakRSS: d.rss}
	fmt.Fprintf(b.out, "big_tx_rows_per_s relay=%.0fev/s reference=- ratio=-\n", float64(b.o.Big)/d.secs)
	fmt.Fprintf(b.out, "big_tx_peak_rss relay=%.0fMiB reference=200MiB ratio=%.2f\n", d.rss, d.rss/200)
	return nil
}

// latency: steady single-row transactions at o.rate/s for o.latencyFor with
// the relay running; an event's latency is the moment its Delta commit
// became visible (commitLatenciesBy) minus its source commit time.
func (b *bench) latency(ctx context.Context) error {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	dir := b.storeDir("latency")
	defer os.RemoveAll(dir)
	if b.o.LatencyStore != "" {
		dir = b.o.LatencyStore // e.g. s3://bucket/prefix, with DELTABUS_S3_* and AWS_* in the environment
	}
	if b.o.LatencyGroup {
		if err := writeBenchGroup(ctx, dir); err != nil {
			return err
		}
	}
	var vis *visible.Watcher
	switch {
	case !strings.Contains(dir, "://"):
		dir = "file://" + dir
		vis = b.watchStores([]string{dir})[0]
	case b.o.LatencyWatch != "":
		// The S3 server's own disk: an object appears there when its PUT
		// took effect, which the server then answers.
		if err := os.MkdirAll(b.o.LatencyWatch, 0o755); err != nil {
			return fmt.Errorf("--latency-watch: %w", err)
		}
		vis = b.watchStores([]string{"file://" + b.o.LatencyWatch})[0]
	}
	defer stopWatches([]*visible.Watcher{vis})
	run, err := b.latencyRun(ctx, dsn, dir)
	if err != nil {
		return err
	}
	b.endWatches([]*visible.Watcher{vis})
	store, err := storage.Open(ctx, dir, storage.S3Options{})
	if err != nil {
		return err
	}
	lat, unseen, err := commitLatencies(ctx, store, vis)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# latency: %d single-row transactions at %.0f/s (target %d/s) for %v, %d events measured, store %s\n",
		run.n, run.achieved, b.o.Rate, b.o.LatencyFor, len(lat), store)
	if vis != nil {
		fmt.Fprintf(b.out, "# commits timed when their log entry got its name (inotify); %d not seen, timed by their ctime\n", unseen)
	} else if strings.HasPrefix(dir, "s3://") {
		fmt.Fprintf(b.out, "# commits timed by their commitInfo timestamp, taken before the PUT (--latency-watch times them on the server's disk)\n")
	}
	if len(lat) != run.n {
		return fmt.Errorf("latency: the store holds %d events after version 0, the outbox %d rows", len(lat), run.n)
	}
	name := b.o.LatencyName
	if name == "" {
		name = "latency"
	}
	res := latencyResult(name, store.String(), b.o.Rate, run.achieved, b.o.LatencyFor, lat)
	res.Stages = run.stages
	b.debugLatency(lat)
	fmt.Fprintln(b.out, formatStages(run.stages))
	return b.latencyReport(ctx, name, dir, lat, res)
}

// latencyRun is the latency run's relay and load: the relay streams dsn
// into dir while the producers commit.
type latencyRun struct {
	n        int // transactions the outbox holds
	achieved float64
	stages   []StageTime
}

func (b *bench) latencyRun(ctx context.Context, dsn, dir string) (latencyRun, error) {
	// The relay's metrics, for where its batches' time went.
	metrics, extra := os.Getenv("DELTABUS_BENCH_METRICS"), []string(nil)
	if metrics == "" {
		port, err := pgcluster.FreePort()
		if err != nil {
			return latencyRun{}, err
		}
		metrics = fmt.Sprintf("127.0.0.1:%d", port)
		extra = []string{"--metrics-addr", metrics}
	}
	p, err := b.startRelay(dsn, dir, "deltabus", nil, extra...)
	if err != nil {
		return latencyRun{}, err
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	// Steady state: the first start is done, and a second to settle.
	if err := waitFirstStart(ctx, dsn, dir, "deltabus"); err != nil {
		return latencyRun{}, err
	}
	time.Sleep(time.Second)
	t0 := time.Now()
	if err := b.latencyLoad(ctx, dsn, b.latencyEvents()); err != nil {
		return latencyRun{}, err
	}
	// Producers that fall behind stop at the deadline (a loaded machine):
	// what they wrote is what the outbox holds.
	n, err := outboxRows(ctx, dsn)
	if err != nil {
		return latencyRun{}, err
	}
	run := latencyRun{n: n, achieved: float64(n) / time.Since(t0).Seconds()}
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return run, err
	}
	if err := b.waitConfirmed(ctx, dsn, end); err != nil {
		return run, err
	}
	if run.stages, err = scrapeStages(ctx, metrics); err != nil {
		return run, err
	}
	_ = p.Process.Signal(syscall.SIGTERM)
	_ = p.Wait()
	return run, nil
}

// debugLatency prints, for DELTABUS_BENCH_DEBUG, more percentiles and the
// slowest commits.
func (b *bench) debugLatency(lat []time.Duration) {
	if os.Getenv("DELTABUS_BENCH_DEBUG") == "" {
		return
	}
	fmt.Fprintf(b.out, "# p90=%v p95=%v p99.9=%v max=%v\n", verify.Percentile(lat, 90), verify.Percentile(lat, 95), verify.Percentile(lat, 99.9), verify.Percentile(lat, 100))
	for _, w := range worstVersions {
		fmt.Fprintf(b.out, "# slow: %s\n", w)
	}
}

// latencyReport prints the latency lines beside the run's same-run
// counterparts, the disk floor and pg_recvlogical's delivery, and records
// res.
func (b *bench) latencyReport(ctx context.Context, name, dir string, lat []time.Duration, res LatencyResult) error {
	p50, p99 := verify.Percentile(lat, 50), verify.Percentile(lat, 99)
	// The disk's own floor, in the same run: on local disk in the store's
	// file system, on S3 in the temporary folder (the S3 server's disk
	// here).
	floorDir := os.TempDir()
	if strings.HasPrefix(dir, "file://") {
		floorDir = strings.TrimPrefix(dir, "file://")
	}
	disk, err := diskFloor(floorDir)
	if err != nil {
		return fmt.Errorf("disk floor: %w", err)
	}
	res.Disk = &disk
	fmt.Fprintf(b.out, "# disk floor: fsync p50 %.2fms p99 %.2fms; create+write 20 KB+fsync+link+dir fsync p50 %.2fms p99 %.2fms (%d each); %d of those at once, each in a folder of its own (a batch's data files, or its log entries, in %d tables) p50 %.2fms p99 %.2fms\n",
		disk.FsyncP50Ms, disk.FsyncP99Ms, disk.PutP50Ms, disk.PutP99Ms, diskRounds, disk.BatchPuts, disk.BatchPuts, disk.BatchP50Ms, disk.BatchP99Ms)
	if b.o.LatencyFloor {
		ref, err := b.recvlogicalLatency(ctx)
		if err != nil {
			return fmt.Errorf("latency floor: %w", err)
		}
		f := deliveryFloor(ref)
		res.Delivery = &f
		fmt.Fprintf(b.out, "# pg_recvlogical on the same load, in turn (test_decoding to a pipe, nothing written): %d transactions, delivery p50 %.1fms p99 %.1fms\n", f.Events, f.P50Ms, f.P99Ms)
		fmt.Fprintf(b.out, "%s_p50_delivery relay=%.1fms reference=%.1fms(pg_recvlogical) ratio=%.2f\n", name, ms(p50), f.P50Ms, ms(p50)/f.P50Ms)
		fmt.Fprintf(b.out, "%s_p99_delivery relay=%.1fms reference=%.1fms(pg_recvlogical) ratio=%.2f\n", name, ms(p99), f.P99Ms, ms(p99)/f.P99Ms)
	}
	b.res.Latency = append(b.res.Latency, res)
	// The reference of a latency line is its goal at 2,000 tx/s (local
	// disk: p50 10 ms, p99 40 ms; S3 unpaced: p99 100 ms); its same-run
	// counterparts are the disk floor and pg_recvlogical's delivery above.
	p50Goal, p99Goal := 10*time.Millisecond, 40*time.Millisecond
	if strings.HasPrefix(dir, "s3://") {
		p50Goal, p99Goal = 0, 100*time.Millisecond // the goal names no p50 on S3
	}
	if p50Goal > 0 {
		fmt.Fprintf(b.out, "%s_p50 relay=%.1fms reference=%dms(goal) ratio=%.2f\n", name, ms(p50), p50Goal.Milliseconds(), float64(p50)/float64(p50Goal))
	} else {
		fmt.Fprintf(b.out, "%s_p50 relay=%.1fms reference=- ratio=-\n", name, ms(p50))
	}
	fmt.Fprintf(b.out, "%s_p99 relay=%.1fms reference=%dms(goal) ratio=%.2f\n", name, ms(p99), p99Goal.Milliseconds(), float64(p99)/float64(p99Goal))
	return nil
}

// latencyEvents is how many transactions the latency load commits.
func (b *bench) latencyEvents() int { return int(float64(b.o.Rate) * b.o.LatencyFor.Seconds()) }

// latencyLoad commits the latency run's load on dsn: n single-row
// transactions at o.Rate a second from eight producers, which stop at
// o.LatencyFor plus 5 s if they fall behind. They commit durably
// (synchronous_commit=on, the PostgreSQL default): with it off, the WAL
// writer flushes only every wal_writer_delay and the walsender cannot send
// a commit before that.
func (b *bench) latencyLoad(ctx context.Context, dsn string, n int) error {
	durable := dsn + "&options=-c%20synchronous_commit%3Don"
	return loadSingle(ctx, durable, n, 8, b.o.Rate, b.o.LatencyFor+5*time.Second)
}

func (b *bench) waitConfirmed(ctx context.Context, dsn, end string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = 'deltabus'`, end).Scan(&ok)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("relay did not confirm %s within 5 minutes", end)
}

// worstVersions lists slow commits for DELTABUS_BENCH_DEBUG.
var worstVersions []string

// commitLatencies returns, per event of every topic, the time its commit
// became visible minus its source commit time, and how many commits the
// watch did not see (commitLatenciesBy).
func commitLatencies(ctx context.Context, root storage.Store, vis *visible.Watcher) ([]time.Duration, int, error) {
	var out []time.Duration
	unseen, err := commitLatenciesBy(ctx, root, vis, func(_ string, d time.Duration) { out = append(out, d) })
	return out, unseen, err
}

// writeBenchGroup makes every topic of the store at dir one group's.
func writeBenchGroup(ctx context.Context, dir string) error {
	if !strings.Contains(dir, "://") {
		dir = "file://" + dir
	}
	store, err := storage.Open(ctx, dir, storage.S3Options{})
	if err != nil {
		return err
	}
	return catalog.WriteGroup(ctx, store, catalog.Group{Name: "bench", Topics: []string{"*"}, Created: time.Now().UTC()})
}

// commitLatenciesBy calls fn with each event's source (its appId) and
// latency, for every table of root: from its source commit to the moment
// its commit file got its name, as vis saw it (a local store watched from
// before the run, or the S3 server's own folder of the store: --latency-
// watch). It returns how many commits vis did not see, timed by their
// file's ctime instead. Without vis: the file's mtime on disk; on S3, whose
// listings give whole seconds, the commitInfo timestamp, taken just before
// the conditional PUT (on versitygw the commit became visible 3-4 ms later
// at the p50, 11-13 ms at the p99).
func commitLatenciesBy(ctx context.Context, root storage.Store, vis *visible.Watcher, fn func(source string, d time.Duration)) (int, error) {
	names, err := catalog.ListTables(ctx, root)
	if err != nil {
		return 0, err
	}
	unseen := 0
	for _, name := range names {
		st := storage.Sub(root, name)
		objs, err := st.List(ctx, delta.LogDir, "")
		if err != nil {
			return 0, err
		}
		listed := map[string]time.Time{}
		for _, o := range objs {
			listed[o.Key] = o.ModTime
		}
		err = delta.ReadChanges(ctx, st, 1, -1, func(cf delta.ChangeFile) error {
			key := delta.CommitKey(cf.Version)
			at, ok := listed[key]
			switch {
			case !ok:
				return fmt.Errorf("topic %q: no commit file for version %d", name, cf.Version)
			case vis != nil:
				t, seen, err := vis.At(name, key)
				if err != nil {
					return fmt.Errorf("topic %q: %w", name, err)
				}
				if !seen {
					unseen++
				}
				at = t
			case at.Nanosecond() == 0:
				at = cf.Timestamp
			}
			return eventLatencies(ctx, st, name, cf, at, fn)
		})
		if err != nil {
			return 0, err
		}
	}
	return unseen, nil
}

// eventLatencies calls fn with the latency of each event of cf, visible
// at at; DELTABUS_BENCH_DEBUG lists commits slower than 300 ms.
func eventLatencies(ctx context.Context, st storage.Store, name string, cf delta.ChangeFile, at time.Time, fn func(source string, d time.Duration)) error {
	var worst time.Duration
	err := topic.ReadEvents(ctx, st, delta.Add{Path: cf.Path}, func(e outbox.Event) error {
		fn(e.Source, at.Sub(e.CommitTime))
		worst = max(worst, at.Sub(e.CommitTime))
		return nil
	})
	if worst > 300*time.Millisecond {
		worstVersions = append(worstVersions, fmt.Sprintf("%s v%d %v at %s", name, cf.Version, worst, at.Format("15:04:05.000")))
	}
	return err
}

// watchStores watches each local store of urls (file://) from now on
// (visible.Watch). An S3 store's entry is nil, and so is a local one's
// that cannot be watched (no inotify here, or too many watches): the run
// says so, and its commits are timed by their file's mtime.
func (b *bench) watchStores(urls []string) []*visible.Watcher {
	vis := make([]*visible.Watcher, len(urls))
	for i, u := range urls {
		dir, local := strings.CutPrefix(u, "file://")
		if !local {
			continue
		}
		v, err := visible.Watch(dir)
		if err != nil {
			fmt.Fprintf(b.out, "# cannot watch %s (%v): its commits are timed by their file's mtime, 4-6 ms early\n", dir, err)
			continue
		}
		vis[i] = v
	}
	return vis
}

// endWatches ends every watch of vis. A watch that failed or lost events
// (the kernel's queue overflowed) is reported: the commits it did not see
// are timed by their ctime and counted (commitLatenciesBy).
func (b *bench) endWatches(vis []*visible.Watcher) {
	for _, v := range vis {
		if v == nil {
			continue
		}
		if err := v.End(); err != nil {
			fmt.Fprintf(b.out, "# watching the commits appear: %v\n", err)
		}
	}
}

// stopWatches ends every watch of vis, for a run that ended early.
func stopWatches(vis []*visible.Watcher) {
	for _, v := range vis {
		if v != nil {
			_ = v.End()
		}
	}
}

// outboxRows counts the rows producers wrote.
func outboxRows(ctx context.Context, dsn string) (int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM outbox").Scan(&n)
	return n, err
}
