package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/pgcluster"
)

// benchOptions size the side-by-side measurements of `relay bench`.
type benchOptions struct {
	source         string
	events         int           // rows drained in 1000-row transactions
	single         int           // single-row transactions drained
	big            int           // rows in one transaction (memory)
	latencyFor     time.Duration // steady-load latency run
	rate           int           // single-row transactions per second in the latency run
	only           string
	recvlogicalBin string
	relayArgs      string // extra flags for the measured `relay run`
	latencyStore   string // store URL for the latency run (default: a temp dir)
}

// cmdBench measures the relay against this machine's own limit, in the
// same run on the same WAL: pg_recvlogical draining a second slot made
// before the load. Each figure is one line: name relay=… reference=… ratio=….
func cmdBench(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "bench", "[flags]")
	var o benchOptions
	fs.StringVar(&o.source, "source", "", "PostgreSQL DSN of a superuser (default: start a throwaway cluster)")
	fs.IntVar(&o.events, "events", 1_000_000, "events to drain in 1000-row transactions")
	fs.IntVar(&o.single, "single", 200_000, "single-row transactions to drain")
	fs.IntVar(&o.big, "big", 1_000_000, "rows in one transaction for the memory run")
	fs.DurationVar(&o.latencyFor, "latency-for", 60*time.Second, "duration of the steady-load latency run")
	fs.IntVar(&o.rate, "rate", 2000, "single-row transactions per second in the latency run")
	fs.StringVar(&o.only, "only", "", "comma-separated subset: batch,single,big,latency")
	fs.StringVar(&o.latencyStore, "latency-store", "", "store URL for the latency run, e.g. s3://bucket/prefix (default: a local temp dir)")
	fs.StringVar(&o.relayArgs, "relay-args", "", "extra flags for the measured `relay run`, space-separated (e.g. \"--batch-max-delay 200ms\")")
	fs.StringVar(&o.recvlogicalBin, "pg-recvlogical", pgcluster.BinDir+"/pg_recvlogical", "pg_recvlogical binary")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := runBench(ctx, env.stdout, o); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

func (o benchOptions) want(name string) bool {
	if o.only == "" {
		return true
	}
	for _, n := range strings.Split(o.only, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

func runBench(ctx context.Context, out io.Writer, o benchOptions) error {
	admin := o.source
	if admin == "" {
		srv, err := pgcluster.StartServer(ctx, "max_wal_size = 8GB", "checkpoint_timeout = 30min")
		if err != nil {
			return err
		}
		defer srv.Stop()
		admin = srv.DSN("postgres")
		fmt.Fprintf(out, "# throwaway PostgreSQL 15, fsync=off synchronous_commit=off (pgcluster defaults); store on local disk (fsync on)\n")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b := &bench{admin: admin, self: self, out: out, o: o}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"batch", b.drainBatched}, {"single", b.drainSingle}, {"big", b.bigTransaction}, {"latency", b.latency},
	}
	for _, s := range steps {
		if !o.want(s.name) {
			continue
		}
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("bench %s: %w", s.name, err)
		}
	}
	return nil
}

type bench struct {
	admin string
	self  string
	out   io.Writer
	o     benchOptions
	n     int
}

// freshDB creates and migrates a database for one measurement.
func (b *bench) freshDB(ctx context.Context) (string, func(), error) {
	b.n++
	name := fmt.Sprintf("bench_%d_%d", os.Getpid(), b.n)
	conn, err := pgx.Connect(ctx, b.admin)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	dsn := replaceDB(b.admin, name)
	drop := func() {
		c, err := pgx.Connect(context.Background(), b.admin)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active`, name)
		_, _ = c.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1`, name)
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	if code := runCLI(ctx, &cliEnv{stdout: io.Discard, stderr: b.out, getenv: func(string) string { return "" }},
		[]string{"migrate", "--source", dsn}); code != 0 {
		drop()
		return "", nil, fmt.Errorf("migrate failed")
	}
	return dsn, drop, nil
}

func replaceDB(dsn, db string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return dsn
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, db)
}

func (b *bench) line(name string, relay, ref float64, unit string) {
	ratio := 0.0
	if ref > 0 {
		ratio = relay / ref
	}
	fmt.Fprintf(b.out, "%s relay=%.0f%s reference=%.0f%s ratio=%.2f\n", name, relay, unit, ref, unit, ratio)
}
