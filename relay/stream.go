package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/topic"
)

// session is one replication connection's life: it streams from the slot's
// confirmed position, routes rows into batches and hands complete batches to
// the committer. Any error ends the session; Relay.Run decides whether to
// start a new one.
type session struct {
	r        *Relay
	conn     *pgconn.PgConn
	dec      *decoding.Decoder
	tables   *tables
	com      *committer
	fileOpts topic.FileOptions

	cur        *batch
	batchSeq   int64
	received   pglogrepl.LSN
	lastStatus time.Time

	// Topic rebuilds (watermark.go).
	pauses      map[string]*pause
	watermarks  []pendingWatermark
	pauseWarned time.Time
}

// stream runs the receive loop until stop is closed (graceful: the current
// batch is committed and acknowledged) or an error occurs.
func (s *session) stream(ctx context.Context, stop <-chan struct{}) error {
	var stopDeadline time.Time
	for {
		if err := s.com.failed(); err != nil {
			return err
		}
		if stopDeadline.IsZero() {
			select {
			case <-stop:
				stopDeadline = time.Now().Add(s.r.cfg.ShutdownTimeout)
			default:
			}
		}
		if !stopDeadline.IsZero() {
			if !s.dec.InTransaction() {
				return s.finish(ctx)
			}
			if time.Now().After(stopDeadline) {
				return errors.New("shutdown timeout inside a source transaction: batch discarded, it will be re-read on the next start")
			}
		}
		if err := s.maybeHandoff(ctx, false); err != nil {
			return err
		}
		if time.Since(s.lastStatus) >= s.r.cfg.StatusInterval {
			if err := s.sendStatus(ctx); err != nil {
				return err
			}
			s.warnPaused()
		}
		if err := s.receiveOne(ctx); err != nil {
			return err
		}
	}
}

// deadline is when the receive loop must wake up even without a message.
func (s *session) deadline() time.Time {
	d := s.lastStatus.Add(s.r.cfg.StatusInterval)
	if s.cur.txs > 0 {
		ready := s.cur.openedAt.Add(s.r.cfg.BatchMaxDelay)
		if s.batchFull() || time.Now().After(ready) {
			ready = time.Now().Add(2 * time.Millisecond) // waiting for the committer
		}
		if ready.Before(d) {
			d = ready
		}
	}
	return d
}

func (s *session) receiveOne(ctx context.Context) error {
	rctx, cancel := context.WithDeadline(ctx, s.deadline())
	msg, err := s.conn.ReceiveMessage(rctx)
	cancel()
	if err != nil {
		if pgconn.Timeout(err) && ctx.Err() == nil {
			return nil
		}
		return fmt.Errorf("receive from replication stream: %w", err)
	}
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return s.handleCopyData(ctx, m.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(m))
	default:
		return nil
	}
}

func (s *session) handleCopyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("parse keepalive: %w", err)
		}
		s.noteReceived(pkm.ServerWALEnd)
		if s.idle() {
			// Everything the server sent before ServerWALEnd has been handled
			// and is durable: moving the slot on keeps WAL from piling up
			// while other tables are busy and the outbox is quiet.
			s.com.advance(pkm.ServerWALEnd)
		}
		if pkm.ReplyRequested {
			return s.sendStatus(ctx)
		}
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("parse XLogData: %w", err)
		}
		s.noteReceived(xld.WALStart + pglogrepl.LSN(len(xld.WALData)))
		msg, err := s.dec.Decode(xld.WALData)
		if err != nil {
			return fmt.Errorf("decode pgoutput at %s: %w", xld.WALStart, err)
		}
		return s.handle(ctx, msg)
	}
	return nil
}

func (s *session) noteReceived(lsn pglogrepl.LSN) {
	if lsn > s.received {
		s.received = lsn
		s.r.metrics.received(uint64(lsn))
	}
}

// idle: no open transaction, nothing batched, nothing being committed.
func (s *session) idle() bool {
	return !s.dec.InTransaction() && s.cur.txs == 0 && s.com.idle()
}

func (s *session) handle(ctx context.Context, msg decoding.Message) error {
	switch m := msg.(type) {
	case *decoding.Row:
		return s.route(ctx, m)
	case *decoding.Commit:
		s.cur.commitTx(m.CommitLSN, m.EndLSN, m.CommitTime)
		if len(s.watermarks) > 0 {
			return s.applyWatermarks(ctx)
		}
		return s.maybeHandoff(ctx, false)
	case *decoding.LogicalMessage:
		s.noteMessage(m)
	case *decoding.Truncate:
		s.r.log.Warn("TRUNCATE of an outbox table: nothing to relay (events already streamed stay in their topics)",
			"tables", len(m.Relations), "commit_lsn", m.CommitLSN)
	}
	return nil // Begin, Truncate, other messages: nothing to batch
}

