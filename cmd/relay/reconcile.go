package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/reconcile"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/telemetry"
	"github.com/deltabus/deltabus/usererr"
)

const reconcileHelp = `[--from T --to T | --last 24h] [--window 1h] [--topic T ...] [--json] [flags]

Compares, per topic and closed window of occurred_at, the outbox rows of the
source with the events of the Delta topic tables (a grouped topic's rows of
its group's table), and lists the exact ids missing from the log, in the log
but not in the source, and duplicated in it. A window is closed when window
end + --lateness is before the check time and the relay's slot has confirmed
the WAL position sampled at that time; other windows are listed as skipped.
Results are appended to the _reconciliation Delta table under the store root
(unless --no-record).

Exit codes: 0 clean, 1 divergence found or a referenced data file unreadable,
2 could not run, 3 nothing checked (every window open, beyond retention, or
without events).

Schedule it beside the relay, e.g. hourly with cron (the DSN without its
password in DELTABUS_SOURCE, the password in ~/.pgpass or PGPASSFILE):
  5 * * * * relay reconcile --store s3://bucket/topics --last 3h --json >> /var/log/deltabus-reconcile.json
or as a Kubernetes CronJob (schedule "5 * * * *", args [reconcile, --last, 3h, --json]),
or in-process: relay reconcile --every 1h --metrics-addr 127.0.0.1:9465

With --repair, every event a closed window misses is published into its
topic from its outbox row, exactly once (safe beside the running relay and
another repair), then the windows are checked again: the exit code is the
second check's. Each repair is recorded (its run, and one _republished row
per event) and the _reconciliation rows of the first check say how many of
their missing events it published. Scheduled: relay reconcile --every 1h --repair`

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

type reconcileFlags struct {
	sf               sourceFlags
	from, to         string
	topics, tables   stringList
	asJSON, noRecord bool
	every            time.Duration
	metricsAddr      string
	sample           int
	repair, dryRun   bool
	actor            string
	rt               *republishEnv // with --repair
	opts             reconcile.Options
}

func (f *reconcileFlags) register(fs *flag.FlagSet, env *cliEnv) {
	f.sf.register(fs, env)
	o := &f.opts
	fs.StringVar(&f.from, "from", "", "start of the range (RFC 3339), with --to")
	fs.StringVar(&f.to, "to", "", "end of the range (RFC 3339, exclusive), with --from")
	fs.DurationVar(&o.Last, "last", reconcile.DefaultLast, "check the last D, ending at the current time truncated to --window")
	fs.DurationVar(&o.Window, "window", reconcile.DefaultWindow, "window size")
	fs.Var(&f.topics, "topic", "topic to check (repeatable; default every topic)")
	fs.Var(&f.tables, "table", "outbox table schema.table (repeatable; default the publication's tables)")
	fs.DurationVar(&o.Lateness, "lateness", reconcile.DefaultLateness, "how long after occurred_at a row may still commit")
	fs.DurationVar(&o.Retention, "retention", reconcile.DefaultRetention, "the janitor's --retention: older rows may be gone from the source")
	fs.DurationVar(&o.DurableWait, "wait", reconcile.DefaultDurableWait, "how long to wait for the slot to confirm the sampled WAL position")
	fs.Int64Var(&o.LeafRows, "leaf-rows", reconcile.DefaultLeafRows, "bisect differing windows until a range holds at most this many rows, then diff ids")
	fs.BoolVar(&o.VerifyIDs, "verify-ids", false, "diff every window id by id (catches a missing and a duplicated event that cancel out in counts)")
	fs.IntVar(&o.MaxIDs, "max-ids", reconcile.DefaultMaxIDs, "list at most this many ids per kind and window (counts stay exact)")
	fs.IntVar(&f.sample, "sample", reconcile.DefaultSampleIDs, "ids shown per kind in the table output")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&f.noRecord, "no-record", false, "do not append the results to the _reconciliation table")
	fs.DurationVar(&f.every, "every", 0, "run again every D until stopped (0 = once)")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "with --every, serve /metrics here (last result per topic)")
	fs.BoolVar(&f.repair, "repair", false, "publish every missing event from its outbox row (exactly once), then check again")
	fs.BoolVar(&f.dryRun, "dry-run", false, "with --repair: find and judge the missing events, publish nothing")
	fs.StringVar(&f.actor, "actor", "", "with --repair: who runs it, for the repair's record (default: the OS user)")
}

