package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
)

type demoOptions struct {
	source, dir string
	events      int
	rate        int
	keep        bool
}

// cmdDemo runs the whole product on embedded defaults: a throwaway
// PostgreSQL (unless --source is given), a local-disk store, a producer that
// writes realistic multi-topic transactions, the relay, and at the end a
// row-by-row verification and a summary.
func cmdDemo(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "demo", "[flags]")
	var o demoOptions
	fs.StringVar(&o.source, "source", "", "use this PostgreSQL instead of starting a throwaway one (needs wal_level=logical)")
	fs.StringVar(&o.dir, "dir", "./deltabus-data", "local directory for the Delta topic tables")
	fs.IntVar(&o.events, "events", 0, "stop after this many events are relayed and verified (default: run until Ctrl-C)")
	fs.IntVar(&o.rate, "rate", 2000, "producer rate, events per second")
	fs.BoolVar(&o.keep, "keep", false, "keep the throwaway PostgreSQL running after the demo")
	logLevel := fs.String("log-level", "error", "relay log level: debug, info, warn, error (dead letters are logged at warn)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	log, err := newLogger(env.stderr, "text", *logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err = runDemo(ctx, env, o, log); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

func runDemo(ctx context.Context, env *cliEnv, o demoOptions, log *slog.Logger) error {
	out := env.stdout
	dsn := o.source
	if dsn == "" {
		fmt.Fprintln(out, "starting a throwaway PostgreSQL (wal_level=logical) ...")
		srv, err := pgcluster.StartServer(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("start throwaway PostgreSQL: %w", err)
		}
		if o.keep {
			fmt.Fprintf(out, "PostgreSQL stays up: %s (stop: pg_ctl -D %s stop)\n", srv.DSN("postgres"), srv.DataDir)
		} else {
			defer srv.Stop()
		}
		dsn = srv.DSN("postgres")
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	storeURL := "file://" + dir
	store, err := storage.Open(ctx, storeURL, storage.S3Options{})
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rep, err := migrations.Apply(ctx, conn, migrations.Options{})
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.String())

	cfg := relay.Config{Source: dsn, Store: storeURL, Slot: "deltabus_demo"}
	r := relay.New(cfg, store, outbox.Mappings{}, log, nil)
	r.Bootstrap = bootstrap.FirstStart(log)
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	relayErr := make(chan error, 1)
	go func() { relayErr <- r.Run(relayCtx) }()
	select {
	case <-r.Ready():
	case err := <-relayErr:
		stopRelay()
		return fmt.Errorf("relay: %w", err)
	}
	fmt.Fprintf(out, "relay streaming into %s\n", dir)

	d := newDemo(dsn, store, o)
	err = d.run(ctx, out, relayErr)
	stopRelay()
	if rerr := <-relayErr; rerr != nil && err == nil {
		err = fmt.Errorf("relay: %w", rerr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintln(out, "verifying every topic against the source, row by row ...")
	sum, verr := d.verify(context.WithoutCancel(ctx))
	if verr != nil {
		return verr
	}
	sum.print(out, dir, time.Since(d.started))
	return nil
}
