package bench

import (
	"context"
	"fmt"
	"os"
)

// startupRuns is how many times each tool is started per round.
const startupRuns = 5

// startup times a start: `relay run --stop-at` and `pg_recvlogical
// --endpos` each relaying one new event from a slot that exists, from
// exec to exit, so the figure is what it takes to start the process,
// connect, reach the stream and stop (the relay also opens its table,
// commits the event and acknowledges it). Rounds*startupRuns starts of
// each, in turn, which goes first alternating, a new event before each
// pair; the figures are the medians of wall and CPU seconds.
//
// No walsender is watched meanwhile: the watch's own connection (a backend
// started beside the measured one) and its slot queries every 10 ms until
// the walsender appears took the CPU of the two cores from the start they
// timed, the more so the longer the start.
func (b *bench) startup(ctx context.Context) error {
	b.unwatched = true
	defer func() { b.unwatched = false }()
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	store := b.storeDir("startup")
	defer os.RemoveAll(store)
	if err := b.createRelaySlot(ctx, dsn, store, "deltabus_startup"); err != nil {
		return err
	}
	if err := execSQL(ctx, dsn, `SELECT pg_create_logical_replication_slot('ref_startup', 'pgoutput')`); err != nil {
		return err
	}
	var rels, refs []drained
	var ratios []float64
	for i := range max(b.o.Rounds, 1) * startupRuns {
		if err := execSQL(ctx, dsn, insertRowsSQL, i, i); err != nil {
			return err
		}
		end, err := walInsertLSN(ctx, dsn)
		if err != nil {
			return err
		}
		v := drainVariant{slot: "deltabus_startup", ref: "ref_startup", store: store}
		r, err := b.drainRound(ctx, dsn, end, v, i%2 == 1)
		if err != nil {
			return err
		}
		ref, rel := r.ref, r.rel
		rels, refs, ratios = append(rels, rel), append(refs, ref), append(ratios, rel.secs/ref.secs)
	}
	rel, ref := medianDrain(rels), medianDrain(refs)
	fmt.Fprintf(b.out, "# startup: %d starts each, relay and pg_recvlogical in turn; wall and CPU seconds from exec to exit, one event relayed\n", len(rels))
	fmt.Fprintf(b.out, "startup_wall relay=%.3fs reference=%.3fs ratio=%.2f\n", rel.secs, ref.secs, Median(ratios))
	b.linef("startup_cpu", rel.cpu*1e3, ref.cpu*1e3, "ms")
	fmt.Fprintf(b.out, "startup_peak_rss relay=%.0fMiB\n", rel.rss)
	return nil
}