// options completes Options from the parsed flags.
func (f *reconcileFlags) options() (reconcile.Options, error) {
	o := f.opts
	o.Slot, o.Publication, o.Topics, o.AppID = f.sf.slot, f.sf.publication, f.topics, f.sf.appID
	var err error
	if f.from != "" || f.to != "" {
		if o.From, err = time.Parse(time.RFC3339Nano, f.from); err != nil {
			return o, fmt.Errorf("--from %q: want RFC 3339, e.g. 2026-01-02T15:00:00Z", f.from)
		}
		if o.To, err = time.Parse(time.RFC3339Nano, f.to); err != nil {
			return o, fmt.Errorf("--to %q: want RFC 3339, e.g. 2026-01-02T15:00:00Z", f.to)
		}
	}
	if o.Lateness <= 0 {
		return o, fmt.Errorf("--lateness %s must be positive: it is how long after its occurred_at a row may still commit (1ms allows almost none)", o.Lateness)
	}
	if o.Tables, err = parseTables(f.tables); err != nil {
		return o, err
	}
	if o.Mappings, err = outbox.ParseMappings(f.sf.mapping, nil); err != nil {
		return o, fmt.Errorf("--mapping: %w", err)
	}
	return o, o.WithDefaults().Validate()
}

func parseTables(list []string) ([]reconcile.Table, error) {
	var out []reconcile.Table
	for _, s := range list {
		schema, name, ok := strings.Cut(s, ".")
		if !ok || schema == "" || name == "" {
			return nil, fmt.Errorf("--table %q: want schema.table", s)
		}
		out = append(out, reconcile.Table{Schema: schema, Name: name})
	}
	return out, nil
}

func cmdReconcile(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "reconcile", reconcileHelp)
	var f reconcileFlags
	f.register(fs, env)
	if code, ok := parseFlags(fs, args, f.sf.resolve); !ok {
		return code
	}
	log, err := newLogger(env.stderr, f.sf.logFormat, f.sf.logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	opts, err := f.options()
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := f.sf.requireSource(); err != nil {
		return fail(env, exitUsage, err)
	}
	store, err := daemon.OpenStore(ctx, f.sf.store, storage.S3Options{Logger: log})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	tel, flush, err := startTelemetry(ctx, "deltabus-reconcile", false, 5*time.Second, log)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer flush()
	opts.Tracer = tel.Tracer
	if f.dryRun && !f.repair {
		return fail(env, exitUsage, usererr.New(nil, "--dry-run goes with --repair"))
	}
	if f.repair {
		rt, code, ok := withRegistry(ctx, env, &f.sf, store, log, opts.Mappings)
		if !ok {
			return code
		}
		defer rt.close()
		f.rt = rt
	}
	if f.every <= 0 {
		return reconcileOnce(ctx, env, &f, store, opts, log, nil)
	}
	return reconcileLoop(ctx, env, &f, store, opts, log, tel)
}

func reconcileLoop(ctx context.Context, env *cliEnv, f *reconcileFlags, store storage.Store, opts reconcile.Options, log *slog.Logger, tel *telemetry.Telemetry) int {
	m, err := reconcile.NewMetrics(tel.Meter)
	if err != nil {
		return fail(env, reconcile.ExitCannotRun, err)
	}
	if f.metricsAddr != "" {
		_, stop, err := daemon.Serve(daemon.HTTPOptions{Addr: f.metricsAddr, Gatherer: tel.Gatherer, Log: log})
		if err != nil {
			return fail(env, exitUsage, err)
		}
		defer stop()
	}
	for {
		code := reconcileOnce(ctx, env, f, store, opts, log, m)
		log.Info("reconcile run finished", "exit", code, "next_in", f.every)
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(f.every):
		}
	}
}

