package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
)

// errRewind ends a session so the next one re-reads the stream from the
// slot's acknowledged position (held at the rebuild's pause watermark).
var errRewind = errors.New("rewind to the held position after a topic rebuild")

// pause is a topic waiting for its rebuild.
type pause struct {
	id    string
	since pglogrepl.LSN // pause watermark of the first pending rebuild
}

// pendingWatermark is a watermark seen inside a transaction, acted on at
// its commit (a batch only ends on a transaction boundary).
type pendingWatermark struct {
	wm  Watermark
	lsn pglogrepl.LSN
}

// noteMessage keeps this relay's rebuild watermarks until their commit.
func (s *session) noteMessage(m *decoding.LogicalMessage) {
	if m.Prefix != WatermarkPrefix {
		return
	}
	var wm Watermark
	if err := json.Unmarshal(m.Content, &wm); err != nil || wm.AppID != s.r.cfg.AppID || outbox.ValidTopic(wm.Topic) != nil {
		if err != nil || wm.AppID == s.r.cfg.AppID {
			s.r.log.Warn("ignoring a malformed rebuild watermark", "lsn", m.LSN, "content", string(m.Content))
		}
		return
	}
	if !m.Transactional {
		s.r.log.Warn("ignoring a non-transactional rebuild watermark", "lsn", m.LSN)
		return
	}
	s.watermarks = append(s.watermarks, pendingWatermark{wm: wm, lsn: m.LSN})
}

