package subscribe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// subscription is one running Subscribe.
type subscription struct {
	root         storage.Store     // the DeltaBus store
	tbl          storage.Store     // the root of the table holding the topic
	place        catalog.Placement // where the topic lives (shared.go)
	groups       []catalog.Group   // the groups when the topic was located
	topic, group string
	h            Handler
	o            Options
	erasures     *pii.ErasureWatcher // with Options.Reveal
	phantoms     *Phantoms
	cps          Checkpoints
	log          *slog.Logger

	tableID string
	proto   delta.Protocol
	meta    delta.Metadata

	cp    *Checkpoint     // stored checkpoint, nil when none yet
	from  Position        // position of the stored checkpoint, or the start
	pos   Position        // next event to deliver
	guard *storage.Object // commit pos.Version-1 as this subscription read it
	batch []Event
	cols  Columns       // the pending batch by column (Options.Columns)
	held  []*chunk      // chunks cols refers to, recycled once it is flushed
	free  chan<- *chunk // where held chunks go back
	seen  *DedupWindow
	async *committer     // background checkpoint writes (at-least-once stores)
	reuse []*decodeReuse // the decode workers' buffers; nil while idle
}

// Subscribe delivers the events of topic, from store (the DeltaBus store
// root), to h in batches, from the group's checkpoint on (or opts.Start for
// a new group), committing the checkpoint after every batch. It returns nil
// once caught up unless opts.Follow, in which case it polls until ctx ends
// (then it returns ctx.Err()) or an error stops it. See the package doc
// for the guarantees.
func Subscribe(ctx context.Context, store storage.Store, topic, group string, h Handler, opts Options) error {
	if err := validTopic(topic); err != nil {
		return err
	}
	if err := ValidGroup(group); err != nil {
		return err
	}
	o := opts.withDefaults()
	if o.Upcasters != nil {
		if o.Columns {
			return errUpcastColumns
		}
		if err := o.Upcasters.check(); err != nil {
			return err
		}
	}
	if o.Checkpoints == nil {
		o.Checkpoints = NewStoreCheckpoints(store)
	}
	s := &subscription{root: store, topic: topic, group: group, h: h, o: o, phantoms: NewPhantoms(store),
		cps: o.Checkpoints, log: o.Logger.With("topic", topic, "group", group), seen: NewDedupWindow(o.Dedup)}
	if o.Reveal != nil {
		if o.Columns {
			return errors.New("subscribe: Options.Reveal decrypts events; Options.Columns hands over the stored columns: use one of them")
		}
		s.erasures = pii.NewErasureWatcher(store, o.Reveal.Keys(), o.Logger)
	}
	if err := s.open(ctx); err != nil {
		return err
	}
	if _, ok := s.cps.(*StoreCheckpoints); ok {
		s.async = newCommitter(s.cps, s.cp)
		go s.async.run(context.WithoutCancel(ctx))
		defer s.async.stop()
	}
	for {
		progressed, err := s.round(ctx)
		if err != nil {
			return err
		}
		if progressed {
			continue
		}
		if !o.Follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.PollInterval):
		}
	}
}

