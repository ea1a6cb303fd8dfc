package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/reconcile"
)

const janitorHelp = `[--retention 168h] [--batch 5000] [--pause 100ms] [--dry-run] [--every D] [flags]

Deletes outbox rows older than --retention, in batches of --batch rows (one
short transaction each, --pause between them), and only rows whose commit the
relay has made durable: it samples the WAL position, waits until the relay's
slot has confirmed it, and deletes only rows committed before that sample.
If the relay is behind or stopped, nothing is deleted (exit 1).

The trade-off: the outbox is the only record the reconciler can compare the
log with. Rows the janitor deletes can no longer be checked, so events
missing from the log in that range become undetectable. Keep --retention
longer than the range you reconcile (relay reconcile --retention should be
the same value) and than the time you need to notice and repair a gap (for
example by re-bootstrapping from the outbox). Shorter retention keeps the
outbox table and its index small and cheap to vacuum.`

func cmdJanitor(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "janitor", janitorHelp)
	var sf sourceFlags
	sf.register(fs, env)
	var o reconcile.JanitorOptions
	var tables stringList
	var every time.Duration
	var asJSON bool
	fs.DurationVar(&o.Retention, "retention", reconcile.DefaultRetention, "delete rows with occurred_at older than this")
	fs.IntVar(&o.BatchSize, "batch", reconcile.DefaultJanitorBatch, "rows per DELETE statement")
	fs.DurationVar(&o.Pause, "pause", reconcile.DefaultJanitorPause, "pause between statements")
	fs.DurationVar(&o.DurableWait, "wait", reconcile.DefaultDurableWait, "how long to wait for the slot to confirm the sampled WAL position")
	fs.BoolVar(&o.DryRun, "dry-run", false, "count what would be deleted, delete nothing")
	fs.Var(&tables, "table", "outbox table schema.table (repeatable; default the publication's tables)")
	fs.DurationVar(&every, "every", 0, "run again every D until stopped (0 = once)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	log, err := newLogger(env.stderr, sf.logFormat, sf.logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := sf.requireSource(); err != nil {
		return fail(env, exitUsage, err)
	}
	o.Slot, o.Publication = sf.slot, sf.publication
	if o.Tables, err = parseTables(tables); err != nil {
		return fail(env, exitUsage, err)
	}
	if o.Mappings, err = outbox.ParseMappings(sf.mapping, nil); err != nil {
		return fail(env, exitUsage, fmt.Errorf("--mapping: %w", err))
	}
	for {
		code := janitorOnce(ctx, env, sf.source, o, asJSON, log)
		if every <= 0 {
			return code
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(every):
		}
	}
}

func janitorOnce(ctx context.Context, env *cliEnv, dsn string, o reconcile.JanitorOptions, asJSON bool, log interface {
	Info(string, ...any)
}) int {
	rep, err := reconcile.RunJanitor(ctx, dsn, o, nil)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(env.stdout, string(b))
		return exitOK
	}
	verb := "deleted"
	if rep.DryRun {
		verb = "would delete"
	}
	for table, n := range rep.Deleted {
		fmt.Fprintf(env.stdout, "%s %d rows of %s older than %s\n", verb, n, table, rep.Cutoff.Format(time.RFC3339))
	}
	log.Info("janitor finished", "batches", rep.Batches, "durable_lsn", rep.Durable, "took", rep.Took)
	return exitOK
}
