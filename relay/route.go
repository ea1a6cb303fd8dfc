package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
)

// route turns a row into an event of its topic, a dead letter, or nothing
// (a DELETE; a transaction the topic already holds; a held topic).
func (s *session) route(ctx context.Context, row *decoding.Row) error {
	isEvent, dl, err := s.r.router.RouteView(row, &s.view)
	if err != nil {
		return fmt.Errorf("route row of %s.%s: %w", row.Relation.Namespace, row.Relation.Name, err)
	}
	switch {
	case isEvent:
		return s.routeEvent(ctx, row, &s.view.Event)
	case dl != nil:
		return s.deadLetter(ctx, row, dl)
	}
	return nil // DELETE of an outbox row (clean-up): ignored
}

func (s *session) routeEvent(ctx context.Context, row *decoding.Row, ev *outbox.Event) error {
	if s.holds.drops(ev.Topic, row.CommitLSN) {
		s.countHeld(row)
		s.r.metrics.skipped() // re-read once the hold is lifted
		return nil
	}
	t, err := s.topics.get(ctx, ev.Topic)
	if err != nil {
		return err
	}
	switch t.Status {
	case sink.Missing, sink.Incompatible:
		if held, err := s.holdTopic(ctx, t, row.CommitLSN); held || err != nil {
			s.countHeld(row)
			return err
		}
	case sink.Foreign:
		return s.deadLetter(ctx, row, outbox.Refused(ev, fmt.Sprintf("topic %q: %s", ev.Topic, t.Reason), row.Relation.Namespace+"."+row.Relation.Name))
	}
	if int64(row.CommitLSN) <= t.through || t.seam.Covers(row.CommitLSN, row.Xid) {
		s.r.metrics.skipped()
		return s.countReplayed(ctx, row, ev)
	}
	if int64(row.CommitLSN) <= s.deadThrough { // replayed: was it dead-lettered? (replay.go)
		if dead, err := s.deadLettered(ctx, row); dead || err != nil {
			return err
		}
	}
	if s.r.Contracts != nil {
		before := s.counted(row)
		if handled, err := s.checkContract(ctx, row, ev, t); handled || err != nil {
			if err == nil && s.counted(row) == before {
				s.countHeld(row) // held, not dead-lettered
			}
			return err
		}
	}
	if p := s.r.Protector; p != nil && !t.unmarked(p, ev.Type) {
		gen, unmarked := p.Unmarked()
		dl, err := p.Event(ctx, ev, &s.piiScratch) // ev.Payload may alias it until the next event: Append copies it
		if err != nil {
			return fmt.Errorf("personal data of an event of topic %q (id %s) cannot be encrypted, so it waits: %w", ev.Topic, ev.ID, err)
		}
		if dl != nil {
			dl.SourceTable = row.Relation.Namespace + "." + row.Relation.Name
			return s.deadLetter(ctx, row, dl)
		}
		if unmarked {
			t.noteUnmarked(p, ev.Type, gen)
		}
	}
	t.lastTx = row.CommitLSN
	s.breakerAccept(t, row)
	s.count(row, ev.Topic)
	return s.cur.addEvent(s.pace, ev, t.Table)
}

func (s *session) deadLetter(ctx context.Context, row *decoding.Row, dl *outbox.DeadLetter) error {
	if s.holds.drops(outbox.DeadLetterTopic, row.CommitLSN) { // a breaker holds (breaker.go)
		s.countHeld(row)
		s.r.metrics.skipped()
		return nil
	}
	t, err := s.topics.get(ctx, outbox.DeadLetterTopic)
	if err != nil {
		return err
	}
	if int64(row.CommitLSN) <= t.through {
		s.count(row, outbox.DeadLetterTopic)
		return nil
	}
	if held, err := s.breakerRefuse(ctx, row, dl); held || err != nil {
		return err
	}
	s.count(row, outbox.DeadLetterTopic)
	if p := s.r.Protector; p != nil {
		if err := p.DeadLetter(ctx, dl); err != nil {
			return fmt.Errorf("redact a dead letter of topic %q: %w", dl.Topic, err)
		}
	}
	if n, ok := s.deadLog.allow(100 * time.Millisecond); ok {
		s.r.log.Warn("outbox row sent to dead letter topic", "reason", dl.Reason, "table", dl.SourceTable,
			"event_id", dl.ID, "commit_lsn", pglogrepl.LSN(row.CommitLSN), "seq", row.Seq, "not_logged_since_last", n)
	}
	s.r.metrics.deadLetter()
	s.r.breaker.lastDLTx = row.CommitLSN
	return s.cur.addDeadLetter(s.pace, dl)
}
