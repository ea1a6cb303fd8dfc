package subscribe

import (
	"context"
	"fmt"
	"slices"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"time"
)

// dataAdds returns the data files version v adds, in log order, after
// checking what else the commit does: a protocol or metaData change must
// stay readable and keep the table's identity; removes and cdc files with
// dataChange=true (updates or deletes) cannot be followed by an
// append-only subscription. dataChange=false actions (compaction) are
// skipped: they rearrange rows already delivered.
func (s *subscription) dataAdds(v int64, acts []delta.Action) ([]delta.Add, error) {
	var adds []delta.Add
	for i := range acts {
		a := &acts[i]
		switch {
		case a.Protocol != nil:
			s.proto = *a.Protocol
		case a.Metadata != nil:
			if a.Metadata.ID != s.tableID {
				return nil, fmt.Errorf("topic %q version %d: metaData id %s replaces table %s: %w; reset the group",
					s.topic, v, a.Metadata.ID, s.tableID, ErrTableReplaced)
			}
			s.meta = *a.Metadata
		case a.Add != nil && a.Add.DataChange:
			adds = append(adds, *a.Add)
		case a.Remove != nil && a.Remove.DataChange, a.CDC != nil:
			return nil, fmt.Errorf("topic %q version %d deletes or updates rows (remove with dataChange=true, or cdc files): "+
				"topic tables are append-only and a subscription cannot follow that", s.topic, v)
		}
	}
	if err := delta.CheckReadable(s.proto, s.meta); err != nil {
		return nil, fmt.Errorf("topic %q version %d: %w", s.topic, v, err)
	}
	return adds, nil
}

// deliverChunk adds events k.. of chunk c, the first at pos, to the batch,
// flushing each full batch. Without Dedup the events go in runs, built
// straight into the batch, or only noted with Options.Columns.
func (s *subscription) deliverChunk(ctx context.Context, c *chunk, k int, pos Position, vt time.Time) error {
	for k < c.n {
		m := 1
		if s.seen == nil {
			m = min(c.n-k, s.o.BatchSize-s.pending())
		}
		s.pos = Position{Version: pos.Version, Offset: pos.Offset + int64(m)}
		switch id := c.key(k); {
		case s.seen.Contains(id):
			s.log.Debug("subscribe: duplicate event dropped", "event_id", id.ID, "source", id.Source, "version", pos.Version, "offset", pos.Offset)
		case s.o.Columns:
			s.cols.add(c, k, m, pos, vt)
			s.seen.Add(id)
		default:
			at := len(s.batch)
			s.batch = slices.Grow(s.batch, m)[:at+m]
			c.fill(s.batch[at:], k, pos, vt)
			s.seen.Add(id)
		}
		k, pos = k+m, s.pos
		if s.pending() >= s.o.BatchSize {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// pending returns the number of events in the pending batch.
func (s *subscription) pending() int { return len(s.batch) + s.cols.n }

// maxHeldChunks bounds the chunks a batch by column refers to: a batch of
// many small files is handed over before it holds more.
const maxHeldChunks = decodeWorkers * chunkQueue

// release recycles chunk c, delivered, unless the pending batch refers to
// it (Options.Columns): then it is recycled once the batch is flushed.
func (s *subscription) release(ctx context.Context, c *chunk, free chan<- *chunk) error {
	if !s.cols.holds(c) {
		recycle(c, free)
		return nil
	}
	s.held, s.free = append(s.held, c), free
	if len(s.held) >= maxHeldChunks {
		return s.flush(ctx)
	}
	return nil
}

// recycle gives chunk c back to the decoders when there is room.
func recycle(c *chunk, free chan<- *chunk) {
	select {
	case free <- c:
	default:
	}
}

// vanished handles a listed commit that is gone when read: cleanup ran in
// between.
func (s *subscription) vanished(ctx context.Context, pos, v int64) error {
	view, err := ListLog(ctx, s.tbl, 0)
	if err != nil {
		return err
	}
	if view.First > pos {
		return &RetentionError{Group: s.group, Topic: s.topic, Version: pos, Earliest: view.First}
	}
	return fmt.Errorf("topic %q: commit version %d vanished after listing: the log is damaged", s.topic, v)
}

// vacuumed explains a data file that is gone: a later commit removed it
// (compaction) and VACUUM deleted it, so the group cannot read version v
// incrementally any more; otherwise the table is damaged.
func (s *subscription) vacuumed(ctx context.Context, v int64, path string, view *LogView, cause error) error {
	for w := v + 1; w <= view.Last; w++ {
		if _, ok := view.Commits[w]; !ok {
			continue
		}
		acts, err := readCommit(ctx, s.tbl, w)
		if err != nil {
			return err
		}
		for _, a := range acts {
			if a.Remove != nil && delta.FileKey(a.Remove.Path, nil) == delta.FileKey(path, nil) {
				return &RetentionError{Group: s.group, Topic: s.topic, Version: s.pos.Version, Earliest: w,
					Detail: fmt.Sprintf("data file %s of version %d was rewritten at version %d and vacuumed", path, v, w)}
			}
		}
	}
	return fmt.Errorf("topic %q version %d: data file %s is missing and no later commit removed it: the table is damaged: %w", s.topic, v, path, cause)
}

// resolveStart turns a Start into a position of the table tbl.
func resolveStart(ctx context.Context, tbl storage.Store, st Start) (Position, error) {
	switch {
	case st.latest:
		view, err := ListLog(ctx, tbl, 0)
		if err != nil {
			return Position{}, err
		}
		return Position{Version: view.Last + 1}, nil
	case !st.at.IsZero():
		return versionAt(ctx, tbl, st.at)
	case st.version < 0:
		return Position{}, fmt.Errorf("negative version %d", st.version)
	}
	return Position{Version: st.version}, nil
}

// versionAt finds the first version whose commit timestamp is at or after
// t, by binary search over the retained commits (this writer's commit
// timestamps increase with the version).
func versionAt(ctx context.Context, tbl storage.Store, t time.Time) (Position, error) {
	view, err := ListLog(ctx, tbl, 0)
	if err != nil {
		return Position{}, err
	}
	if view.First < 0 {
		return Position{}, nil
	}
	lo, hi := view.First, view.Last+1 // answer in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		obj, ok := view.Commits[mid]
		if !ok {
			return Position{}, fmt.Errorf("commit version %d is missing from the log", mid)
		}
		vt, err := VersionTime(ctx, tbl, mid, obj.ModTime)
		if err != nil {
			return Position{}, err
		}
		if vt.Before(t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == view.First && view.First > 0 {
		return Position{}, fmt.Errorf("%w: %s is before the earliest retained version %d", ErrRetentionPassed, t.UTC().Format(time.RFC3339), view.First)
	}
	return Position{Version: lo}, nil
}
