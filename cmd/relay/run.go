package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/governance"
	"github.com/deltabus/deltabus/maintain"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/statuspage"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/check"
	"github.com/deltabus/deltabus/telemetry"
	"github.com/deltabus/deltabus/unitycatalog"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	fs, f := runFlags(env)
	if code, ok := parseFlags(fs, args, f.sf.resolve); !ok {
		return code
	}
	cfg := f.relayConfig()
	log, err := newLogger(env.stderr, f.sf.logFormat, f.sf.logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	mappings, err := outbox.ParseMappings(f.sf.mapping, nil)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("--mapping: %w", err))
	}
	mats, err := parseMaterialized(f.checkMats)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := f.auth.load(env); err != nil {
		return fail(env, exitUsage, err)
	}
	uc, ucTarget, err := ucFromEnv(env)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	shareCPU(f.schedBatch, log)
	tel, flush, err := startTelemetry(ctx, "deltabus-relay", true, cfg.WithDefaults().ShutdownTimeout, log)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer flush()
	r, store, err := daemon.New(ctx, cfg, daemon.Options{Log: log, Mappings: mappings, Meter: tel.Meter, Tracer: tel.Tracer,
		PII: f.sf.pii.config(), Contracts: f.co})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := describePersonal(f.sf.pii.schemas); err != nil { // the topics' personal columns, for governance and the page
		return fail(env, exitUsage, err)
	}
	if err := startMaintenance(ctx, r, store, f.every, f.mo, tel, log); err != nil {
		return fail(env, exitFailure, err)
	}
	full := cfg.WithDefaults()
	ucStatus, appID := startGovernance(ctx, r, store, uc, ucTarget, log)
	slotMon, err := startSlotMonitor(ctx, r, full, f.refresh, tel, log)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	page := statuspage.New(statuspage.Config{Store: store, AppID: appID, Slot: full.Slot, Version: Version, Ready: r.Ready,
		SlotMonitor: slotMon, UnityCatalog: ucStatus, Refresh: f.refresh, Log: log,
		Consumers: check.Config{CheckpointDSNs: f.checkDSNs, Materialized: mats, Thresholds: check.Thresholds{MaxDuplicateRate: -1}}})
	if f.metricsAddr != "" {
		stop, err := serveMetrics(f, r, page, tel, log)
		if err != nil {
			return fail(env, exitUsage, err)
		}
		defer stop()
	}
	if err := r.Run(ctx); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

// runOptions are what relay run's flags set.
type runOptions struct {
	sf                   sourceFlags
	cfg                  relay.Config
	co                   contract.Options
	metricsAddr          string
	mo                   maintain.Options
	every                time.Duration // --maintenance
	schedBatch           bool
	refresh              time.Duration // --status-refresh
	checkDSNs, checkMats stringList
	pprof                bool
	auth                 statusAuth // --status-token-file, --metrics-token
}