func (s *session) route(ctx context.Context, row *decoding.Row) error {
	ev, dl, err := s.r.router.Route(row)
	if err != nil {
		return fmt.Errorf("route row of %s.%s: %w", row.Relation.Namespace, row.Relation.Name, err)
	}
	switch {
	case ev != nil:
		if s.pauses[ev.Topic] != nil {
			s.r.metrics.skipped() // re-read once the topic's rebuild is committed
			return nil
		}
		t, err := s.tables.get(ctx, ev.Topic)
		if err != nil {
			return err
		}
		if t.missing {
			if held, err := s.holdMissing(ctx, t, row.CommitLSN); held || err != nil {
				return err
			}
		}
		if t.unusable != "" {
			return s.deadLetter(ctx, row, &outbox.DeadLetter{Event: *ev, Reason: fmt.Sprintf("topic %q: %s", ev.Topic, t.unusable),
				SourceTable: row.Relation.Namespace + "." + row.Relation.Name, RawRow: rawEvent(ev)})
		}
		if int64(row.CommitLSN) <= t.skipUpTo || t.seam.covers(row.CommitLSN, row.Xid) {
			s.r.metrics.skipped()
			return nil
		}
		s.opened()
		return s.cur.addEvent(t, s.fileOpts, ev)
	case dl != nil:
		return s.deadLetter(ctx, row, dl)
	}
	return nil // DELETE of an outbox row (clean-up): ignored
}

func (s *session) deadLetter(ctx context.Context, row *decoding.Row, dl *outbox.DeadLetter) error {
	t, err := s.tables.get(ctx, outbox.DeadLetterTopic)
	if err != nil {
		return err
	}
	if int64(row.CommitLSN) <= t.skipUpTo {
		return nil
	}
	s.r.log.Warn("outbox row sent to dead letter topic", "reason", dl.Reason, "table", dl.SourceTable,
		"event_id", dl.ID, "commit_lsn", row.CommitLSN, "seq", row.Seq)
	s.r.metrics.deadLetter()
	s.opened()
	return s.cur.addDeadLetter(t, s.fileOpts, dl)
}

// rawEvent renders a routed event as the raw_row JSON of a dead letter.
func rawEvent(ev *outbox.Event) string {
	b, _ := json.Marshal(map[string]any{"id": ev.ID, "topic": ev.Topic, "key": ev.Key, "type": ev.Type,
		"schema_version": ev.SchemaVersion, "payload": json.RawMessage(ev.Payload), "headers": ev.Headers,
		"occurred_at": ev.OccurredAt})
	return string(b)
}

func (s *session) opened() {
	if s.cur.openedAt.IsZero() {
		s.cur.openedAt = time.Now()
	}
}

func (s *session) batchFull() bool {
	c := s.r.cfg
	return s.cur.events >= c.BatchMaxEvents || s.cur.bytes >= c.BatchMaxBytes
}

// maybeHandoff gives the current batch to the committer when it is due and
// ends on a transaction boundary. While the committer is busy the batch keeps
// growing (bounded memory: rows stream into files); past four times the
// limits, or when forced, it waits for the committer.
func (s *session) maybeHandoff(ctx context.Context, force bool) error {
	if s.dec.InTransaction() || s.cur.txs == 0 {
		return nil
	}
	due := force || s.batchFull() || time.Since(s.cur.openedAt) >= s.r.cfg.BatchMaxDelay
	if !due {
		return nil
	}
	c := s.r.cfg
	mustWait := force || s.cur.events >= 4*c.BatchMaxEvents || s.cur.bytes >= 4*c.BatchMaxBytes
	for {
		if s.com.trySubmit(s.cur) {
			s.batchSeq++
			s.cur = newBatch(s.batchSeq)
			return nil
		}
		if err := s.com.failed(); err != nil {
			return err
		}
		if !mustWait {
			return nil
		}
		if time.Since(s.lastStatus) >= c.StatusInterval {
			if err := s.sendStatus(ctx); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// finish commits what is batched, waits for it, and acknowledges it.
func (s *session) finish(ctx context.Context) error {
	if err := s.maybeHandoff(ctx, true); err != nil {
		return err
	}
	close(s.com.in)
	<-s.com.done
	if err := s.com.failed(); err != nil {
		return err
	}
	return s.sendStatus(ctx)
}

func (s *session) sendStatus(ctx context.Context) error {
	durable := pglogrepl.LSN(s.com.durable.Load())
	if h := s.hold(); h != 0 && h < durable {
		durable = h // a paused topic must be able to re-read from its watermark
	}
	write := max(s.received, durable)
	err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: write, WALFlushPosition: durable, WALApplyPosition: durable, ClientTime: time.Now(),
	})
	if err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	s.lastStatus = time.Now()
	return nil
}
