package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// memoryGoalMiB is what the relay process may hold at its peak, whatever
// the shape (issue 30; the release before last held 180 MiB on the
// many-topics shape).
const memoryGoalMiB = 200

// memoryShape is a load the relay drains from its slot, its peak RSS
// measured: the kernel's high-water mark of the `relay run` process
// itself (ru_maxrss of the exited child, which is its VmHWM), not a test
// binary's heap.
type memoryShape struct {
	name string
	sql  []statement // each one source transaction, run in order
	rows int
}

type statement struct {
	q    string
	args []any
}

// memoryShapes are the shapes of the memory run: one transaction of big
// rows, a backlog of big in 1000-row transactions, two transactions of
// 1.1 KB events over 300 and then 1,000 topics (the shape that peaked at
// 317-382 MiB), and one transaction over 10,000 topics.
func memoryShapes(big int) []memoryShape {
	backlog := make([]statement, 0, big/1000+1)
	for i := 0; i < big; i += 1000 {
		backlog = append(backlog, statement{insertRowsSQL, []any{i, min(i+999, big-1)}})
	}
	spread := func(prefix string, topics, rows int) statement {
		return statement{`INSERT INTO outbox (topic, key, type, payload)
	SELECT $1::text || (g % $2::int), 'k' || g, 'Created', jsonb_build_object('data', repeat('x', 1050))
	FROM generate_series(1, $3::int) g`, []any{prefix, topics, rows}}
	}
	return []memoryShape{
		{name: "one_tx", rows: big, sql: []statement{{insertRowsSQL, []any{0, big - 1}}}},
		{name: "backlog", rows: big, sql: backlog},
		{name: "topics_300_then_1000", rows: 400_000, sql: []statement{spread("t", 300, 300_000), spread("u", 1000, 100_000)}},
		{name: "topics_10000", rows: 100_000, sql: []statement{spread("m", 10_000, 100_000)}},
	}
}

// memory drains each shape with a relay started after the load (so a
// backlog, as after an outage) and reports its peak RSS against the goal.
func (b *bench) memory(ctx context.Context) error {
	want := map[string]bool{}
	for _, n := range strings.Split(b.o.MemoryShapes, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	for _, sh := range memoryShapes(b.o.Big) {
		if len(want) > 0 && !want[sh.name] {
			continue
		}
		if err := b.memoryShape(ctx, sh); err != nil {
			return fmt.Errorf("%s: %w", sh.name, err)
		}
	}
	return nil
}

func (b *bench) memoryShape(ctx context.Context, sh memoryShape) error {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	store, where := b.storeDir("memory-"+sh.name), "local"
	defer os.RemoveAll(store)
	if b.o.MemoryStore != "" {
		store, where = fmt.Sprintf("%s/memory-%s-%d-%d", strings.TrimSuffix(b.o.MemoryStore, "/"), sh.name, os.Getpid(), b.n), "s3"
	}
	if err := b.createRelaySlot(ctx, dsn, store, "deltabus"); err != nil {
		return err
	}
	t0 := time.Now()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	for _, q := range sh.sql {
		if _, err := conn.Exec(ctx, q.q, q.args...); err != nil {
			conn.Close(ctx)
			return err
		}
	}
	conn.Close(ctx)
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# memory %s (%s): %d rows in %d transactions loaded in %.1fs\n", sh.name, where, sh.rows, len(sh.sql), time.Since(t0).Seconds())
	d, err := b.relayDrain(ctx, dsn, store, "deltabus", end)
	if err != nil {
		return err
	}
	name := "memory_" + sh.name
	if where != "local" {
		name += "_" + where
	}
	b.res.Memory = append(b.res.Memory, MemoryResult{Name: name, Store: where, Rows: sh.rows, Transactions: len(sh.sql),
		Seconds: d.secs, PeakRSS: d.rss})
	fmt.Fprintf(b.out, "# memory %s (%s): drained in %.1fs, relay CPU %.1fs\n", sh.name, where, d.secs, d.cpu)
	fmt.Fprintf(b.out, "%s_peak_rss relay=%.0fMiB reference=%dMiB ratio=%.2f\n", name, d.rss, memoryGoalMiB, d.rss/memoryGoalMiB)
	return nil
}