// applyWatermarks acts on the watermarks of the transaction just committed.
func (s *session) applyWatermarks(ctx context.Context) error {
	wms := s.watermarks
	s.watermarks = nil
	for _, p := range wms {
		var err error
		switch p.wm.Op {
		case WatermarkPause:
			err = s.pauseTopic(ctx, p.wm, p.lsn)
		case WatermarkCommit:
			err = s.commitRebuild(ctx, p.wm)
		case WatermarkAbort:
			err = s.abortRebuild(ctx, p.wm, p.lsn)
		default:
			s.r.log.Warn("ignoring a rebuild watermark with an unknown op", "op", p.wm.Op, "lsn", p.lsn)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pauseTopic makes the topic's events so far durable, then drops its events
// and holds the acknowledged position at the watermark until the rebuild is
// committed or aborted.
func (s *session) pauseTopic(ctx context.Context, wm Watermark, lsn pglogrepl.LSN) error {
	st, _, err := ReadRebuildState(ctx, s.r.store, wm.Topic)
	if err != nil {
		return err
	}
	if done, _ := lsnOrZero(st.ResolvedThrough); lsn <= done {
		return nil // re-read after the rebuild was committed or aborted
	}
	p := s.pauses[wm.Topic]
	if p == nil {
		p = &pause{since: lsn}
		s.pauses[wm.Topic] = p
		s.pauseWarned = time.Now()
		s.r.metrics.paused(wm.Topic, uint64(lsn), true)
	}
	p.id = wm.ID
	if err := s.drain(ctx); err != nil {
		return err
	}
	s.tables.forget(wm.Topic)
	st.Topic, st.Paused, st.PausedAt = wm.Topic, wm.ID, lsn.String()
	st.Last = "paused for rebuild " + wm.ID
	if err := writeRebuildState(ctx, s.r.store, st); err != nil {
		return err
	}
	s.r.log.Info("topic paused for a rebuild: its events are dropped and re-read once the rebuild is committed",
		"topic", wm.Topic, "rebuild", wm.ID, "watermark", lsn, "holding_slot_at", s.hold())
	return nil
}

// commitRebuild commits the rebuild's snapshot files, then rewinds.
func (s *session) commitRebuild(ctx context.Context, wm Watermark) error {
	p := s.pauses[wm.Topic]
	rec, ok, err := ReadRebuildRecord(ctx, s.r.store, wm.Topic)
	if err != nil {
		return err
	}
	if p == nil || !ok || rec.ID != wm.ID {
		return nil // resolved already, or superseded by a later rebuild
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	t := &topicTable{name: wm.Topic, store: s.tables.sub(wm.Topic)}
	if err := t.ensureTable(ctx, s.r.store, delta.Options{Logger: s.r.log}); err != nil {
		if errors.Is(err, delta.ErrTableExists) {
			return fatalError{fmt.Errorf("rebuild %s of topic %q: %w; move that table away and run the rebuild again", rec.ID, wm.Topic, err)}
		}
		return err
	}
	if cur, ok := t.table.TxnVersion(s.r.cfg.AppID); !ok || cur < rec.TxnVersion {
		_, err := t.table.Commit(ctx, delta.CommitActions{Adds: rec.Adds, Operation: "WRITE",
			Txn: &delta.Txn{AppID: s.r.cfg.AppID, Version: rec.TxnVersion}})
		if err != nil {
			return fmt.Errorf("commit rebuild %s of topic %q: %w", rec.ID, wm.Topic, err)
		}
	}
	if err := s.resolve(ctx, wm.Topic, p, "committed rebuild "+rec.ID); err != nil {
		return err
	}
	s.r.log.Info("topic rebuild committed; re-reading the stream from the pause", "topic", wm.Topic, "rebuild", rec.ID,
		"events_added", rec.Added, "events_already_present", rec.Present, "txn_version", pglogrepl.LSN(rec.TxnVersion),
		"rewind_to", s.hold())
	return errRewind
}

// abortRebuild resolves every pause of the topic before the watermark and
// rewinds, so the topic streams again from its pause.
func (s *session) abortRebuild(ctx context.Context, wm Watermark, lsn pglogrepl.LSN) error {
	p := s.pauses[wm.Topic]
	if p == nil || (wm.ID != "" && wm.ID != p.id) {
		return nil
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	if err := s.resolveAt(ctx, wm.Topic, lsn, "aborted rebuild "+p.id); err != nil {
		return err
	}
	s.r.log.Warn("topic rebuild aborted: the topic streams again from the pause; events before it that its table lacks are still missing",
		"topic", wm.Topic, "rebuild", p.id, "rewind_to", s.hold())
	return errRewind
}

func (s *session) resolve(ctx context.Context, topic string, p *pause, what string) error {
	return s.resolveAt(ctx, topic, p.since, what)
}

// resolveAt records that pause watermarks of the topic at or below lsn are
// done. The in-memory pause stays: the session ends with errRewind.
func (s *session) resolveAt(ctx context.Context, topic string, lsn pglogrepl.LSN, what string) error {
	st, _, err := ReadRebuildState(ctx, s.r.store, topic)
	if err != nil {
		return err
	}
	if p := s.pauses[topic]; p != nil {
		if at, _ := lsnOrZero(st.PausedAt); at > lsn {
			lsn = at // a later pause of the same topic is covered too
		}
	}
	if done, _ := lsnOrZero(st.ResolvedThrough); lsn > done {
		st.ResolvedThrough = lsn.String()
	}
	st.Topic, st.Paused, st.PausedAt, st.Last = topic, "", "", what
	s.r.metrics.paused(topic, 0, false)
	return writeRebuildState(ctx, s.r.store, st)
}

// hold is the highest position the relay may acknowledge: the oldest pause
// watermark, or 0 when no topic is paused.
func (s *session) hold() pglogrepl.LSN {
	var h pglogrepl.LSN
	for _, p := range s.pauses {
		if h == 0 || p.since < h {
			h = p.since
		}
	}
	return h
}

// drain commits the current batch and waits until the committer is idle.
func (s *session) drain(ctx context.Context) error {
	if err := s.maybeHandoff(ctx, true); err != nil {
		return err
	}
	for !s.com.idle() {
		if err := s.com.failed(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return s.com.failed()
}

// warnPaused reminds the operator, once a minute, that a paused topic holds
// the slot.
func (s *session) warnPaused() {
	if len(s.pauses) == 0 || time.Since(s.pauseWarned) < time.Minute {
		return
	}
	s.pauseWarned = time.Now()
	for name, p := range s.pauses {
		s.r.log.Warn("topic paused for a rebuild that has not committed: the slot is held, WAL accumulates; "+
			"if the rebuild died, run `relay rebuild --topic "+name+"` again, or `relay rebuild --topic "+name+" --abort` to resume streaming without it",
			"topic", name, "rebuild", p.id, "paused_at", p.since, "received", s.received,
			"held_wal_bytes", int64(s.received)-int64(p.since))
	}
}

// holdMissing pauses a topic whose table is missing although the registry
// lists it, at the commit LSN of its first event: recreating it empty would
// silently lose its history. A later rebuild restores it; an abort resolves
// the pause, and events at or below the resolved position then go to a new
// table (held=false).
func (s *session) holdMissing(ctx context.Context, t *topicTable, lsn pglogrepl.LSN) (held bool, err error) {
	st, _, err := ReadRebuildState(ctx, s.r.store, t.name)
	if err != nil {
		return false, err
	}
	if done, _ := lsnOrZero(st.ResolvedThrough); lsn <= done {
		t.missing = false
		return false, nil
	}
	s.pauses[t.name] = &pause{id: missingTable, since: lsn}
	s.pauseWarned = time.Now()
	s.r.metrics.paused(t.name, uint64(lsn), true)
	s.r.metrics.skipped()
	s.tables.forget(t.name)
	st.Topic, st.Paused, st.PausedAt, st.Last = t.name, missingTable, lsn.String(), "table missing or unreadable"
	if err := writeRebuildState(ctx, s.r.store, st); err != nil {
		return false, err
	}
	if t.broken != "" {
		s.r.log.Error("topic table cannot be read: its events are held and the slot is kept at this position; "+
			"move the table away, then run `relay rebuild --topic "+t.name+"` to restore it from the outbox",
			"topic", t.name, "table", t.store, "held_from", lsn, "err", t.broken)
		return true, nil
	}
	s.r.log.Error("topic table is missing although the store's registry lists it: its events are held and the slot is kept at this position; "+
		"run `relay rebuild --topic "+t.name+"` to restore it from the outbox, or `relay rebuild --topic "+t.name+" --abort` to start it empty from here",
		"topic", t.name, "table", t.store, "held_from", lsn)
	return true, nil
}

// missingTable is the pause id of a topic held because its table is gone.
const missingTable = "missing-table"
