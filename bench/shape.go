package bench

import (
	"context"
	"fmt"
	"os"
	"time"
)

// shapeSQL inserts rows $1..$2 of ~1.1 KB payloads spread round-robin
// over $3 topics, in the statement's one transaction.
var shapeSQL = `INSERT INTO outbox (topic, key, type, payload)
	SELECT 'topic-' || (g % $3::int), 'k' || (g % 1000), 'Created',
		` + payloadSQL[:len(payloadSQL)-1] + `, 'pad', repeat('x', 880))
	FROM generate_series($1::bigint, $2::bigint) g`

// topicsShape is issue 30's memory shape, relayed by the real process: one
// transaction of 300,000 events of ~1.1 KB over 300 topics, then one of
// 100,000 over 1,000 topics. The figure is the relay process's peak RSS
// (getrusage's ru_maxrss of the child: its VmHWM when it exits), against
// the 200 MiB goal.
func (b *bench) topicsShape(ctx context.Context) error {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	store := b.storeDir("shape")
	defer os.RemoveAll(store)
	if err := b.createRelaySlot(ctx, dsn, store, "deltabus"); err != nil {
		return err
	}
	t0 := time.Now()
	if err := execSQL(ctx, dsn, shapeSQL, 0, 299_999, 300); err != nil {
		return err
	}
	if err := execSQL(ctx, dsn, shapeSQL, 300_000, 399_999, 1000); err != nil {
		return err
	}
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# topics_shape: 300,000 events over 300 topics, then 100,000 over 1,000, 1.1 KB each, in two transactions, loaded in %.1fs\n", time.Since(t0).Seconds())
	d, err := b.relayDrain(ctx, dsn, store, "deltabus", end)
	if err != nil {
		return err
	}
	b.res.TopicsShape = &BigTxResult{Rows: 400_000, RowsPerSec: 400_000 / d.secs, PeakRSS: d.rss}
	fmt.Fprintf(b.out, "topics_shape_rows_per_s relay=%.0fev/s reference=- ratio=-\n", 400_000/d.secs)
	fmt.Fprintf(b.out, "topics_shape_peak_rss relay=%.0fMiB reference=200MiB(goal) ratio=%.2f\n", d.rss, d.rss/200)
	return nil
}
