package relay

import (
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/topic"
)

// batch is a run of whole source transactions, in commit order, on its way
// to one Delta commit per topic. It never ends inside a transaction: its
// last transaction's commit LSN is the txn version every topic commit of the
// batch records, and its end LSN is what may be acknowledged once every
// topic commit is durable.
type batch struct {
	seq       int64
	topics    map[string]*topicBatch
	order     []string // topics in first-seen order, for stable logs
	events    int
	bytes     int64
	txs       int
	openedAt  time.Time     // first event (or first transaction) of the batch
	lastLSN   pglogrepl.LSN // commit LSN of the last complete transaction
	endLSN    pglogrepl.LSN // end LSN of the last complete transaction
	firstTime time.Time     // commit time of the first transaction (for latency metrics)
	lastTime  time.Time     // commit time of the last transaction
}

// topicBatch is one topic's share of a batch: its rows stream into parquet
// files as they arrive, so memory stays bounded however large the batch.
type topicBatch struct {
	table  *topicTable
	writer *topic.FileWriter
	events int
}

func newBatch(seq int64) *batch {
	return &batch{seq: seq, topics: make(map[string]*topicBatch)}
}

func (b *batch) empty() bool { return b.events == 0 }

func (b *batch) topicFor(t *topicTable, opts topic.FileOptions) *topicBatch {
	tb := b.topics[t.name]
	if tb == nil {
		opts.DeadLetter = t.name == outbox.DeadLetterTopic
		tb = &topicBatch{table: t, writer: topic.NewFileWriter(t.store, opts)}
		b.topics[t.name] = tb
		b.order = append(b.order, t.name)
	}
	return tb
}

func (b *batch) addEvent(t *topicTable, opts topic.FileOptions, ev *outbox.Event) error {
	tb := b.topicFor(t, opts)
	if err := tb.writer.Append(ev); err != nil {
		return err
	}
	b.count(tb, int64(len(ev.Payload)))
	return b.boundMemory()
}

func (b *batch) addDeadLetter(t *topicTable, opts topic.FileOptions, dl *outbox.DeadLetter) error {
	tb := b.topicFor(t, opts)
	if err := tb.writer.AppendDeadLetter(dl); err != nil {
		return err
	}
	b.count(tb, int64(len(dl.RawRow)))
	return b.boundMemory()
}

// pendingBudget bounds the rows a batch holds in memory across all its
// topics; above it the largest topic's rows are encoded into a row group
// (and spill to disk with the file). Memory therefore stays bounded
// whatever the transaction size and the number of topics.
const pendingBudget = 16 << 20

// boundMemory is cheap on the hot path: it looks at the writers only every
// 1024 events.
func (b *batch) boundMemory() error {
	if b.events&1023 != 0 {
		return nil
	}
	return topic.BoundPending(pendingBudget, func(yield func(*topic.FileWriter) bool) {
		for _, tb := range b.topics {
			if !yield(tb.writer) {
				return
			}
		}
	})
}

func (b *batch) count(tb *topicBatch, n int64) {
	tb.events++
	b.events++
	b.bytes += n
}

// commitTx records a complete source transaction.
func (b *batch) commitTx(commitLSN, endLSN pglogrepl.LSN, commitTime time.Time) {
	if b.txs == 0 {
		b.firstTime = commitTime
		if b.openedAt.IsZero() {
			b.openedAt = time.Now()
		}
	}
	b.txs++
	b.lastLSN, b.endLSN, b.lastTime = commitLSN, endLSN, commitTime
}

// abort discards every file written for the batch. Files already uploaded
// stay as unreferenced orphans, which readers never see and VACUUM removes.
func (b *batch) abort() {
	for _, tb := range b.topics {
		tb.writer.Abort()
	}
}
