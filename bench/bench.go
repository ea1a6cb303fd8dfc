// Package bench measures the relay against this machine's own limit, in
// the same run on the same WAL: pg_recvlogical draining a second slot made
// before the load (`relay bench`, `make bench`). Each figure is one line:
// name relay=… reference=… ratio=….
//
// A drain reports events per second, CPU per event of the process alone
// (user+system of the relay, or of pg_recvlogical) and with the walsender
// that served it (the server's logical decoding, sampled from /proc), and
// the relay's peak RSS. With Options.Loaded (--loaded, on by default) each
// drain is repeated, relay and reference alike, beside a goroutine that
// spins on one core (lines suffixed _loaded). Each drain is timed
// Options.Rounds times (--rounds, 3 by default), relay and reference in
// turn, which goes first alternating, each round on slots of its own made
// before the load; the figures are the medians (a drain's ratio is the
// median of the rounds' ratios), and a comment line gives every round.
// With Options.Control (--control, on by default) each round also times a
// second pg_recvlogical, whose ratio to the first (a "# … control" line) is
// the run's own resolution: on a shared machine the same drain varies by a
// quarter from one run to the next, mostly in the walsender's CPU time.
//
// With Options.Contracts (on by default) each round of a drain also times
// a relay whose store holds a contract for every event; with
// Options.Personal the 1,000-row drain's events carry an email and a name
// and each round also times a relay that encrypts both (personal.go): CPU
// per event plain, contracts only and personal, same rounds.
//
// Each round of a drain also times, beside the measured relay, a relay
// without transaction records (Options.RecordsOff, on by default: lines
// _records_off and _vs_records_off, what the records cost) and, with
// Options.OtherBin, another build (lines _other_build and
// _vs_other_build: alternating builds on the same WAL, to find what a
// change cost); sides.go.
//
// The relay runs with --stop-at, so that it exits by itself at the drain's
// end as pg_recvlogical does at --endpos: nothing polls the database while
// a drain is timed. The start-up figures time both tools from exec to exit
// on a drain of one event (startup.go).
//
// The fan-in run (--only fanin, fanin.go) starts PostgreSQL clusters of
// its own, one relay each, and measures them sharing one store's five
// topics against the same relays into separate stores and against one
// source alone: events per second, lost commit races per 1,000 commits
// and each source's p99 latency.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/migrations"
	"github.com/deltabus/deltabus/pgcluster"
)

// Options size the side-by-side measurements.
type Options struct {
	Source     string        // superuser DSN; "" starts a throwaway cluster
	Events     int           // rows drained in 1000-row transactions
	Single     int           // single-row transactions drained
	Big        int           // rows in one transaction (memory)
	LatencyFor time.Duration // steady-load latency run
	Rate       int           // single-row transactions per second in the latency run
	Only       string        // comma-separated subset: batch,single,big,topics,latency,startup,fanin,memory
	// MemoryStore is the store URL under which the memory run makes a
	// table root per shape (s3://bucket/prefix); "" is a local temp dir.
	MemoryStore string
	// MemoryShapes is a comma-separated subset of the memory run's shapes
	// (one_tx,backlog,topics_300_then_1000,topics_10000); "" runs them all.
	MemoryShapes   string
	RecvlogicalBin string
	RelayArgs      string // extra flags for the measured `relay run`
	LatencyStore   string // store URL for the latency run (default: a temp dir)
	LatencyWatch   string // for an S3 LatencyStore: the folder where the server keeps its objects as files
	// LatencyName names the latency run's lines and result (default
	// "latency": latency_p50, latency_p99).
	LatencyName string
	// LatencyGroup puts the latency run's five topics in one topic group
	// (catalog.Group), so that each batch is one commit of one table.
	LatencyGroup bool
	// LatencyFloor runs the latency run's load again, after the relay's
	// run, with pg_recvlogical streaming it instead (DeliveryFloor).
	LatencyFloor bool
	// RelayBin is the relay binary measured (default: this executable).
	RelayBin string
	// Loaded repeats each drain with a CPU hog spinning on one core,
	// relay and pg_recvlogical alike (lines suffixed _loaded).
	Loaded bool
	// Rounds is how many times each drain is timed, relay and
	// pg_recvlogical in turn, which goes first alternating; the figures
	// are the medians (default 1).
	Rounds int
	// Control also times, in each round, a second pg_recvlogical on a
	// slot of its own: the ratio of two runs of the same tool is how far
	// this run's relay ratios can move by chance.
	Control bool
	// FaninSources are the counts of sources of the fan-in run ("2,4"),
	// each a PostgreSQL cluster of its own (fanin.go).
	FaninSources string
	FaninEvents  int           // single-row transactions per source in the fan-in drain
	FaninRate    int           // single-row transactions per second per source, fan-in steady load
	FaninFor     time.Duration // duration of each fan-in steady load
	FaninStore   string        // base store URL of the fan-in run (default: a local temp dir)
	FaninName    string        // names the fan-in lines (default "fanin": fanin_2_...)
	// Contracts also times, in each round, a relay whose store holds a
	// contract for every event's type (lines suffixed _contracts): the
	// cost of validating every event, against the relay without
	// contracts and pg_recvlogical, in the same run.
	Contracts bool
	// Personal gives the 1,000-row drain's events two personal fields
	// (an email and a name) and also times, in each round, a relay that
	// encrypts them (lines suffixed _personal): its CPU per event against
	// the relay with contracts only and pg_recvlogical (personal.go).
	Personal bool
	// RecordsOff also times, in each round, a relay without transaction
	// records (--transaction-records=false; lines suffixed _records_off
	// and _vs_records_off): what the records cost the drain.
	RecordsOff bool
	// OtherBin also times, in each round, this other relay build (lines
	// suffixed _other_build and _vs_other_build): alternating builds on
	// the same WAL, to find what a change cost.
	OtherBin string
}

