package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

// verify compares every topic table with the outbox, row by row.
func (d *demo) verify(ctx context.Context) (demoSummary, error) {
	var sum demoSummary
	conn, err := pgx.Connect(ctx, d.dsn)
	if err != nil {
		return sum, err
	}
	defer conn.Close(ctx)
	rep, err := verify.Compare(ctx, conn, "public.outbox", d.store)
	if err != nil {
		return sum, fmt.Errorf("verify: %w", err)
	}
	if !rep.OK() {
		return sum, fmt.Errorf("verification FAILED:\n  %s", strings.Join(rep.Problems, "\n  "))
	}
	sum.sourceRows = rep.SourceRows
	groups, err := catalog.ListGroups(ctx, d.store)
	if err != nil {
		return sum, fmt.Errorf("verify: %w", err)
	}
	for name, rows := range rep.Topics {
		if name == outbox.DeadLetterTopic {
			sum.deadLetter = int64(len(rows))
			continue
		}
		var v int64
		if len(rows) > 0 {
			v = rows[len(rows)-1].Version
		}
		p, err := catalog.ReadPlacement(ctx, d.store, name, groups)
		if err != nil {
			return sum, fmt.Errorf("verify: %w", err)
		}
		ts := topicSummary{name: name, events: int64(len(rows)), versions: v}
		if p.Shared() {
			ts.table = p.Table
		}
		sum.topics = append(sum.topics, ts)
	}
	sum.p50 = verify.Percentile(rep.Latencies, 50)
	sum.p99 = verify.Percentile(rep.Latencies, 99)
	return sum, nil
}

// relayedCount is the rows of every table that holds topics (their own,
// their groups'), from the snapshots' file stats: each table is counted
// once, whatever the number of its topics.
func (d *demo) relayedCount(ctx context.Context) int64 {
	tables, err := catalog.ListTables(ctx, d.store)
	if err != nil {
		return 0
	}
	var n int64
	for _, table := range tables {
		n += tableRecords(ctx, d.store, table)
	}
	return n
}

// tableRecords is a table's row count from its snapshot's file stats.
func tableRecords(ctx context.Context, root storage.Store, table string) int64 {
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, table), -1)
	if err != nil {
		return 0
	}
	return snap.StatsRecords()
}
