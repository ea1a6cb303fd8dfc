package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/daemon"
)

// cmdBootstrap copies the outbox rows a new slot's snapshot sees into the
// topics: a first start done ahead of `relay run`, or, with --recover, the
// recovery of a missing or invalidated slot.
func cmdBootstrap(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "bootstrap", "[--recover] [flags]")
	var sf sourceFlags
	sf.register(fs, env)
	doRecover := fs.Bool("recover", false, "recover a missing or invalidated (wal_status=lost) slot: new slot, re-read the outbox, skip events the topics already hold")
	conns := fs.Int("connections", 1, "connections reading the snapshot; more than 1 splits each table into block ranges (TID range scans), which cost the server more")
	workers := fs.Int("workers", 2, "goroutines encoding each connection's rows into Parquet")
	var noFailover bool
	fs.BoolFunc("failover-slot", failoverSlotUsage, func(v string) error { return setNoFailover(&noFailover, v) })
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	env2, code, ok := sf.open(ctx, env)
	if !ok {
		return code
	}
	cfg, store := daemon.BootstrapConfig(env2.cfg), env2.store
	cfg.NoFailoverSlot = noFailover
	tel, flush, err := startTelemetry(ctx, "deltabus-bootstrap", false, 5*time.Second, env2.log)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer flush()
	opts := bootstrap.Options{Log: env2.log, Mappings: env2.mappings, Connections: *conns, Workers: *workers, Tracer: tel.Tracer,
		Contracts: contract.New(store, contract.Options{Poll: -1, Logger: env2.log})}
	priv, err := sf.pii.protector(ctx, store)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer priv.Close()
	if priv != nil {
		opts.Protector = priv.Protector
	}
	var res bootstrap.Result
	if *doRecover {
		res, err = bootstrap.Recover(ctx, cfg, store, opts)
	} else {
		res, err = bootstrap.First(ctx, cfg, store, opts)
	}
	if err != nil {
		return fail(env, exitFailure, err)
	}
	printBootstrap(env, res)
	if *doRecover {
		fmt.Fprintf(env.stderr, "relay: warning: %s\n", bootstrap.RecoverWarning)
	}
	fmt.Fprintf(env.stdout, "next: `relay run` streams from %s\n", res.ConsistentPoint)
	return exitOK
}

func printBootstrap(env *cliEnv, res bootstrap.Result) {
	fmt.Fprintf(env.stdout, "snapshot at consistent point %s: %d outbox rows read in %s\n", res.ConsistentPoint, res.Rows, res.Took.Round(1e6))
	names := make([]string, 0, len(res.Topics))
	for n := range res.Topics {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintf(env.stdout, "%-40s %12s %12s\n", "TOPIC", "ADDED", "ALREADY-THERE")
	grouped := map[string][]string{}
	for _, n := range names {
		t := res.Topics[n]
		fmt.Fprintf(env.stdout, "%-40s %12d %12d\n", n, t.Added, t.Skipped)
		if g, ok := catalog.GroupOfTable(t.Table); ok {
			grouped[g] = append(grouped[g], n)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(grouped)) {
		fmt.Fprintf(env.stdout, "group %q: %d topics in table %s (%s)\n", g, len(grouped[g]), catalog.GroupTable(g), nameList(grouped[g], 10))
	}
}

const failoverSlotUsage = "on PostgreSQL 17 and later, create the slot as a failover slot (and make an existing one so) that standbys with sync_replication_slots keep, so the relay resumes after a promotion by itself; false keeps it local (default true)"

// setNoFailover parses --failover-slot's boolean into its negation.
func setNoFailover(no *bool, v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*no = !b
	return nil
}
