package members

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// receive hands out up to req.Max events, waiting up to req.Wait for one.
func (g *Group) receive(ctx context.Context, req ReceiveRequest) ([]Message, error) {
	deadline := g.now().Add(req.Wait)
	can := g.accepts(&req)
	for {
		now := g.now()
		created, err := g.ensureCreated(ctx)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		g.members[req.Member], g.lastUsed = now, now
		if len(g.members) > maxMembersSeen {
			g.forgetMembersLocked(now)
		}
		readErr, ch := g.readErr, g.changed
		ready := created && g.ix.hasReady(g.st, now)
		next := g.ix.nextDue()
		g.mu.Unlock()
		if readErr != nil && permanent(readErr) {
			return nil, readErr
		}
		if ready {
			out := g.submit(ctx, &intent{kind: kReceive, req: &req, can: can})
			if out.err != nil {
				return nil, out.err
			}
			if len(out.msgs) > 0 {
				return g.finish(ctx, &req, out.msgs)
			}
		}
		wait := deadline.Sub(g.now())
		if wait <= 0 {
			return []Message{}, nil
		}
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(g.now()), time.Millisecond))
		}
		if !created {
			wait = min(wait, 10*g.o.PollInterval)
		}
		if err := g.wait(ctx, ch, wait); err != nil {
			return nil, err
		}
	}
}

// wait waits for a change of the group, d, or ctx.
func (g *Group) wait(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	g.mu.Lock()
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
	case <-t.C:
	case <-g.done:
		return errClosed
	}
	return nil
}

// accepts says which events a member can read: those of types it did
// not name, at the version it reads, older ones its upcasters convert,
// and newer ones with PassNewer.
func (g *Group) accepts(req *ReceiveRequest) func(*record) bool {
	if len(req.Want) == 0 {
		return nil
	}
	return func(r *record) bool {
		want, ok := req.Want[r.ev.Type]
		v := r.ev.SchemaVersion
		switch {
		case !ok || v == want:
			return true
		case v > want:
			return req.PassNewer
		case g.o.Upcasts == nil:
			return false
		}
		for k := v; k < want; k++ {
			if _, ok := g.o.Upcasts.Step(g.topic, r.ev.Type, k); !ok {
				return false
			}
		}
		return true
	}
}

// finish converts the events to the versions the member reads and
// reveals personal fields when asked.
func (g *Group) finish(ctx context.Context, req *ReceiveRequest, msgs []Message) ([]Message, error) {
	evs := make([]subscribe.Event, len(msgs))
	for i := range msgs {
		evs[i] = msgs[i].Event
	}
	if len(req.Want) > 0 {
		u := subscribe.NewUpcasters()
		u.PassNewer = req.PassNewer
		for typ, v := range req.Want {
			u.Want(typ, v)
		}
		for _, e := range evs {
			if want, ok := req.Want[e.Type]; ok && g.o.Upcasts != nil {
				for k := e.SchemaVersion; k < want; k++ {
					if f, ok := g.o.Upcasts.Step(g.topic, e.Type, k); ok {
						u.Register(e.Type, k, f)
					}
				}
			}
		}
		if err := u.Apply(evs); err != nil {
			return nil, fmt.Errorf("group %q topic %q: %w", g.name, g.topic, err)
		}
	}
	if req.Reveal {
		if g.o.Reveal == nil {
			return nil, badRequest("personal fields cannot be revealed: this server has no key-encryption key (relay serve --kek)")
		}
		if err := subscribe.RevealEvents(ctx, g.o.Reveal, g.topic, evs, g.logger); err != nil {
			return nil, fmt.Errorf("group %q topic %q: %w", g.name, g.topic, err)
		}
	}
	if err := g.phantoms.Poll(ctx); err != nil {
		return nil, fmt.Errorf("group %q topic %q: %w", g.name, g.topic, err)
	}
	g.phantoms.Mark(evs)
	for i := range msgs {
		msgs[i].Event = evs[i]
	}
	return msgs, nil
}

