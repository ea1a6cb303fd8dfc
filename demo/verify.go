package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

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
	for name, rows := range rep.Topics {
		if name == outbox.DeadLetterTopic {
			sum.deadLetter = int64(len(rows))
			continue
		}
		var v int64
		if len(rows) > 0 {
			v = rows[len(rows)-1].Version
		}
		sum.topics = append(sum.topics, topicSummary{name: name, events: int64(len(rows)), versions: v})
	}
	sum.p50 = verify.Percentile(rep.Latencies, 50)
	sum.p99 = verify.Percentile(rep.Latencies, 99)
	return sum, nil
}

// topicRecords is a topic's row count from its snapshot's file stats.
func topicRecords(ctx context.Context, root storage.Store, name string) int64 {
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, name), -1)
	if err != nil {
		return 0
	}
	return snap.StatsRecords()
}