// open locates the topic's table, reads its identity and the group's
// checkpoint, waiting for the table to exist when following.
func (s *subscription) open(ctx context.Context) error {
	for waited := false; ; waited = true {
		if err := s.locate(ctx); err != nil {
			return err
		}
		snap, err := delta.LoadSnapshot(ctx, s.tbl, -1)
		if errors.Is(err, delta.ErrNoTable) && s.o.Follow {
			if !waited {
				s.log.Info("subscribe: topic has no table yet; waiting for it")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(s.o.PollInterval):
				continue
			}
		}
		if errors.Is(err, delta.ErrNoTable) {
			return s.noTable()
		}
		if err != nil {
			return fmt.Errorf("open topic %q: %w", s.topic, err)
		}
		s.tableID, s.proto, s.meta = snap.Metadata.ID, snap.Protocol, snap.Metadata
		break
	}
	cp, ok, err := s.cps.Load(ctx, s.group, s.topic)
	if err != nil {
		return err
	}
	if ok {
		if cp.TableID != "" && cp.TableID != s.tableID {
			return fmt.Errorf("group %q topic %q: %w (table id %s, the checkpoint was taken on %s): "+
				"its versions mean something else now; reset the group (relay consume --topic %s --group %s --from-version 0)",
				s.group, s.topic, ErrTableReplaced, s.tableID, cp.TableID, s.topic, s.group)
		}
		s.cp, s.from, s.pos = &cp, cp.Position, cp.Position
		return nil
	}
	pos, err := resolveStart(ctx, s.tbl, s.o.Start)
	if err != nil {
		return fmt.Errorf("group %q topic %q: start at %s: %w", s.group, s.topic, s.o.Start, err)
	}
	s.from, s.pos = pos, pos
	return nil
}

// round delivers what one listing of the log shows after the position.
// progressed is false when there was nothing new.
func (s *subscription) round(ctx context.Context) (progressed bool, err error) {
	if s.erasures != nil {
		if err := s.erasures.Poll(ctx); err != nil {
			return false, err
		}
	}
	if err := s.checkPlacement(ctx); err != nil {
		return false, err
	}
	if err := s.phantoms.Poll(ctx); err != nil {
		return false, fmt.Errorf("group %q topic %q: %w", s.group, s.topic, err)
	}
	view, err := ListLog(ctx, s.tbl, max(s.pos.Version-1, 0))
	if err != nil {
		return false, err
	}
	if err := s.checkGuard(view); err != nil {
		return false, err
	}
	if _, ok := view.Commits[s.pos.Version]; !ok {
		s.reuse = nil // caught up: no buffers kept while idle
		if err := s.missing(view); err != nil {
			return false, err
		}
		return false, s.settle(ctx) // a new group records where it starts
	}
	start := s.pos
	if err := s.deliverRound(ctx, view); err != nil {
		if s.async != nil {
			_ = s.async.wait() // what was handled stays handled
		}
		return false, err
	}
	if err := s.settle(ctx); err != nil {
		return false, err
	}
	return s.pos != start, nil
}

// missing explains why the commit at the position is not listed: nothing
// new (nil), retention passed it, or a gap in the log.
func (s *subscription) missing(view *LogView) error {
	earliest := view.First
	if earliest < 0 {
		earliest = view.Earliest
	}
	if earliest > s.pos.Version {
		return &RetentionError{Group: s.group, Topic: s.topic, Version: s.pos.Version, Earliest: earliest}
	}
	if view.Last < s.pos.Version {
		return nil // caught up
	}
	return fmt.Errorf("topic %q: commit version %d is missing from the log while later versions exist: the log is damaged", s.topic, s.pos.Version)
}

// checkGuard verifies that the last commit this subscription read is still
// the same file: a table deleted and recreated restarts its versions.
func (s *subscription) checkGuard(view *LogView) error {
	if s.guard == nil {
		return nil
	}
	v := s.pos.Version - 1
	obj, ok := view.Commits[v]
	if ok && obj.Size == s.guard.Size && obj.ModTime.Equal(s.guard.ModTime) {
		return nil
	}
	return fmt.Errorf("topic %q: commit version %d, already read, changed or vanished (%w, or deleted); "+
		"check `relay status`, then reset the group (relay consume --topic %s --group %s --from-version 0)", s.topic, v, ErrTableReplaced, s.topic, s.group)
}

// settle flushes the pending batch and waits for the checkpoint writes.
func (s *subscription) settle(ctx context.Context) error {
	if err := s.flush(ctx); err != nil {
		return err
	}
	if s.async != nil {
		return s.async.wait()
	}
	return nil
}