// ensureCreated writes the group's first entry when its log has none: it
// starts at the topic's first retained version. created is false while
// the topic has no table.
func (g *Group) ensureCreated(ctx context.Context) (created bool, err error) {
	g.mu.Lock()
	exists := g.st.Epoch > 0
	g.mu.Unlock()
	if exists {
		return true, nil
	}
	r, err := g.resolve(ctx, nil)
	if errors.Is(err, ErrNoTable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	out := g.submit(ctx, &intent{kind: kCreate, reset: r})
	return out.err == nil, out.err
}

// resolve turns a start into the reset of a new epoch: nil is the
// topic's first retained version.
func (g *Group) resolve(ctx context.Context, start *subscribe.Start) (*resetOp, error) {
	if start == nil {
		p, err := catalog.Locate(ctx, g.root, g.topic)
		if err != nil {
			return nil, &storeError{err}
		}
		view, err := subscribe.ListLog(ctx, storage.Sub(g.root, p.Table), 0)
		if err != nil {
			return nil, &storeError{err}
		}
		if view.First < 0 {
			return nil, fmt.Errorf("topic %q: %w", g.topic, ErrNoTable)
		}
		s := subscribe.FromVersion(view.First)
		start = &s
	} else if v, ok := start.Version(); ok {
		p, err := catalog.Locate(ctx, g.root, g.topic)
		if err != nil {
			return nil, &storeError{err}
		}
		view, err := subscribe.ListLog(ctx, storage.Sub(g.root, p.Table), 0)
		if err != nil {
			return nil, &storeError{err}
		}
		if v > view.Last+1 {
			return nil, badRequest("version %d is past the topic's latest version %d: give %d or earlier", v, view.Last, view.Last+1)
		}
	}
	cp, err := subscribe.Reset(ctx, g.root, &scratchCheckpoints{}, g.topic, g.name, *start)
	var re *subscribe.RetentionError
	switch {
	case errors.Is(err, delta.ErrNoTable):
		return nil, fmt.Errorf("topic %q: %w", g.topic, ErrNoTable)
	case errors.As(err, &re):
		return nil, err
	case err != nil:
		return nil, &storeError{err}
	}
	return &resetOp{Low: cp.Position, TableID: cp.TableID}, nil
}

// reset starts a new epoch at start: every event from there on is handed
// out again; leases of the epoch before end (their acks fail).
func (g *Group) reset(ctx context.Context, start subscribe.Start) (Position, error) {
	r, err := g.resolve(ctx, &start)
	if err != nil {
		return Position{}, err
	}
	g.mu.Lock()
	g.lastUsed = g.now()
	g.mu.Unlock()
	out := g.submit(ctx, &intent{kind: kReset, reset: r})
	return r.Low, out.err
}

// acknowledge acks (or, with nack, releases) the deliveries named.
func (g *Group) acknowledge(ctx context.Context, ids []string, nack bool, retry time.Duration) (AckResult, error) {
	if len(ids) > MaxAckIDs {
		return AckResult{}, badRequest("%d ack ids in one request: give at most %d", len(ids), MaxAckIDs)
	}
	if retry < 0 || retry > MaxRetryAfter {
		return AckResult{}, badRequest("retry_after_ms is %d: give 0 to %d", retry.Milliseconds(), MaxRetryAfter.Milliseconds())
	}
	it := &intent{kind: kAck, ids: ids, retry: retry}
	if nack {
		it.kind = kNack
	}
	for _, s := range ids {
		a, err := parseAckID(s)
		if err != nil {
			return AckResult{}, err
		}
		it.acks = append(it.acks, a)
	}
	g.mu.Lock()
	g.lastUsed = g.now()
	g.mu.Unlock()
	if len(ids) == 0 {
		return AckResult{Failed: []Failed{}}, nil
	}
	out := g.submit(ctx, it)
	if out.res.Failed == nil {
		out.res.Failed = []Failed{}
	}
	return out.res, out.err
}

// scratchCheckpoints lets subscribe.Reset resolve a start: it holds
// nothing and keeps nothing.
type scratchCheckpoints struct{}

func (scratchCheckpoints) Load(context.Context, string, string) (subscribe.Checkpoint, bool, error) {
	return subscribe.Checkpoint{}, false, nil
}

func (scratchCheckpoints) Commit(context.Context, *subscribe.Checkpoint, subscribe.Checkpoint, func(context.Context, pgx.Tx) error) error {
	return nil
}

func (scratchCheckpoints) List(context.Context) ([]subscribe.Checkpoint, error) { return nil, nil }

// maxMembersSeen bounds the members a group remembers between two looks
// at its status (members named afresh at every start would grow it).
const maxMembersSeen = 10_000

// forgetMembersLocked drops the members not seen within memberWindow.
func (g *Group) forgetMembersLocked(now time.Time) {
	for name, at := range g.members {
		if now.Sub(at) > memberWindow {
			delete(g.members, name)
		}
	}
}
