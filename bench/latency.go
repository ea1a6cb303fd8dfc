package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

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
// the relay running; latency = time the Delta commit file appeared (its
// mtime) minus the source commit time, per event.
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
	// The relay's metrics, for where its batches' time went.
	metrics, extra := os.Getenv("DELTABUS_BENCH_METRICS"), []string(nil)
	if metrics == "" {
		port, err := pgcluster.FreePort()
		if err != nil {
			return err
		}
		metrics = fmt.Sprintf("127.0.0.1:%d", port)
		extra = []string{"--metrics-addr", metrics}
	}
	p, err := b.startRelay(dsn, dir, "deltabus", nil, extra...)
	if err != nil {
		return err
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	// Steady state: the first start is done, and a second to settle.
	if err := waitFirstStart(ctx, dsn, dir, "deltabus"); err != nil {
		return err
	}
	time.Sleep(time.Second)
	n := b.latencyEvents()
	t0 := time.Now()
	if err := b.latencyLoad(ctx, dsn, n); err != nil {
		return err
	}
	// Producers that fall behind stop at the deadline (a loaded machine):
	// what they wrote is what the outbox holds.
	if n, err = outboxRows(ctx, dsn); err != nil {
		return err
	}
	achieved := float64(n) / time.Since(t0).Seconds()
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return err
	}
	if err := b.waitConfirmed(ctx, dsn, end); err != nil {
		return err
	}
	stages, err := scrapeStages(ctx, metrics)
	if err != nil {
		return err
	}
	_ = p.Process.Signal(syscall.SIGTERM)
	_ = p.Wait()
	if !strings.Contains(dir, "://") {
		dir = "file://" + dir
	}
	store, err := storage.Open(ctx, dir, storage.S3Options{})
	if err != nil {
		return err
	}
	lat, err := commitLatencies(ctx, store)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# latency: %d single-row transactions at %.0f/s (target %d/s) for %v, %d events measured, store %s\n",
		n, achieved, b.o.Rate, b.o.LatencyFor, len(lat), store)
	if len(lat) != n {
		return fmt.Errorf("latency: the store holds %d events after version 0, the outbox %d rows", len(lat), n)
	}
	p50, p99 := verify.Percentile(lat, 50), verify.Percentile(lat, 99)
	if os.Getenv("DELTABUS_BENCH_DEBUG") != "" {
		fmt.Fprintf(b.out, "# p90=%v p95=%v p99.9=%v max=%v\n", verify.Percentile(lat, 90), verify.Percentile(lat, 95), verify.Percentile(lat, 99.9), verify.Percentile(lat, 100))
		for _, w := range worstVersions {
			fmt.Fprintf(b.out, "# slow: %s\n", w)
		}
	}
	name := b.o.LatencyName
	if name == "" {
		name = "latency"
	}
	res := latencyResult(name, store.String(), b.o.Rate, achieved, b.o.LatencyFor, lat)
	res.Stages = stages
	fmt.Fprintln(b.out, formatStages(stages))
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
	fmt.Fprintf(b.out, "# disk floor: fsync p50 %.2fms p99 %.2fms; create+write 20 KB+fsync+link+dir fsync p50 %.2fms p99 %.2fms (%d each)\n",
		disk.FsyncP50Ms, disk.FsyncP99Ms, disk.PutP50Ms, disk.PutP99Ms, diskRounds)
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

// commitLatencies returns, per event of every topic, commit file mtime minus
// source commit time.
func commitLatencies(ctx context.Context, root storage.Store) ([]time.Duration, error) {
	var out []time.Duration
	err := commitLatenciesBy(ctx, root, func(_ string, d time.Duration) { out = append(out, d) })
	return out, err
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
// latency, for every table of root.
func commitLatenciesBy(ctx context.Context, root storage.Store, fn func(source string, d time.Duration)) error {
	names, err := catalog.ListTables(ctx, root)
	if err != nil {
		return err
	}
	for _, name := range names {
		st := storage.Sub(root, name)
		objs, err := st.List(ctx, delta.LogDir, "")
		if err != nil {
			return err
		}
		visible := map[string]time.Time{}
		for _, o := range objs {
			visible[o.Key] = o.ModTime
		}
		err = delta.ReadChanges(ctx, st, 1, -1, func(cf delta.ChangeFile) error {
			at, ok := visible[delta.CommitKey(cf.Version)]
			if !ok {
				return fmt.Errorf("topic %q: no commit file for version %d", name, cf.Version)
			}
			if at.Nanosecond() == 0 {
				// S3 listings give LastModified in whole seconds: use the
				// commitInfo timestamp, taken just before the conditional PUT
				// (it understates by one PUT, ~15 ms at p50 on versitygw).
				at = cf.Timestamp
			}
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
		})
		if err != nil {
			return err
		}
	}
	return nil
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
