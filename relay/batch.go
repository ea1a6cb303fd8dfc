package relay

import (
	"time"

	"github.com/jackc/pglogrepl"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/txlog"
)

// batch is a run of whole source transactions, in commit order, on its way
// to one commit per table (a topic's own, or a topic group's, which one
// commit serves for all its topics). It never ends inside a transaction: its last
// transaction's commit LSN is the position every topic commit of the batch
// records, and its end LSN is what may be acknowledged once every topic
// commit is durable. Rows go to the sink's batch as they arrive.
//
// A table whose commits are paced (pacer) may be carried: its rows move,
// uncommitted, to the next batch, and the batch acknowledges no further
// than the position before the carried rows' first transaction (ackCap).
type batch struct {
	sb        sink.Batch
	seq       int64
	shares    map[string]*share // by table
	order     []string          // tables in first-seen order, for stable logs
	events    int
	bytes     int64
	txs       int
	openedAt  time.Time     // first event (or first transaction) of the batch
	dueAt     time.Time     // earliest time one of its tables may be committed (pacer.readyAt)
	prevEnd   pglogrepl.LSN // every transaction at or before it is in an earlier batch
	ackCap    pglogrepl.LSN // when capped: tables were carried out, acknowledge no further
	capped    bool
	lastLSN   pglogrepl.LSN // commit LSN of the last complete transaction
	endLSN    pglogrepl.LSN // end LSN of the last complete transaction
	firstTime time.Time     // commit time of the first transaction (for latency metrics)
	lastTime  time.Time     // commit time of the last transaction
	trace     batchTrace    // its span and producer links (trace.go)
	records   []txlog.Entry // its transactions' records (txrecords.go)
	startedAt time.Time     // when the committer began writing its files
	filedAt   time.Time     // when its data files were written
	loggingAt time.Time     // when the logs stage began its log entries
}

// share is one table's rows in a batch.
type share struct {
	since  time.Time     // when its oldest row arrived
	ackCap pglogrepl.LSN // acknowledge no further while these rows are uncommitted
	events int
	bytes  int64
}

func newBatch(s sink.Sink, seq int64, prevEnd pglogrepl.LSN, tr trace.Tracer) *batch {
	return &batch{sb: s.NewBatch(), seq: seq, shares: make(map[string]*share), prevEnd: prevEnd,
		trace: batchTrace{tracer: tr}}
}

// empty reports whether the batch holds nothing: no transaction and no
// carried rows.
func (b *batch) empty() bool { return b.txs == 0 && len(b.order) == 0 }

func (b *batch) opened(p *pacer, table string, size int) {
	sh := b.shares[table]
	if sh == nil {
		now := time.Now()
		sh = &share{since: now, ackCap: b.prevEnd}
		b.adopt(table, sh, p.readyAt(table, now))
	}
	if b.openedAt.IsZero() {
		b.openedAt = sh.since
	}
	sh.events++
	sh.bytes += int64(size)
	b.events++
	b.bytes += int64(size)
}

// adopt adds a table's share (new, or carried from the previous batch).
func (b *batch) adopt(table string, sh *share, readyAt time.Time) {
	b.shares[table] = sh
	b.order = append(b.order, table)
	if b.dueAt.IsZero() || readyAt.Before(b.dueAt) {
		b.dueAt = readyAt
	}
}

// addEvent adds ev to the share of table, the table that holds its topic.
func (b *batch) addEvent(p *pacer, ev *outbox.Event, table string) error {
	if err := b.sb.Append(ev); err != nil {
		return err
	}
	b.opened(p, table, len(ev.Payload))
	b.trace.event(ev, table, b.openedAt)
	return nil
}

func (b *batch) addDeadLetter(p *pacer, dl *outbox.DeadLetter) error {
	if err := b.sb.AppendDeadLetter(dl); err != nil {
		return err
	}
	b.opened(p, outbox.DeadLetterTopic, len(dl.RawRow))
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

// wakeAt is when the batch becomes due by time (not by size).
func (b *batch) wakeAt(delay time.Duration) time.Time {
	if len(b.order) == 0 {
		return b.openedAt.Add(delay)
	}
	return b.dueAt
}

// ackLSN is the position the relay may acknowledge once the batch's table
// commits are durable.
func (b *batch) ackLSN() pglogrepl.LSN {
	if b.capped && b.ackCap < b.endLSN {
		return b.ackCap
	}
	return b.endLSN
}

// abort discards the batch's rows.
func (b *batch) abort() { b.sb.Abort(); b.trace.abort(b) }