func (o Options) want(name string) bool {
	if o.Only == "" {
		return true
	}
	for _, n := range strings.Split(o.Only, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// Run runs the measurements o selects, prints one line per figure and
// returns the figures (Results.WriteFile saves them as JSON). What was
// measured before an error is returned with it.
func Run(ctx context.Context, out io.Writer, o Options) (*Results, error) {
	res := &Results{Started: time.Now().UTC(), Machine: machine()}
	return res, run(ctx, out, o, res)
}

func run(ctx context.Context, out io.Writer, o Options, res *Results) error {
	admin := o.Source
	// The fan-in run starts clusters of its own: a run of it alone needs
	// no other.
	if admin == "" && o.Only != "fanin" {
		srv, err := pgcluster.StartServer(ctx, "max_wal_size = 8GB", "checkpoint_timeout = 30min")
		if err != nil {
			return err
		}
		defer srv.Stop()
		admin = srv.DSN("postgres")
		fmt.Fprintf(out, "# throwaway PostgreSQL 15, fsync=off synchronous_commit=off (pgcluster defaults); store on local disk (fsync on)\n")
	}
	self := o.RelayBin
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return err
		}
	}
	b := &bench{admin: admin, self: self, out: out, o: o, res: res}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"batch", b.drainBatched}, {"single", b.drainSingle}, {"big", b.bigTransaction}, {"topics", b.topicsShape}, {"latency", b.latency},
		{"startup", b.startup}, {"fanin", b.fanin}, {"memory", b.memory},
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
	o     Options
	res   *Results
	n     int
	// unwatched: the drains watch no walsender's CPU (startup.go).
	unwatched bool
}

// machine describes this machine for Results: cores and kernel.
func machine() string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(fmt.Sprintf("%d cores, %s %s", runtime.NumCPU(), runtime.GOOS, strings.TrimSpace(string(kernel))))
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
	if err := migrate(ctx, dsn); err != nil {
		drop()
		return "", nil, err
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

// linef prints one figure, name relay=… reference=… ratio=…, with two
// decimals (small units: µs per event).
func (b *bench) linef(name string, relay, ref float64, unit string) {
	ratio := 0.0
	if ref > 0 {
		ratio = relay / ref
	}
	fmt.Fprintf(b.out, "%s relay=%.2f%s reference=%.2f%s ratio=%.2f\n", name, relay, unit, ref, unit, ratio)
}

// migrate creates the outbox and the publication in a fresh database.
func migrate(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := migrations.Apply(ctx, conn, migrations.Options{}); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
