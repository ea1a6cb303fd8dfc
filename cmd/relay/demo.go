package main

import (
	"context"

	"github.com/deltabus/deltabus/demo"
)

// cmdDemo runs the whole product on embedded defaults (package demo).
func cmdDemo(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "demo", "[flags]")
	var o demo.Options
	fs.StringVar(&o.Source, "source", "", "use this PostgreSQL instead of starting a throwaway one (needs wal_level=logical); its data directory is then kept between runs")
	fs.StringVar(&o.Dir, "dir", "./deltabus-data", "local directory for the Delta topic tables (with a throwaway PostgreSQL, the previous demo's directory is cleared)")
	fs.IntVar(&o.Events, "events", 0, "stop after this many events are relayed and verified (default: run until Ctrl-C)")
	fs.IntVar(&o.Rate, "rate", 2000, "producer rate, events per second")
	fs.BoolVar(&o.Keep, "keep", false, "keep the throwaway PostgreSQL running after the demo")
	logLevel := fs.String("log-level", "error", "relay log level: debug, info, warn, error (dead letters are logged at warn)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	log, err := newLogger(env.stderr, "text", *logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	o.Log = log
	if err := demo.Run(ctx, env.stdout, o); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}