// runFlags registers relay run's flags; parsing fills the options.
func runFlags(env *cliEnv) (*flag.FlagSet, *runOptions) {
	fs := newFlagSet(env, "run", "[flags]")
	f := new(runOptions)
	f.sf.register(fs, env)
	d := relay.DefaultConfig()
	cfg := &f.cfg
	fs.IntVar(&cfg.BatchMaxEvents, "batch-max-events", d.BatchMaxEvents, "close a batch after this many events")
	fs.Int64Var(&cfg.BatchMaxBytes, "batch-max-bytes", d.BatchMaxBytes, "close a batch after this many payload bytes")
	fs.DurationVar(&cfg.BatchMaxDelay, "batch-max-delay", d.BatchMaxDelay, "hold a batch until its oldest event is this old, for fewer, larger commits (0: group commit, a batch closes as soon as the committer is free)")
	fs.BoolVar(&cfg.CommitOverlap, "commit-overlap", d.CommitOverlap, "write the next batch's data files while the previous batch's log entries are made durable (for stores whose requests do not share one disk; slower on local disk)")
	fs.BoolVar(&cfg.TransactionRecords, "transaction-records", true, "record each source transaction that published events in the store's _transactions table, after its events, and publish the source's resolved position (_deltabus/resolved/<appId>.json)")
	fs.DurationVar(&cfg.ResolvedInterval, "resolved-interval", time.Second, "publish the resolved position at most this often (one PUT each on S3)")
	fs.DurationVar(&cfg.RecordsInterval, "records-interval", relay.DefaultRecordsInterval, "commit the transaction records at most this often: the records of the batches committed meanwhile, and their acknowledgement, wait (each commit adds a file the relay keeps in memory until maintenance compacts it); negative = a records commit per batch")
	fs.IntVar(&cfg.TableParallelism, "table-parallelism", 0, "how many of a batch's tables are written at once, data files and then log entries; 0 = 16 on s3:// (each a round trip), 4 on local disk (its flushes serialise anyway)")
	fs.DurationVar(&cfg.TopicCommitInterval, "topic-commit-interval", 0, "shortest time between two commits of one topic: a busier topic's events wait and are committed together (each commit is 2 PUTs on S3), a topic quiet that long commits at once; 0 = 1s on s3://, none on local disk; negative (-1s) = none")
	fs.Int64Var(&cfg.StatePaceFiles, "state-pace-files", relay.DefaultStatePaceFiles, "pace the commits of a table whose state holds more files (active ones and tombstones, which the relay keeps in memory) than this: one second between commits per this many files beyond, at most 5s, so a topic busy for days cannot outgrow the relay's memory; negative = never")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "on SIGTERM, how long to wait for the last commit before giving up (what was not committed is read again on the next start)")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", time.Minute, "write a tiny logical message this often so the slot advances while this database is idle and others write (negative disables)")
	fs.DurationVar(&cfg.StreamTimeout, "stream-timeout", 0, "declare the replication connection dead, close it and reconnect when PostgreSQL sends nothing this long, not even a reply it was asked for (a partition, a lost NAT entry, a frozen server); 0 = the server's wal_sender_timeout (twice its keepalive interval), at least 10s, 60s when that is disabled")
	fs.Float64Var(&cfg.Breaker.Rate, "breaker-rate", relay.DefaultBreakerRate, "hold a topic instead of filling _dead_letter when more than this share of its rows in --breaker-window is refused (its contract, its mapping), once at least --breaker-min are; negative turns the breaker off; release with `relay deadletter release`")
	fs.IntVar(&cfg.Breaker.Min, "breaker-min", relay.DefaultBreakerMin, "refused rows of a topic in --breaker-window before its breaker may trip")
	fs.DurationVar(&cfg.Breaker.Window, "breaker-window", relay.DefaultBreakerWindow, "span of source commit time the breaker's rate is taken over")
	fs.BoolVar(&cfg.Standby, "standby", false, "wait while another process holds the slot, then take over (default: exit with an error)")
	fs.BoolFunc("failover-slot", failoverSlotUsage, func(v string) error { return setNoFailover(&cfg.NoFailoverSlot, v) })
	fs.Func("stop-at", "stop gracefully once everything the source wrote before this WAL position (e.g. SELECT pg_current_wal_lsn()) is received, committed and acknowledged, then exit 0, like pg_recvlogical --endpos (default: run until stopped)", func(v string) error {
		lsn, err := pglogrepl.ParseLSN(v)
		if err != nil || lsn == 0 {
			return fmt.Errorf("%q is not a WAL position: want the form 16/B374D848, as pg_current_wal_lsn() prints it", v)
		}
		cfg.StopAt = lsn
		return nil
	})
	fs.DurationVar(&f.co.Poll, "contracts-poll", contract.DefaultPoll, "list the store's event contracts this often for new versions and policies (one List request; an event naming a version not yet seen re-reads its type at once); negative: only then")
	fs.StringVar(&f.metricsAddr, "metrics-addr", envOr(env, "DELTABUS_METRICS_ADDR", "127.0.0.1:9464"), "serve /metrics, /healthz, /readyz, the operator's page (/) and /api/status here (empty disables); keep it on loopback or a private network")
	fs.DurationVar(&f.every, "maintenance", time.Hour, "compact, clean up the log and vacuum every topic this often while streaming (0 disables; `relay compact` and `relay vacuum` do it by hand)")
	fs.DurationVar(&f.mo.LogRetention, "maintenance-log-retention", 0, "override every table's delta.logRetentionDuration (default: the table's, 30 days)")
	fs.DurationVar(&f.mo.FileRetention, "maintenance-file-retention", 0, "override every table's delta.deletedFileRetentionDuration (default: the table's, 7 days)")
	fs.Int64Var(&f.mo.Compact.TargetFileBytes, "compact-target-file-bytes", 0, "size of the files compaction writes (default 128 MiB)")
	fs.BoolVar(&f.schedBatch, "sched-batch", true, "run the relay's threads under SCHED_BATCH (Linux): the same share of the CPU, but a wake-up never preempts the database's processes on a shared core; false keeps the default policy (a policy set by systemd or chrt is always kept)")
	fs.DurationVar(&f.refresh, "status-refresh", 5*time.Second, "how often the operator's page (/ on --metrics-addr) refreshes and the longest its data is reused; consumer checks are reused six times as long")
	fs.Var(&f.checkDSNs, "check-checkpoint", "for the operator's page: a PostgreSQL database holding consumer checkpoints (repeatable; as relay check consumers --checkpoint)")
	fs.Var(&f.checkMats, "check-materialized", "for the operator's page: GROUP:SCHEMA.TABLE:COLUMN[:FIELD], a group that materialises its topic (repeatable; as relay check consumers --materialized)")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve /debug/pprof/ on --metrics-addr (exposes internals: keep the address private)")
	f.auth.register(fs, env)
	return fs, f
}

