package relay

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/decoding"
	"github.com/deltabus/deltabus/sink"
)

// errRewind ends a session so the next one re-reads the stream from the
// slot's acknowledged position (held at the rebuild's pause watermark).
var errRewind = errors.New("rewind to the held position after a topic rebuild")

// pendingWatermark is a watermark seen inside a transaction, acted on at
// its commit (a batch only ends on a transaction boundary).
type pendingWatermark struct {
	wm  catalog.Watermark
	lsn pglogrepl.LSN
}

// noteMessage keeps this relay's rebuild watermarks until their commit.
// Anyone who can connect to the database can emit a logical message: a
// malformed one is reported (rate-limited, by size, never by content) and
// ignored.
func (s *session) noteMessage(m *decoding.LogicalMessage) {
	if m.Prefix != catalog.WatermarkPrefix {
		return
	}
	wm, err := catalog.ParseWatermark(m.Content)
	if err != nil {
		s.ignored(m.LSN, "malformed", len(m.Content))
		return
	}
	if wm.AppID != s.r.id.AppID {
		return // another relay's
	}
	if !m.Transactional {
		s.ignored(m.LSN, "not transactional", len(m.Content))
		return
	}
	s.watermarks = append(s.watermarks, pendingWatermark{wm: wm, lsn: m.LSN})
}

// ignored warns about a watermark the relay does not act on, at most once
// a minute (with the number suppressed since).
func (s *session) ignored(lsn pglogrepl.LSN, why string, size int) {
	s.r.metrics.watermarkIgnored()
	if n, ok := s.forged.allow(time.Minute); ok {
		s.r.log.Warn("ignoring a rebuild watermark that `relay rebuild` did not write (anyone who can connect to the database can emit one)",
			"why", why, "lsn", lsn, "bytes", size, "ignored_since_last_warning", n)
	}
}

// authorized reports whether the store holds an intent that allows the
// watermark (see "Rebuilding one topic" in package catalog).
func (s *session) authorized(ctx context.Context, p pendingWatermark) (bool, error) {
	in, ok, err := catalog.ReadIntent(ctx, s.r.store, p.wm.Topic, s.r.id.AppID, p.wm.ID)
	if err != nil {
		return false, err
	}
	if !ok || !in.Allows(p.wm) {
		s.ignored(p.lsn, "no matching intent in the store", 0)
		return false, nil
	}
	return true, nil
}

// applyWatermarks acts on the watermarks of the transaction just committed.
func (s *session) applyWatermarks(ctx context.Context) error {
	wms := s.watermarks
	s.watermarks = nil
	for _, p := range wms {
		var err error
		switch p.wm.Op {
		case catalog.WatermarkPause:
			err = s.pauseTopic(ctx, p)
		case catalog.WatermarkCommit:
			err = s.commitRebuild(ctx, p)
		case catalog.WatermarkAbort:
			err = s.abortRebuild(ctx, p)
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
func (s *session) pauseTopic(ctx context.Context, p pendingWatermark) error {
	wm := p.wm
	st, _, err := catalog.ReadRebuildState(ctx, s.r.store, s.r.id.AppID, wm.Topic)
	if err != nil {
		return err
	}
	if p.lsn <= st.ResolvedLSN() || wm.ID == st.LastResolved {
		return nil // re-read after the rebuild was committed or aborted
	}
	if ok, err := s.authorized(ctx, p); !ok || err != nil {
		return err
	}
	h := s.holds.add(wm.Topic, wm.ID, p.lsn)
	s.r.metrics.paused(wm.Topic, uint64(h.since), true)
	h.id = wm.ID
	if err := s.drain(ctx); err != nil {
		return err
	}
	s.topics.forget(wm.Topic)
	st.Paused, st.PausedAt = wm.ID, p.lsn.String()
	st.Last = "paused for rebuild " + wm.ID
	if err := catalog.WriteRebuildState(ctx, s.r.store, st); err != nil {
		return err
	}
	s.r.log.Info("topic paused for a rebuild: its events are dropped and re-read once the rebuild is committed",
		"topic", wm.Topic, "rebuild", wm.ID, "watermark", p.lsn, "holding_slot_at", s.holds.position())
	return nil
}

// commitRebuild commits the rebuild's snapshot files, then rewinds.
func (s *session) commitRebuild(ctx context.Context, p pendingWatermark) error {
	wm := p.wm
	h := s.holds.m[wm.Topic]
	if h == nil {
		return nil // resolved already
	}
	rec, ok, err := catalog.ReadRebuildRecord(ctx, s.r.store, s.r.id.AppID, wm.Topic)
	if err != nil {
		return err
	}
	if !ok || rec.ID != wm.ID || rec.AppID != s.r.id.AppID {
		return nil // superseded by a later rebuild
	}
	if ok, err := s.authorized(ctx, p); !ok || err != nil {
		return err
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	if err := s.r.sink.CommitRebuild(ctx, rec); err != nil {
		if errors.Is(err, sink.ErrIncompatible) {
			return fatalError{errors.Join(err, errors.New("move that table away and run the rebuild again"))}
		}
		return err
	}
	if err := s.resolveAt(ctx, wm.Topic, h.since, "committed rebuild "+rec.ID, rec.ID); err != nil {
		return err
	}
	s.r.log.Info("topic rebuild committed; re-reading the stream from the pause", "topic", wm.Topic, "rebuild", rec.ID,
		"events_added", rec.Added, "events_already_present", rec.Present, "txn_version", pglogrepl.LSN(rec.TxnVersion),
		"rewind_to", s.holds.position())
	return errRewind
}

// abortRebuild resolves every hold of the topic before the watermark and
// rewinds, so the topic streams again from its hold.
func (s *session) abortRebuild(ctx context.Context, p pendingWatermark) error {
	wm := p.wm
	h := s.holds.m[wm.Topic]
	if h == nil {
		return nil
	}
	in, ok, err := catalog.ReadIntent(ctx, s.r.store, wm.Topic, s.r.id.AppID, wm.ID)
	if err != nil {
		return err
	}
	if !ok || !in.Allows(wm) || (in.Kind == catalog.IntentRebuild && wm.ID != h.id) {
		s.ignored(p.lsn, "no matching intent in the store", 0)
		return nil
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	if err := s.resolveAt(ctx, wm.Topic, p.lsn, "aborted rebuild "+h.id, h.id, wm.ID); err != nil {
		return err
	}
	s.r.log.Warn("topic rebuild aborted: the topic streams again from the pause; events before it that its table lacks are still missing",
		"topic", wm.Topic, "rebuild", h.id, "rewind_to", s.holds.position())
	return errRewind
}
