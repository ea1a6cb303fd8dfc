package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/check"
)

func cmdCheck(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] != "consumers" {
		fmt.Fprintln(env.stderr, "relay check: want `relay check consumers [flags]`")
		return exitUsage
	}
	fs := newFlagSet(env, "check consumers", "[--json] [--checkpoint postgres://...] [--materialized GROUP:TABLE:COLUMN[:FIELD]] [thresholds]")
	var cfg check.Config
	var dsns, mats stringList
	storeURL := fs.String("store", env.getenv("DELTABUS_STORE"), "store URL: file:///path or s3://bucket/prefix (env DELTABUS_STORE)")
	asJSON := fs.Bool("json", false, "print the rows as JSON")
	fs.Var(&dsns, "checkpoint", "PostgreSQL database holding consumer checkpoints (repeatable); groups in the store are always checked")
	fs.Var(&mats, "materialized", "GROUP:SCHEMA.TABLE:COLUMN[:FIELD]: the group writes one row per event there, business key COLUMN = event FIELD (event_id, key, payload.NAME; default event_id) (repeatable)")
	fs.DurationVar(&cfg.Period, "period", time.Hour, "length of a closed period")
	fs.IntVar(&cfg.Periods, "periods", 24, "closed periods checked for completeness")
	fs.DurationVar(&cfg.Grace, "grace", time.Minute, "a period closes this long before the group's position")
	th := &cfg.Thresholds
	fs.Int64Var(&th.MaxLagVersions, "max-lag-versions", 0, "breach above this many versions of lag (0 = off)")
	fs.Float64Var(&th.MaxLagSeconds, "max-lag-seconds", 0, "breach above this many seconds of lag (0 = off)")
	fs.DurationVar(&th.MinHeadroom, "min-headroom", 0, "breach when clean-up would pass the position sooner (0 = off)")
	fs.Float64Var(&th.MinCompleteness, "min-completeness", 0, "breach below this completeness ratio (0 = off)")
	fs.Float64Var(&th.MaxDuplicateRate, "max-duplicate-rate", -1, "breach above this duplicate rate (-1 = off)")
	every := fs.Duration("every", 0, "check again every D until stopped (0 = once)")
	metricsAddr := fs.String("metrics-addr", "", "with --every, serve /metrics here (the last rows as gauges)")
	if code, ok := parseFlags(fs, args[1:]); !ok {
		return code
	}
	cfg.CheckpointDSNs = dsns
	var err error
	if cfg.Materialized, err = parseMaterialized(mats); err != nil {
		return fail(env, exitUsage, err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(env.stderr, nil))
	if cfg.Store, err = daemon.OpenStore(ctx, *storeURL, storage.S3Options{Logger: cfg.Logger}); err != nil {
		return fail(env, exitUsage, err)
	}
	tel, flush, err := startTelemetry(ctx, "deltabus-check", false, 5*time.Second, cfg.Logger)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer flush()
	m, err := check.NewMetrics(tel.Meter)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if *every > 0 && *metricsAddr != "" {
		_, stop, err := daemon.Serve(daemon.HTTPOptions{Addr: *metricsAddr, Gatherer: tel.Gatherer, Log: cfg.Logger})
		if err != nil {
			return fail(env, exitUsage, err)
		}
		defer stop()
	}
	for {
		code := checkOnce(ctx, env, cfg, m, *asJSON)
		if *every <= 0 {
			return code
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(*every):
		}
	}
}

func checkOnce(ctx context.Context, env *cliEnv, cfg check.Config, m *check.Metrics, asJSON bool) int {
	rows, err := check.Run(ctx, cfg)
	if err != nil {
		return fail(env, exitFailure, err)
	}
	m.Set(rows)
	if asJSON {
		err = check.WriteJSON(env.stdout, rows)
	} else {
		err = check.WriteText(env.stdout, rows)
	}
	if err != nil {
		return fail(env, exitFailure, err)
	}
	if check.Breached(rows) {
		return exitFailure
	}
	return exitOK
}

func parseMaterialized(list []string) ([]check.Materialized, error) {
	var out []check.Materialized
	for _, s := range list {
		f := strings.Split(s, ":")
		if len(f) < 3 || len(f) > 4 || f[0] == "" || f[1] == "" || f[2] == "" {
			return nil, fmt.Errorf("--materialized %q: want GROUP:SCHEMA.TABLE:COLUMN[:FIELD], e.g. billing:public.invoices:event_id", s)
		}
		m := check.Materialized{Group: f[0], Table: f[1], Column: f[2]}
		if len(f) == 4 {
			m.Field = f[3]
		}
		out = append(out, m)
	}
	return out, nil
}