func reconcileOnce(ctx context.Context, env *cliEnv, f *reconcileFlags, store storage.Store, opts reconcile.Options, log *slog.Logger, m *reconcile.Metrics) int {
	if f.repair {
		return repairOnce(ctx, env, f, store, opts, log, m)
	}
	rep, err := reconcile.Run(ctx, f.sf.source, store, opts, log)
	if err != nil {
		m.ObserveFailure()
		return fail(env, reconcile.ExitCannotRun, err)
	}
	return reportRun(env, f, store, rep, log, m)
}

// reportRun records a check's results (unless --no-record), observes them
// and prints the report; the exit code is the report's.
func reportRun(env *cliEnv, f *reconcileFlags, store storage.Store, rep *reconcile.Report, log *slog.Logger, m *reconcile.Metrics) int {
	record(context.Background(), f, store, rep, log)
	m.Observe(rep)
	var err error
	if f.asJSON {
		err = rep.WriteJSON(env.stdout)
	} else {
		err = rep.WriteText(env.stdout, f.sample)
	}
	if err != nil {
		return fail(env, reconcile.ExitCannotRun, err)
	}
	return rep.ExitCode()
}

func record(ctx context.Context, f *reconcileFlags, store storage.Store, rep *reconcile.Report, log *slog.Logger) {
	if f.noRecord || rep == nil {
		return
	}
	v, err := reconcile.Record(ctx, store, rep)
	if err != nil {
		log.Error("record results in _reconciliation", "err", err)
	} else if v >= 0 {
		rep.RecordedAt = &v
	}
}

// repairOnce checks, publishes what is missing and checks again. It
// records both checks (the first with what the repair published) and
// prints the repair, then the last check; with --json one object holds
// the last check's report, and under "repair" the first one and the run.
func repairOnce(ctx context.Context, env *cliEnv, f *reconcileFlags, store storage.Store, opts reconcile.Options, log *slog.Logger, m *reconcile.Metrics) int {
	rt := f.rt
	out, err := reconcile.Repair(ctx, f.sf.source, store, opts, reconcile.RepairOptions{Contracts: rt.contracts, Protector: rt.protector,
		Actor: f.actor, DryRun: f.dryRun}, log)
	if out == nil {
		m.ObserveFailure()
		return fail(env, reconcile.ExitCannotRun, err)
	}
	last := out.Found
	if out.After != nil {
		record(ctx, f, store, out.Found, log) // the gaps found, with what was repaired
		last = out.After
	}
	if err != nil {
		m.ObserveFailure()
		if out.Publish != nil {
			printRun(env, out.Publish, false, f.dryRun)
		}
		return fail(env, reconcile.ExitCannotRun, err)
	}
	record(ctx, f, store, last, log)
	m.Observe(last)
	if f.asJSON {
		type repairJSON struct {
			Found   *reconcile.Report `json:"found"`
			Run     any               `json:"run,omitempty"`
			Outcome any               `json:"outcomes,omitempty"`
			DryRun  bool              `json:"dryRun"`
		}
		r := repairJSON{Found: out.Found, DryRun: f.dryRun}
		if out.Publish != nil {
			r.Run, r.Outcome = out.Publish.Run, out.Publish.Outcomes
		}
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			*reconcile.Report
			Repair repairJSON `json:"repair"`
		}{last, r}); err != nil {
			return fail(env, reconcile.ExitCannotRun, err)
		}
		return last.ExitCode()
	}
	if out.Publish != nil {
		printRun(env, out.Publish, false, f.dryRun)
	} else {
		fmt.Fprintln(env.stdout, "repair: nothing missing")
	}
	if err := last.WriteText(env.stdout, f.sample); err != nil {
		return fail(env, reconcile.ExitCannotRun, err)
	}
	return last.ExitCode()
}
