package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
)

// demo drives the producer, shows progress and verifies the result.
//
// Its progress line compares two counts of the same thing, outbox rows:
// produced is the rows whose transaction committed or is committing
// (events and poison rows alike), relayed the rows durable in the topic
// tables (_dead_letter included), read first. Events reserved against
// --events but not yet written are in neither.
type demo struct {
	dsn      string
	store    storage.Store
	opts     Options
	reserved atomic.Int64 // events counted against --events
	produced atomic.Int64 // outbox rows committed or committing: events and poison rows
	poison   atomic.Int64
	// poisonEvery is how many transactions there are per poison row, on
	// average.
	poisonEvery int
	started     time.Time
}

func newDemo(dsn string, store storage.Store, o Options) *demo {
	every := o.poisonEvery
	if every <= 0 {
		every = 500
	}
	return &demo{dsn: dsn, store: store, opts: o, poisonEvery: every, started: time.Now()}
}

// progress prints one progress line: rows committed to the outbox (and
// their rate since the last line), rows durable in the topic tables, and
// the difference.
func (d *demo) progress(ctx context.Context, out io.Writer, last int64, since time.Duration) int64 {
	// Relayed first: a row relayed by then was produced by then, so the
	// line never shows more relayed than produced.
	relayed := d.relayedCount(ctx)
	p := d.produced.Load()
	fmt.Fprintf(out, "produced %7d (%5.0f/s)  relayed %7d  behind %6d\n", p, float64(p-last)/since.Seconds(), relayed, max(0, p-relayed))
	return p
}

// run produces until --events are written (or ctx ends), then waits until
// the relay has made everything durable.
func (d *demo) run(ctx context.Context, out io.Writer, relayErr <-chan error) error {
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.produce(pctx, w); err != nil && pctx.Err() == nil {
				errs <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fmt.Fprintln(out, "progress: produced = outbox rows committed (poison rows too), relayed = rows durable in the topic tables (_dead_letter too)")
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-done:
			return d.drain(context.WithoutCancel(ctx), out)
		case err := <-errs:
			return fmt.Errorf("producer: %w", err)
		case err := <-relayErr:
			return fmt.Errorf("relay stopped: %v", err)
		case <-ctx.Done():
			stopProducers()
			<-done
			fmt.Fprintln(out, "\ninterrupted: letting the relay catch up ...")
			return d.drain(context.WithoutCancel(ctx), out)
		case now := <-tick.C:
			last, lastAt = d.progress(context.WithoutCancel(ctx), out, last, now.Sub(lastAt)), now
		}
	}
}

