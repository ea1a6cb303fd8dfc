package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/txlog"
)

// Transaction records (package txlog; Config.TransactionRecords): the
// session counts each source transaction's rows by the table they go to,
// whether the batch takes them or the table already holds them (a
// replay), and at its commit adds a record to the open batch when the
// _transactions table does not hold it yet (commit LSN above the txn
// version of this appId there). A batch's records go with it to the
// committer, which commits them after every topic commit of the batch
// returned and before the durable position moves: so a record is seen
// only once its events are, and a crash before it is replayed. Records
// whose transaction a carried table still holds move to the next batch
// with the carried rows (splitRecords).
//
// A transaction with a row the relay drops for a hold has no record in
// this session, nor does any after it: the acknowledged position stays at
// the hold, the next session reads them again, and the records stay in
// commit order (the txn version only grows).

// txTally is the current source transaction's rows by table.
type txTally struct {
	commit pglogrepl.LSN // 0: no row counted yet
	xid    int64
	counts []txlog.Count
	total  int64 // the sum of counts
	held   bool
	json   []byte // scratch of the record's topics (txlog.AppendTopics)
	// lastBatch is how many records the last batch handed over held.
	lastBatch int
}

// count adds a row of the transaction of row to topic's count.
func (s *session) count(row *decoding.Row, topic string) {
	if !s.r.cfg.TransactionRecords {
		return
	}
	t := &s.tally
	if t.commit != row.CommitLSN {
		*t = txTally{commit: row.CommitLSN, xid: int64(row.Xid), counts: t.counts[:0], json: t.json, lastBatch: t.lastBatch}
	}
	t.total++
	for i := range t.counts {
		if t.counts[i].Topic == topic {
			t.counts[i].N++
			return
		}
	}
	t.counts = append(t.counts, txlog.Count{Topic: s.intern(topic), N: 1})
}

// intern returns the session's copy of topic (which may alias the receive
// buffer): one allocation per topic name, not per transaction. Names are
// bounded: at most maxInterned are kept, then each is copied.
func (s *session) intern(topic string) string {
	if n, ok := s.names[topic]; ok {
		return n
	}
	n := strings.Clone(topic)
	if len(s.names) < maxInterned {
		if s.names == nil {
			s.names = map[string]string{}
		}
		s.names[n] = n
	}
	return n
}

// maxInterned bounds the topic names a session keeps: names come from rows
// anyone can write.
const maxInterned = 10_000

// countHeld marks the transaction of row as dropped in part by a hold.
func (s *session) countHeld(row *decoding.Row) {
	if !s.r.cfg.TransactionRecords {
		return
	}
	s.count(row, "")
	t := &s.tally
	if last := &t.counts[len(t.counts)-1]; last.Topic == "" {
		if last.N--; last.N == 0 {
			t.counts = t.counts[:len(t.counts)-1]
		}
		t.total--
	}
	t.held = true
}

// counted is the number of rows counted in the transaction of row.
func (s *session) counted(row *decoding.Row) int64 {
	if s.tally.commit != row.CommitLSN {
		return 0
	}
	return s.tally.total
}

// endTx turns the tally of the committed transaction m into a record of
// the open batch, when it needs one.
func (s *session) endTx(ctx context.Context, m *decoding.Commit) error {
	t := &s.tally
	if !s.r.cfg.TransactionRecords || t.commit != m.CommitLSN {
		return nil
	}
	defer func() { t.commit = 0 }()
	if t.held {
		s.recordsOff = true
	}
	if s.recordsOff || len(t.counts) == 0 {
		return nil
	}
	if !s.txPosRead {
		pos, err := txlog.NewWriter(s.r.store, s.r.id.AppID).Position(ctx)
		if err != nil {
			return fmt.Errorf("read the transaction records' position: %w", err)
		}
		s.txPos, s.txPosRead = pos, true
	}
	if int64(m.CommitLSN) <= s.txPos {
		return nil // recorded before a restart
	}
	t.json = txlog.AppendTopics(t.json[:0], t.counts)
	if s.cur.records == nil {
		// As many as the last batch held: a backlog of single-row
		// transactions grew each batch's slice from nothing.
		s.cur.records = make([]txlog.Entry, 0, max(t.lastBatch, 16))
	}
	s.cur.records = append(s.cur.records, txlog.Entry{Xid: t.xid, CommitLSN: int64(m.CommitLSN), EndLSN: int64(m.EndLSN),
		CommitTime: m.CommitTime.UnixMicro(), Events: t.total, Topics: string(t.json)})
	return nil
}

