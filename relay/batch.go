package relay

import (
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
)

// batch is a run of whole source transactions, in commit order, on its way
// to one commit per topic. It never ends inside a transaction: its last
// transaction's commit LSN is the position every topic commit of the batch
// records, and its end LSN is what may be acknowledged once every topic
// commit is durable. Rows go to the sink's batch as they arrive.
type batch struct {
	sb        sink.Batch
	seq       int64
	topics    map[string]bool
	order     []string // topics in first-seen order, for stable logs
	events    int
	bytes     int64
	txs       int
	openedAt  time.Time     // first event (or first transaction) of the batch
	lastLSN   pglogrepl.LSN // commit LSN of the last complete transaction
	endLSN    pglogrepl.LSN // end LSN of the last complete transaction
	firstTime time.Time     // commit time of the first transaction (for latency metrics)
	lastTime  time.Time     // commit time of the last transaction
	trace     batchTrace    // its span and producer links (trace.go)
}

func newBatch(s sink.Sink, seq int64, tr trace.Tracer) *batch {
	return &batch{sb: s.NewBatch(), seq: seq, topics: make(map[string]bool), trace: batchTrace{tracer: tr}}
}

func (b *batch) opened(topic string, size int) {
	if !b.topics[topic] {
		b.topics[topic] = true
		b.order = append(b.order, topic)
	}
	if b.openedAt.IsZero() {
		b.openedAt = time.Now()
	}
	b.events++
	b.bytes += int64(size)
}

func (b *batch) addEvent(ev *outbox.Event) error {
	if err := b.sb.Append(ev); err != nil {
		return err
	}
	b.opened(ev.Topic, len(ev.Payload))
	b.trace.event(ev, b.openedAt)
	return nil
}

func (b *batch) addDeadLetter(dl *outbox.DeadLetter) error {
	if err := b.sb.AppendDeadLetter(dl); err != nil {
		return err
	}
	b.opened(outbox.DeadLetterTopic, len(dl.RawRow))
	return nil
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

// abort discards the batch's rows.
func (b *batch) abort() { b.sb.Abort(); b.trace.abort(b) }