// drain waits until the slot has confirmed the WAL position at which the
// producers stopped: every event is then in a durable Delta commit.
func (d *demo) drain(ctx context.Context, out io.Writer) error {
	conn, err := pgx.Connect(ctx, d.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var target string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'deltabus_demo'`, target).Scan(&ok)
		if err != nil {
			return err
		}
		if ok {
			d.progress(ctx, out, d.produced.Load(), time.Second)
			fmt.Fprintf(out, "all %d outbox rows durable in Delta (slot confirmed past %s)\n", d.produced.Load(), target)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("relay did not catch up with WAL position %s within 2 minutes", target)
}

// produce writes realistic platform events in transactions that often span
// several topics, at about opts.rate events per second across workers.
func (d *demo) produce(ctx context.Context, worker int) error {
	conn, err := pgx.Connect(ctx, d.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Commit durably, as services do: the throwaway cluster defaults to
	// synchronous_commit=off, which delays the walsender by up to 200 ms.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(worker), uint64(time.Now().UnixNano())))
	perWorker := float64(max(d.opts.Rate, 1)) / 2
	start := time.Now()
	var mine int64
	for ctx.Err() == nil {
		if d.opts.Events > 0 && d.reserved.Load() >= int64(d.opts.Events) {
			return nil
		}
		evs := demoTransaction(rng)
		if !d.reserve(&evs) {
			return nil
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := outbox.Write(ctx, tx, evs...); err != nil {
				return err
			}
			// Counted as the commit is sent, not when its answer is
			// read: the relay may have the rows by then. A failed
			// commit ends the demo.
			d.produced.Add(int64(len(evs)))
			return nil
		})
		if err != nil {
			return err
		}
		if rng.IntN(d.poisonEvery) == 0 {
			if err := d.writePoison(ctx, conn); err != nil {
				return err
			}
		}
		mine += int64(len(evs))
		if ahead := time.Duration(float64(mine)/perWorker*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return nil
}

// reserve counts evs against --events, trimming them to what is left; false
// when the target is reached.
func (d *demo) reserve(evs *[]outbox.NewEvent) bool {
	n := int64(len(*evs))
	if d.opts.Events <= 0 {
		d.reserved.Add(n)
		return true
	}
	for {
		cur := d.reserved.Load()
		left := int64(d.opts.Events) - cur
		if left <= 0 {
			return false
		}
		if n > left {
			*evs, n = (*evs)[:left], left
		}
		if d.reserved.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// writePoison inserts a row no topic can take: it must land in _dead_letter
// without stopping the stream.
func (d *demo) writePoison(ctx context.Context, conn *pgx.Conn) error {
	d.produced.Add(1) // before the commit, as in produce; an error ends the demo
	_, err := conn.Exec(ctx, `INSERT INTO outbox (topic, key, type, payload) VALUES ('Not A Topic!', 'k', 'oops', '{"why":"invalid topic name"}')`)
	if err == nil {
		d.poison.Add(1)
	}
	return err
}

var demoTenants = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell"}

// demoTransaction returns the events of one business transaction.
func demoTransaction(rng *rand.Rand) []outbox.NewEvent {
	tenant := demoTenants[rng.IntN(len(demoTenants))]
	trace := map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-01", rng.Uint64(), rng.Uint64())}
	ev := func(topic, key, typ string, payload map[string]any) outbox.NewEvent {
		b, _ := json.Marshal(payload)
		return outbox.NewEvent{Topic: topic, Key: key, Type: typ, Payload: b, Headers: trace}
	}
	switch n := rng.IntN(10); {
	case n < 2: // tenant provisioning: two topics, one transaction
		ws := fmt.Sprintf("%s-ws-%d", tenant, rng.IntN(1000))
		return []outbox.NewEvent{
			ev("tenant.provisioning", tenant, "WorkspaceCreated", map[string]any{"tenant": tenant, "workspace": ws, "region": "eu-west-1", "plan": "enterprise"}),
			ev("ingestion.orchestration", ws, "IngestionScheduled", map[string]any{"workspace": ws, "source": "s3://landing/" + tenant, "cron": "*/15 * * * *"}),
		}
	case n < 6: // ingestion run finished, quality checked in the same transaction
		run := fmt.Sprintf("run-%d", rng.Uint32())
		evs := []outbox.NewEvent{ev("ingestion.orchestration", tenant, "IngestionCompleted", map[string]any{"run": run, "rows": rng.IntN(5_000_000), "seconds": rng.Float64() * 600})}
		if rng.IntN(3) == 0 {
			evs = append(evs, ev("data.quality", tenant, "CheckFailed", map[string]any{"run": run, "check": "not_null(customer_id)", "failed_rows": rng.IntN(100)}))
		}
		return evs
	default: // agent-to-agent messages
		conv := fmt.Sprintf("conv-%d", rng.Uint32())
		return []outbox.NewEvent{
			ev("agent.messages", conv, "TaskRequested", map[string]any{"from": "planner", "to": "sql-agent", "task": "summarise yesterday's failed checks for " + tenant}),
			ev("agent.messages", conv, "TaskAccepted", map[string]any{"from": "sql-agent", "to": "planner", "eta_seconds": rng.IntN(30)}),
		}
	}
}

// demoSummary is what the demo prints at the end.
type demoSummary struct {
	topics     []topicSummary
	sourceRows int64
	deadLetter int64
	p50, p99   time.Duration
}

type topicSummary struct {
	name     string
	table    string // its group's table; "" for its own
	events   int64
	versions int64 // the last version of the table that holds it
}

func (s demoSummary) print(out io.Writer, dir string, took time.Duration) {
	fmt.Fprintf(out, "\nverified: %d source rows, each exactly once in its topic, in source commit order (%.1fs)\n\n", s.sourceRows, took.Seconds())
	sort.Slice(s.topics, func(i, j int) bool { return s.topics[i].name < s.topics[j].name })
	grouped := slices.ContainsFunc(s.topics, func(t topicSummary) bool { return t.table != "" })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if grouped {
		fmt.Fprintln(tw, "TOPIC\tTABLE\tEVENTS\tDELTA VERSION")
	} else {
		fmt.Fprintln(tw, "TOPIC\tEVENTS\tDELTA VERSION")
	}
	for _, t := range s.topics {
		if grouped {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", t.name, cmp.Or(t.table, t.name), t.events, t.versions)
		} else {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", t.name, t.events, t.versions)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\nend-to-end latency (source commit -> Delta commit): p50 %v, p99 %v\n", s.p50.Round(time.Millisecond), s.p99.Round(time.Millisecond))
	fmt.Fprintf(out, "tables: %s/<topic>   (poison rows in %s/_dead_letter: %d)\n", dir, dir, s.deadLetter)
	if i := slices.IndexFunc(s.topics, func(t topicSummary) bool { return t.table == "" }); i >= 0 {
		fmt.Fprintf(out, "read one: %s tail %s/%s | head\n", selfName(), dir, s.topics[i].name)
	}
	if i := slices.IndexFunc(s.topics, func(t topicSummary) bool { return t.table != "" }); i >= 0 {
		t := s.topics[i]
		fmt.Fprintf(out, "grouped topics share their group's table (%s/%s for %s): %s tail --store file://%s --topic %s reads one\n",
			dir, t.table, t.name, selfName(), dir, t.name)
	}
}

// selfName is how the user invoked this binary, for copy-pasteable hints.
func selfName() string {
	if len(os.Args) > 0 && strings.Contains(os.Args[0], "/") {
		return os.Args[0]
	}
	return "relay"
}