// splitRecords keeps in b the records of transactions it acknowledges and
// moves the others (their rows of a carried table are in next) to next.
func (s *session) splitRecords(b, next *batch) {
	s.tally.lastBatch = len(b.records)
	ack := int64(b.ackLSN())
	for i, r := range b.records {
		if r.EndLSN > ack {
			next.records = append(append([]txlog.Entry(nil), b.records[i:]...), next.records...)
			b.records = b.records[:i]
			return
		}
	}
}

// DefaultRecordsInterval is the shortest time between two commits of the
// transaction records (Config.RecordsInterval). Each commit adds a file
// the writer keeps in memory (a tombstone once maintenance compacts it),
// so a records commit per batch would grow the relay's memory with the
// batch rate; at most one a second, the acknowledgement waits up to a
// second more, the events' visibility not at all.
const DefaultRecordsInterval = time.Second

func (c *committer) recordsInterval() time.Duration {
	switch d := c.r.cfg.RecordsInterval; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultRecordsInterval
	default:
		return d
	}
}

// holdRecords decides whether b's records wait for the next records
// commit: when records are held already, or when the last records commit
// was less than the interval ago. Held, they keep b's acknowledgement
// back (and b pending, so the session does not acknowledge past it from a
// keepalive) until flushRecords commits them: a crash before that replays
// their transactions, whose events the topics skip and whose records are
// made again.
func (c *committer) holdRecords(b *batch) bool {
	if len(c.held) == 0 && (len(b.records) == 0 || time.Since(c.recordsAt) >= c.recordsInterval()) {
		return false
	}
	c.held = append(c.held, b.records...)
	c.heldAck = max(c.heldAck, b.ackLSN())
	c.heldBatches++
	return true
}

// flushRecords commits the held records, then acknowledges the batches
// they held back.
func (c *committer) flushRecords(ctx context.Context) {
	if c.heldBatches == 0 {
		return
	}
	if c.failed() == nil {
		if err := c.commitRecords(ctx, c.held); err != nil {
			c.fail(err)
		} else {
			c.advance(c.heldAck)
		}
	}
	c.pending.Add(-c.heldBatches)
	c.held, c.heldBatches = c.held[:0], 0
	c.signal(true)
}

// commitRecords commits transaction records (their batches' topic commits
// all returned).
func (c *committer) commitRecords(ctx context.Context, recs []txlog.Entry) error {
	if len(recs) == 0 {
		return nil
	}
	if c.txw == nil {
		c.txw = txlog.NewWriter(c.r.store, c.r.id.AppID)
	}
	c.recordsAt = time.Now()
	if err := c.txw.Commit(ctx, recs); err != nil {
		if errors.Is(err, txlog.ErrFenced) {
			return fatalError{fmt.Errorf("another relay of this source (appId %q) already recorded transactions up to LSN %s; this instance is a zombie and stops: %w",
				c.r.id.AppID, pglogrepl.LSN(recs[len(recs)-1].CommitLSN), err)}
		}
		return err
	}
	c.r.metrics.transactionsRecorded(len(recs))
	return nil
}

// replayDest is the table an event the topic already holds went to when it
// was first streamed, for its transaction's record: the dead-letter table
// when its contract or its personal data refuse it (as routeEvent decides),
// "" when its topic would hold on it.
func (s *session) replayDest(ctx context.Context, ev *outbox.Event) (string, error) {
	if c := s.r.Contracts; c != nil {
		v, err := c.Judge(ctx, ev)
		if err != nil {
			return "", fmt.Errorf("check event %s of topic %q against its contract: %w", ev.ID, ev.Topic, err)
		}
		if !v.Passes() {
			if v.Hold {
				return "", nil
			}
			return outbox.DeadLetterTopic, nil
		}
	}
	if p := s.r.Protector; p != nil {
		cp := *ev
		dl, err := p.Event(ctx, &cp, &s.piiScratch)
		if err != nil {
			return "", fmt.Errorf("personal data of an event of topic %q (id %s): %w", ev.Topic, ev.ID, err)
		}
		if dl != nil {
			return outbox.DeadLetterTopic, nil
		}
	}
	return ev.Topic, nil
}

// countReplayed counts an event its topic already holds.
func (s *session) countReplayed(ctx context.Context, row *decoding.Row, ev *outbox.Event) error {
	if !s.r.cfg.TransactionRecords || s.recordsOff || (s.txPosRead && int64(row.CommitLSN) <= s.txPos) {
		return nil
	}
	dest, err := s.replayDest(ctx, ev)
	if err != nil {
		return err
	}
	if dest == "" {
		s.countHeld(row)
		return nil
	}
	s.count(row, dest)
	return nil
}
