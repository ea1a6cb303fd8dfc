// Package demo runs the whole product on embedded defaults (`relay demo`,
// `make demo`): a throwaway PostgreSQL (unless a source is given), a
// local-disk store, a producer writing realistic multi-topic transactions
// with a few poison rows, the relay, and at the end a row-by-row
// verification of every topic against the source and a summary.
//
// A demo is repeatable: with a throwaway PostgreSQL the store it wrote last
// time belongs to a database that no longer exists, so the demo clears the
// data directory it made (it marks it with a DirMarker file) and says so;
// it never touches a directory it did not make.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgcluster"
	"github.com/deltabus/deltabus/relay"
)

// Options configure a demo run.
type Options struct {
	Source string // PostgreSQL to use instead of a throwaway one (wal_level=logical)
	Dir    string // local directory of the Delta topic tables
	Events int    // stop after this many events (0: until ctx ends)
	Rate   int    // producer rate, events per second
	Keep   bool   // keep the throwaway PostgreSQL running afterwards
	Log    *slog.Logger

	poisonEvery int // transactions per poison row (default 500)
}

// DirMarker names the file that marks a data directory as the demo's own.
const DirMarker = ".deltabus-demo"

// Slot is the replication slot the demo's relay uses.
const Slot = "deltabus_demo"

// Run runs the demo, printing progress and the summary to out.
func Run(ctx context.Context, out io.Writer, o Options) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	dsn := o.Source
	if dsn == "" {
		fmt.Fprintln(out, "starting a throwaway PostgreSQL (wal_level=logical) ...")
		srv, err := pgcluster.StartServer(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("start throwaway PostgreSQL: %w", err)
		}
		if o.Keep {
			fmt.Fprintf(out, "PostgreSQL stays up: %s (stop: pg_ctl -D %s stop)\n", srv.DSN("postgres"), srv.DataDir)
		} else {
			defer srv.Stop()
		}
		dsn = srv.DSN("postgres")
	}
	dir, err := prepareDir(out, o.Dir, o.Source == "")
	if err != nil {
		return err
	}
	storeURL := "file://" + dir
	if err := migrate(ctx, out, dsn); err != nil {
		return err
	}
	r, store, err := daemon.New(ctx, relay.Config{Source: dsn, Store: storeURL, Slot: Slot}, daemon.Options{Log: o.Log})
	if err != nil {
		return err
	}
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	relayErr := make(chan error, 1)
	go func() { relayErr <- r.Run(relayCtx) }()
	select {
	case <-r.Started():
	case err := <-relayErr:
		return err
	}
	fmt.Fprintf(out, "relay streaming into %s\n", dir)
	return finish(ctx, out, newDemo(dsn, store, o), dir, stopRelay, relayErr)
}

// finish runs the producer, stops the relay, verifies and summarises.
func finish(ctx context.Context, out io.Writer, d *demo, dir string, stopRelay func(), relayErr chan error) error {
	err := d.run(ctx, out, relayErr)
	stopRelay()
	if rerr := <-relayErr; rerr != nil && err == nil {
		err = rerr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintln(out, "verifying every topic against the source, row by row ...")
	sum, err := d.verify(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	sum.print(out, dir, time.Since(d.started))
	return nil
}

// prepareDir returns the absolute data directory, empty when fresh is set:
// a directory the demo made earlier is cleared (saying so); any other
// non-empty directory is refused.
func prepareDir(out io.Writer, dir string, fresh bool) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("read %s: %w", dir, err)
	case len(entries) > 0 && fresh:
		if _, err := os.Stat(filepath.Join(dir, DirMarker)); err != nil {
			return "", fmt.Errorf("%s is not empty and was not made by the demo: choose another --dir (the demo starts a new PostgreSQL, so it needs an empty store)", dir)
		}
		fmt.Fprintf(out, "clearing %s: it holds the previous demo's tables, whose throwaway PostgreSQL is gone\n", dir)
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, DirMarker), []byte("made by `relay demo`; cleared by the next one\n"), 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

func migrate(ctx context.Context, out io.Writer, dsn string) error {
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
	return nil
}