// relayConfig is the relay's configuration: run's flags and the source's.
func (f *runOptions) relayConfig() relay.Config {
	cfg := f.cfg
	cfg.Source, cfg.Store, cfg.Slot, cfg.Publication = f.sf.source, f.sf.store, f.sf.slot, f.sf.publication
	return cfg
}

// shareCPU leaves the database its share of the CPU: the relay runs Go
// code on half the cores (relay.ShareCores) and, with --sched-batch, under
// SCHED_BATCH.
func shareCPU(schedBatch bool, log *slog.Logger) {
	relay.ShareCores() // the streaming log line and go_sched_gomaxprocs_threads show it
	if schedBatch {
		if err := relay.YieldOnWakeup(); err != nil {
			log.Warn("running under the default CPU scheduling policy: SCHED_BATCH is not available here; pass --sched-batch=false to silence this", "err", err)
		}
	}
}

// startMaintenance starts the loop that maintains every topic each every
// (--maintenance; 0 starts nothing) once the relay streams.
func startMaintenance(ctx context.Context, r *relay.Relay, store storage.Store, every time.Duration, mo maintain.Options, tel *telemetry.Telemetry, log *slog.Logger) error {
	if every <= 0 {
		return nil
	}
	mo.Logger, mo.Tracer = log, tel.Tracer
	mm, err := maintain.NewMetrics(tel.Meter)
	if err != nil {
		return err
	}
	go func() {
		select { // a standby maintains nothing until it streams
		case <-r.Started():
			maintain.Loop(ctx, store, every, mo, mm)
		case <-ctx.Done():
		}
	}()
	return nil
}

// startGovernance starts the governor once the relay streams and returns
// what the operator's page reads of it: Unity Catalog's status (nil
// until the governor runs) and the relay's appId (empty until the stream
// starts).
func startGovernance(ctx context.Context, r *relay.Relay, store storage.Store, uc *unitycatalog.Client, ucTarget unitycatalog.Target, log *slog.Logger) (ucStatus func() *governance.UCStatus, appID func() string) {
	govEvery := time.Minute // descriptions only: nothing is waiting
	if uc != nil {
		govEvery = 5 * time.Second // a new topic is registered within seconds
	}
	var gov atomic.Pointer[governance.Governor]
	var id atomic.Value // the relay's appId, read once its first session resolved it (Started)
	go func() {
		select { // a standby governs nothing until it streams (and knows its appId)
		case <-r.Started():
			id.Store(r.AppID())
			if !sleepCtx(ctx, startQuiet) {
				return
			}
			g := governance.New(governance.Config{Store: store, AppID: r.AppID(), Log: log, UC: uc, Target: ucTarget, Interval: govEvery})
			gov.Store(g)
			g.Run(ctx)
		case <-ctx.Done():
		}
	}()
	ucStatus = func() *governance.UCStatus {
		if g := gov.Load(); g != nil {
			return g.UnityCatalog()
		}
		return nil
	}
	appID = func() string { s, _ := id.Load().(string); return s }
	return ucStatus, appID
}

// startSlotMonitor starts the page's readings of the slot: once the relay
// streams, or after 5 s for a standby (its page shows the holder).
func startSlotMonitor(ctx context.Context, r *relay.Relay, full relay.Config, refresh time.Duration, tel *telemetry.Telemetry, log *slog.Logger) (*statuspage.SlotMonitor, error) {
	slotMon, err := statuspage.NewSlotMonitor(full.Source, full.Slot, refresh, tel.Meter, log)
	if err != nil {
		return nil, err
	}
	go func() {
		select { // the first reading waits for the start (a standby's page shows the holder)
		case <-r.Started():
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return
		}
		if sleepCtx(ctx, startQuiet) {
			slotMon.Run(ctx)
		}
	}()
	return slotMon, nil
}

// serveMetrics serves /metrics, the health checks, the operator's page and
// (--pprof) /debug/pprof/ on --metrics-addr; stop closes the server.
func serveMetrics(f *runOptions, r *relay.Relay, page *statuspage.Collector, tel *telemetry.Telemetry, log *slog.Logger) (stop func(), err error) {
	addr, stop, err := daemon.Serve(daemon.HTTPOptions{Addr: f.metricsAddr, Gatherer: tel.Gatherer, Ready: r.Ready, Pprof: f.pprof, Log: log, Page: page.Handler(),
		Token: f.auth.token, MetricsToken: f.auth.metrics})
	if err != nil {
		return nil, err
	}
	log.Info("metrics", "addr", addr, "pprof", f.pprof, "status_token", f.auth.token != "", "metrics_token", f.auth.metrics)
	return stop, nil
}

// startQuiet is how long after the stream starts the page's slot readings
// and governance begin: the relay's own connections, preflight and first
// commit come first (a start is timed against pg_recvlogical's).
const startQuiet = time.Second

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
