package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/consume"
)

func cmdConsume(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "consume", "--topic T --group G [--follow] [--from-version N | --from-time T] [--checkpoint postgres://...]\n  or: relay consume --topics A,B [--source APPID] [--after LSN] [--follow]")
	var cfg consume.Config
	storeURL := fs.String("store", env.getenv("DELTABUS_STORE"), "store URL: file:///path or s3://bucket/prefix (env DELTABUS_STORE)")
	fs.StringVar(&cfg.Topic, "topic", "", "topic to read")
	fs.StringVar(&cfg.Group, "group", "", "consumer group: its checkpoint says where to go on")
	fs.BoolVar(&cfg.Follow, "follow", false, "keep polling for new events (default: stop when caught up)")
	fromVersion := fs.Int64("from-version", -1, "reset the group to this version first (a replay; of the group's table for a topic of a topic group)")
	fromTime := fs.String("from-time", "", "reset the group to the first version committed at or after this RFC 3339 time")
	fs.StringVar(&cfg.CheckpointDSN, "checkpoint", "", "keep the checkpoint in this PostgreSQL database (postgres://...) instead of the store")
	fs.IntVar(&cfg.BatchSize, "batch-size", subscribe.DefaultBatchSize, "events per checkpoint")
	fs.DurationVar(&cfg.PollInterval, "poll-interval", subscribe.DefaultPollInterval, "wait between polls once caught up (--follow)")
	logFormat := fs.String("log-format", envOr(env, "DELTABUS_LOG_FORMAT", "text"), "log format (stderr): text or json")
	logLevel := fs.String("log-level", envOr(env, "DELTABUS_LOG_LEVEL", "warn"), "log level: debug, info, warn, error")
	validate := fs.Bool("validate", false, "check every event against its contract in the store's registry: a refused event is printed with contract_violation set, and the command exits 1 at the end")
	var cf cutFlags
	fs.StringVar(&cf.topics, "topics", "", "whole transactions: read these topics (comma-separated) up to one source's resolved position, printing one JSON line per source transaction with its events of all of them, then {\"resolved\": position} (a commit LSN, unless the source failed over and its positions began a new epoch)")
	fs.StringVar(&cf.source, "source", "", "with --topics: the source (relay appId) whose cut to read; default: the store's only source")
	fs.Int64Var(&cf.after, "after", 0, "with --topics: start at this resolved position (the last line of the previous run)")
	var pf piiFlags
	pf.register(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if cf.topics != "" {
		return consumeCuts(ctx, env, cf, cfg.Follow, cfg.PollInterval, *storeURL)
	}
	start, err := consumeStart(*fromVersion, *fromTime)
	if err == nil && (cfg.Topic == "" || cfg.Group == "") {
		err = errors.New("--topic and --group are required, e.g. relay consume --topic orders --group billing")
	}
	if err != nil {
		return fail(env, exitUsage, err)
	}
	cfg.Reset = start
	if cfg.Logger, err = newLogger(env.stderr, *logFormat, *logLevel); err != nil {
		return fail(env, exitUsage, err)
	}
	if cfg.Store, err = daemon.OpenStore(ctx, *storeURL, storage.S3Options{Logger: cfg.Logger}); err != nil {
		return fail(env, exitUsage, err)
	}
	if *validate {
		cfg.Contracts = contract.New(cfg.Store, contract.Options{Logger: cfg.Logger})
		go cfg.Contracts.Run(ctx)
	}
	if pf.kek != "" { // decrypt personal fields: the KEK and SELECT on the key table
		pf.source = env.getenv("DELTABUS_SOURCE")
		r, err := pii.OpenRevealer(ctx, pf.configFor(cfg.Store))
		if err != nil {
			return fail(env, exitUsage, err)
		}
		defer r.Keys().Close()
		cfg.Reveal = r
	}
	if err := consume.Run(ctx, cfg, env.stdout); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

func consumeStart(version int64, at string) (*subscribe.Start, error) {
	switch {
	case version >= 0 && at != "":
		return nil, errors.New("give --from-version or --from-time, not both")
	case version >= 0:
		s := subscribe.FromVersion(version)
		return &s, nil
	case at != "":
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return nil, fmt.Errorf("--from-time %q is not an RFC 3339 time (e.g. 2026-11-30T08:00:00Z): %v", at, err)
		}
		s := subscribe.FromTime(t)
		return &s, nil
	}
	return nil, nil
}

// consumeCuts is relay consume --topics.
func consumeCuts(ctx context.Context, env *cliEnv, cf cutFlags, follow bool, poll time.Duration, storeURL string) int {
	for _, t := range cf.topicList() {
		if err := catalog.CheckName("topic", t); err != nil {
			return fail(env, exitUsage, fmt.Errorf("--topics: %w", err))
		}
	}
	store, err := daemon.OpenStore(ctx, storeURL, storage.S3Options{})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := runCuts(ctx, store, cf, follow, poll, env.stdout); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}
