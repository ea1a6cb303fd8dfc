package relay

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
)

// hold is a topic whose events are dropped, with the acknowledged position
// kept at since so they are read again once the hold is lifted: a topic
// paused for a rebuild, or whose table is missing or was changed
// incompatibly (see "Holds" in package catalog).
type hold struct {
	id    string // the rebuild id, or catalog.HoldMissingTable / HoldIncompatibleTable
	since pglogrepl.LSN
}

type holds struct {
	m      map[string]*hold
	warned time.Time
}

// position is the highest position the relay may acknowledge: the oldest
// hold, or 0 when no topic is held.
func (h *holds) position() pglogrepl.LSN {
	var p pglogrepl.LSN
	for _, x := range h.m {
		if p == 0 || x.since < p {
			p = x.since
		}
	}
	return p
}

// drops reports whether a row of the topic committed at lsn is held. A
// circuit breaker's hold (breaker.go), restored when a session starts,
// holds from its position only: rows before it, replayed after a crash,
// are the topic's as usual.
func (h *holds) drops(topic string, lsn pglogrepl.LSN) bool {
	x := h.m[topic]
	return x != nil && (x.id != catalog.HoldDeadLetterRate || lsn >= x.since)
}

func (h *holds) add(topic, id string, since pglogrepl.LSN) *hold {
	x := h.m[topic]
	if x == nil {
		x = &hold{id: id, since: since}
		h.m[topic] = x
		h.warned = time.Now()
	}
	return x
}

// holdTopic holds a topic whose table is missing (recreating it empty would
// silently lose its history) or was changed by another writer so that the
// relay cannot append, at the commit LSN of its first event. A rebuild
// restores a missing table; an abort resolves the hold of a missing one,
// and events at or below the resolved position then go to a new table
// (held=false). An incompatible table stays held until it is moved away.
func (s *session) holdTopic(ctx context.Context, t *topicView, lsn pglogrepl.LSN) (held bool, err error) {
	st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, t.Name)
	if err != nil {
		return false, err
	}
	reason := catalog.HoldMissingTable
	if t.Status == sink.Incompatible {
		reason = catalog.HoldIncompatibleTable
	} else if lsn <= st.ResolvedLSN() {
		t.Status = sink.New
		return false, nil
	}
	s.holds.add(t.Name, reason, lsn)
	s.r.metrics.paused(t.Name, uint64(lsn), true)
	s.r.metrics.skipped()
	s.topics.forget(t.Name)
	st.Paused, st.PausedAt, st.Last = reason, lsn.String(), t.Status.String()+" table: "+t.Reason
	if err := catalog.WriteRebuildState(ctx, s.r.store, st); err != nil {
		return false, err
	}
	name := t.Name
	switch t.Status {
	case sink.Incompatible:
		s.r.log.Error("topic table was changed by another writer so that the relay cannot append to it: its events are held and the slot is kept at this position; "+
			"move the table away, then run `relay rebuild --topic "+name+"` to restore it from the outbox (or `relay rebuild --topic "+name+" --abort` to start it empty from here)",
			"topic", name, "held_from", lsn, "why", t.Reason)
	default:
		s.r.log.Error("topic table is missing, unreadable, or no longer holds this source's events (replaced, or restored to an older copy): its events are held and the slot is kept at this position; "+
			"move a damaged table away, then run `relay rebuild --topic "+name+"` to restore this source's events from the outbox, or `relay rebuild --topic "+name+" --abort` to start it afresh from here",
			"topic", name, "held_from", lsn, "why", t.Reason)
	}
	return true, nil
}

// resolveAt records that holds of the topic at or below lsn are done, and
// deletes the intents that asked for them. The in-memory hold stays: the
// session ends with errRewind.
func (s *session) resolveAt(ctx context.Context, topic string, lsn pglogrepl.LSN, what string, intents ...string) error {
	st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, topic)
	if err != nil {
		return err
	}
	if h := s.holds.m[topic]; h != nil {
		st.LastResolved = h.id
		if at := st.PausedAtLSN(); at > lsn {
			lsn = at // a later pause of the same topic is covered too
		}
	}
	if lsn > st.ResolvedLSN() {
		st.ResolvedThrough = lsn.String()
	}
	st.Paused, st.PausedAt, st.Last = "", "", what
	s.r.metrics.paused(topic, 0, false)
	if err := catalog.WriteRebuildState(ctx, s.r.store, st); err != nil {
		return err
	}
	for _, id := range intents {
		if catalog.CheckID(id) != nil {
			continue
		}
		if err := catalog.DeleteIntent(ctx, s.r.store, topic, s.r.id.AppID, id); err != nil {
			s.r.log.Warn("could not delete a resolved rebuild intent (harmless: it is never honoured again)", "topic", topic, "err", err)
		}
	}
	return nil
}

// drain commits the current batch and waits until the committer is idle.
func (s *session) drain(ctx context.Context) error {
	if err := s.maybeHandoff(ctx, true); err != nil {
		return err
	}
	for !s.com.idle() {
		if err := s.com.waitIdle(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return s.com.failed()
}

// warnHeld reminds the operator, once a minute, that a held topic holds
// the slot.
func (s *session) warnHeld() {
	if len(s.holds.m) == 0 || time.Since(s.holds.warned) < time.Minute {
		return
	}
	s.holds.warned = time.Now()
	for name, h := range s.holds.m {
		if h.id == catalog.HoldDeadLetterRate {
			if name != outbox.DeadLetterTopic {
				s.r.log.Warn("topic held by its circuit breaker: the slot is kept at its hold and WAL accumulates; fix the cause, then `relay deadletter release --topic "+name+"`",
					"topic", name, "held_at", h.since, "received", s.received, "held_wal_bytes", int64(s.received)-int64(h.since))
			}
			continue
		}
		s.r.log.Warn("topic held: the slot is kept at its hold and WAL accumulates; "+
			"`relay rebuild --topic "+name+"` restores it (run it again if a rebuild died), `relay rebuild --topic "+name+" --abort` resumes it without one",
			"topic", name, "why", h.id, "held_at", h.since, "received", s.received,
			"held_wal_bytes", int64(s.received)-int64(h.since))
	}
}
