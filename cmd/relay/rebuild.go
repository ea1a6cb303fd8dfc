package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/usererr"
)

// cmdRebuild re-snapshots one topic while `relay run` keeps streaming the
// others, or with --abort releases a topic paused for a rebuild that died.
func cmdRebuild(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "rebuild", "--topic T [--abort] [flags]")
	var sf sourceFlags
	sf.register(fs, env)
	name := fs.String("topic", "", "the topic to rebuild from the outbox (its table must be readable or absent)")
	abort := fs.Bool("abort", false, "release a topic paused for a rebuild that died: the relay streams it again from the pause")
	conns := fs.Int("connections", 1, "connections reading the topic's rows (useful with several outbox tables)")
	pauseWait := fs.Duration("pause-wait", 10*time.Minute, "how long to wait for the running relay to reach the pause watermark")
	commitWait := fs.Duration("commit-wait", 10*time.Minute, "how long to wait for the relay to commit the rebuilt snapshot")
	if code, ok := parseFlags(fs, args, sf.resolve); !ok {
		return code
	}
	if *name == "" {
		return fail(env, exitUsage, errors.New("rebuild: --topic is required"))
	}
	se, code, ok := sf.open(ctx, env)
	if !ok {
		return code
	}
	if *abort {
		lsn, err := bootstrap.AbortRebuild(ctx, daemon.BootstrapConfig(se.cfg), se.store, *name)
		if err != nil {
			return fail(env, exitFailure, err)
		}
		fmt.Fprintf(env.stdout, "abort watermark written at %s: the relay resumes topic %q from its pause when it reaches it\n", lsn, *name)
		return exitOK
	}
	tel, flush, err := startTelemetry(ctx, "deltabus-rebuild", false, 5*time.Second, se.log)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer flush()
	opts := bootstrap.RebuildOptions{Options: bootstrap.Options{Log: se.log, Mappings: se.mappings, Connections: *conns, Tracer: tel.Tracer,
		Contracts: contract.New(se.store, contract.Options{Poll: -1, Logger: se.log})},
		PauseWait: *pauseWait, CommitWait: *commitWait}
	priv, err := sf.pii.protector(ctx, se.store)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer priv.Close()
	if priv != nil {
		opts.Protector = priv.Protector
	}
	res, err := bootstrap.Rebuild(ctx, daemon.BootstrapConfig(se.cfg), se.store, *name, opts)
	if err != nil {
		code := exitFailure
		if usererr.Is(err) {
			code = exitUsage
		}
		return fail(env, code, err)
	}
	where := ""
	if g, ok := catalog.GroupOfTable(res.Table); ok {
		where = fmt.Sprintf(" (group %q, table %s)", g, res.Table)
	}
	fmt.Fprintf(env.stdout, "rebuild %s of topic %q%s: %d rows in the outbox, %d events added, %d already in the table\n",
		res.ID, res.Topic, where, res.Rows, res.Added, res.Present)
	if !res.Committed {
		fmt.Fprintf(env.stdout, "handed to the relay: it commits the snapshot when its stream reaches the commit watermark (txn version %s)\n", res.TxnVersion)
	} else {
		fmt.Fprintf(env.stdout, "committed by the relay at txn version %s in %s; streaming resumed from the seam\n", res.TxnVersion, res.Took.Round(time.Millisecond))
	}
	if len(res.Held) > 0 {
		fmt.Fprintf(env.stdout, "still held: %d other topics of the group were in its lost table (%s); the relay holds each until `relay rebuild --topic T` (or --abort) is run for it\n",
			len(res.Held), nameList(res.Held, 10))
	}
	return exitOK
}

// nameList joins names, the first max of them and how many more.
func nameList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}