// flush hands the pending batch to the handler and commits the position;
// with no events it commits the position alone when it moved (versions
// that changed no data), so retention does not pass an idle group.
func (s *subscription) flush(ctx context.Context) error {
	if s.cp != nil && s.cp.Position == s.pos && s.pending() == 0 {
		return nil
	}
	from := s.from
	next := Checkpoint{Group: s.group, Topic: s.topic, Position: s.pos, TableID: s.tableID}
	var apply func(context.Context, pgx.Tx) error
	if s.pending() > 0 {
		b := &Batch{Topic: s.topic, Group: s.group, Events: s.batch, From: from, To: s.pos}
		if s.o.Columns {
			b.Columns = &s.cols
		}
		if err := s.reveal(ctx); err != nil {
			return err
		}
		s.phantoms.Mark(s.batch)
		apply = func(ctx context.Context, tx pgx.Tx) error {
			b.Tx = tx
			if err := s.o.Upcasters.apply(b.Events); err != nil {
				return fmt.Errorf("group %q topic %q: %w", s.group, s.topic, err)
			}
			if err := s.handle(ctx, b); err != nil {
				return fmt.Errorf("group %q topic %q: handler failed on the batch at %s: %w", s.group, s.topic, from, err)
			}
			return nil
		}
	}
	if err := s.commit(ctx, next, apply); err != nil {
		return err
	}
	s.cp, s.from, s.batch = &next, s.pos, s.batch[:0]
	s.cols.reset()
	for _, c := range s.held {
		recycle(c, s.free)
	}
	clear(s.held)
	s.held = s.held[:0]
	return nil
}

// commit runs apply and records next: in the store's Commit, or, for an
// at-least-once store, apply now and the checkpoint in the background.
func (s *subscription) commit(ctx context.Context, next Checkpoint, apply func(context.Context, pgx.Tx) error) error {
	if s.async == nil {
		return s.cps.Commit(ctx, s.cp, next, apply)
	}
	if apply != nil {
		if err := apply(ctx, nil); err != nil {
			_ = s.async.wait() // what was handled before stays handled
			return err
		}
	}
	return s.async.submit(next)
}

// reveal decrypts the pending events' personal fields (Options.Reveal),
// where the contract each was written with marks them (before upcasting:
// SchemaVersion is still the writer's). A field whose envelope does not
// open is delivered as null and listed in Event.Unreadable, never a
// failed batch: only a key table or registry out of reach fails it.
//
// Dead letters are left as stored: the relay redacts their personal fields
// instead of encrypting them (pii.Protector.DeadLetter), and a redacted
// field there says so.
func (s *subscription) reveal(ctx context.Context) error {
	if s.o.Reveal == nil || s.topic == outbox.DeadLetterTopic {
		return nil
	}
	if err := RevealEvents(ctx, s.o.Reveal, s.topic, s.batch, s.log); err != nil {
		return fmt.Errorf("group %q topic %q: %w", s.group, s.topic, err)
	}
	return nil
}

// RevealEvents decrypts the personal fields of events of topic in place,
// as Options.Reveal does for a subscription (see reveal): an erased
// subject's fields come back as null, listed in Event.Erased; a field
// whose envelope does not open is null and listed in Event.Unreadable
// (logged to log). Dead letters are left as stored. For handing events
// over by other means (package subscribe/members).
func RevealEvents(ctx context.Context, r *pii.Revealer, topic string, evs []Event, log *slog.Logger) error {
	if topic == outbox.DeadLetterTopic {
		return nil
	}
	for i := range evs {
		ev := &evs[i]
		res, err := r.Reveal(ctx, &ev.Event)
		if err != nil {
			return err
		}
		ev.Payload, ev.Erased, ev.Unreadable = res.Payload, res.Erased, res.Unreadable
		if res.Unreadable != nil && log != nil {
			log.Warn("subscribe: personal fields whose envelope does not open under its key (altered, or copied from another event or field) are delivered as null",
				"topic", topic, "event_id", ev.ID, "position", ev.Position.String(), "fields", res.Unreadable)
		}
	}
	return nil
}
