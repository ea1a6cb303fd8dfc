package members

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/subscribe"
)

// The reader reads the topic with package subscribe, from the state's Low
// on, into the index: every server of a group reads the same events at
// the same positions (subscribe's positions are the table's), so their
// indexes agree on what lies between Low and what they have read. It
// waits while the index holds MaxBuffered events or MaxBufferedBytes.

// startReaderLocked starts reading from the index's readTo (the state's
// Low for a new index), stopping the reader before.
func (g *Group) startReaderLocked(ctx context.Context) {
	if g.reader != nil {
		g.reader()
	}
	rctx, cancel := context.WithCancel(ctx)
	g.reader = cancel
	ix, tableID := g.ix, g.st.TableID
	go g.read(rctx, ix, tableID)
}

// read runs subscriptions into ix until ctx ends or the table can no
// longer be followed (retention passed the position, the table was
// replaced): that error is kept for the members until a reset.
func (g *Group) read(ctx context.Context, ix *index, tableID string) {
	for backoff := time.Second; ctx.Err() == nil; backoff = min(2*backoff, 30*time.Second) {
		g.mu.Lock()
		from := ix.readTo
		g.mu.Unlock()
		cps := &readerCheckpoints{g: g, ix: ix, cp: subscribe.Checkpoint{Group: g.name, Topic: g.topic, Position: from, TableID: tableID}}
		err := subscribe.Subscribe(ctx, g.root, g.topic, g.name, func(ctx context.Context, b *subscribe.Batch) error {
			return g.addBatch(ctx, ix, b)
		}, subscribe.Options{Checkpoints: cps, Follow: true, PollInterval: g.o.PollInterval, Logger: g.logger, Dedup: 0})
		if ctx.Err() != nil {
			return
		}
		g.mu.Lock()
		if g.ix == ix {
			g.readErr = err
			g.notifyLocked()
		}
		g.mu.Unlock()
		if permanent(err) {
			g.logger.Error("members: the group cannot read its topic until it is reset", "err", err)
			return
		}
		g.logger.Warn("members: reading the topic failed; trying again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// permanent reports an error only a reset ends: retention passed the
// group, or the table is not the one its positions refer to.
func permanent(err error) bool {
	var re *subscribe.RetentionError
	return errors.As(err, &re) || errors.Is(err, subscribe.ErrTableReplaced)
}

// addBatch adds a batch's events to the index, waiting for room.
func (g *Group) addBatch(ctx context.Context, ix *index, b *subscribe.Batch) error {
	for i := range b.Events {
		ev := b.Events[i] // the slice is reused: keep a copy
		for {
			g.mu.Lock()
			if g.ix != ix {
				g.mu.Unlock()
				return context.Canceled // a reset replaced the index
			}
			if ix.buffered() == 0 || (ix.buffered() < g.o.MaxBuffered && ix.bytes < g.o.MaxBufferedBytes) {
				ix.add(&ev, g.st, g.now())
				g.readErr = nil
				g.notifyLocked()
				g.mu.Unlock()
				break
			}
			ch := g.changed
			g.mu.Unlock()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// readerCheckpoints keeps the reader's position in memory: the group's
// position is its log's Low, never this.
type readerCheckpoints struct {
	g  *Group
	ix *index
	cp subscribe.Checkpoint
}

func (c *readerCheckpoints) Load(context.Context, string, string) (subscribe.Checkpoint, bool, error) {
	return c.cp, true, nil
}

func (c *readerCheckpoints) Commit(ctx context.Context, _ *subscribe.Checkpoint, next subscribe.Checkpoint, apply func(context.Context, pgx.Tx) error) error {
	if apply != nil {
		if err := apply(ctx, nil); err != nil {
			return err
		}
	}
	c.cp = next
	c.g.mu.Lock()
	if c.g.ix == c.ix && less(c.ix.readTo, next.Position) {
		c.ix.readTo = next.Position // versions without events of the topic
	}
	c.g.mu.Unlock()
	return nil
}

func (c *readerCheckpoints) List(context.Context) ([]subscribe.Checkpoint, error) {
	return []subscribe.Checkpoint{c.cp}, nil
}
