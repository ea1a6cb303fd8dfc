package members

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// Groups serves the members groups of one store: it opens a (group,
// topic) at its first request and closes it after Options.IdleClose
// without one. Safe for concurrent use.
type Groups struct {
	root storage.Store
	o    Options

	mu     sync.Mutex
	open   map[groupKey]*opening
	closed bool
	stop   context.CancelFunc
	done   chan struct{}
}

type groupKey struct{ group, topic string }

// opening is a group being opened or open: ready is closed once g or err
// is set.
type opening struct {
	ready chan struct{}
	g     *Group
	err   error
}

// New returns the groups of the store root. Close it to stop them.
func New(root storage.Store, o Options) *Groups {
	o = o.withDefaults(root)
	ctx, stop := context.WithCancel(context.Background())
	gs := &Groups{root: root, o: o, open: map[groupKey]*opening{}, stop: stop, done: make(chan struct{})}
	go gs.housekeep(ctx)
	return gs
}

var _ Source = (*Groups)(nil)

// Close stops every group; requests in flight fail.
func (gs *Groups) Close() {
	gs.mu.Lock()
	gs.closed = true
	open := gs.open
	gs.open = map[groupKey]*opening{}
	gs.mu.Unlock()
	gs.stop()
	<-gs.done
	for _, op := range open {
		<-op.ready
		if op.g != nil {
			op.g.close()
		}
	}
}

// checkNames refuses names that cannot be a group or a topic.
func checkNames(group, topic string) error {
	if err := subscribe.ValidGroup(group); err != nil {
		return &RequestError{Msg: err.Error()}
	}
	if topic == outbox.DeadLetterTopic {
		return nil
	}
	if err := outbox.ValidTopic(topic); err != nil {
		return &RequestError{Msg: err.Error()}
	}
	return nil
}

// group returns the open group, opening it first.
func (gs *Groups) group(ctx context.Context, group, topic string) (*Group, error) {
	if err := checkNames(group, topic); err != nil {
		return nil, err
	}
	k := groupKey{group, topic}
	gs.mu.Lock()
	if gs.closed {
		gs.mu.Unlock()
		return nil, errClosed
	}
	op := gs.open[k]
	if op == nil {
		op = &opening{ready: make(chan struct{})}
		gs.open[k] = op
		gs.mu.Unlock()
		op.g, op.err = openGroup(ctx, gs.root, group, topic, gs.o)
		if op.err != nil {
			gs.mu.Lock()
			delete(gs.open, k)
			gs.mu.Unlock()
			if _, ok := op.err.(*RequestError); !ok {
				op.err = &storeError{op.err}
			}
		}
		close(op.ready)
	} else {
		gs.mu.Unlock()
	}
	select {
	case <-op.ready:
		return op.g, op.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Receive implements Source.
func (gs *Groups) Receive(ctx context.Context, group, topic string, req ReceiveRequest) ([]Message, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	g, err := gs.group(ctx, group, topic)
	if err != nil {
		return nil, err
	}
	return g.receive(ctx, req)
}

// Ack implements Source.
func (gs *Groups) Ack(ctx context.Context, group, topic string, ackIDs []string) (AckResult, error) {
	g, err := gs.group(ctx, group, topic)
	if err != nil {
		return AckResult{}, err
	}
	return g.acknowledge(ctx, ackIDs, false, 0)
}

// Nack implements Source.
func (gs *Groups) Nack(ctx context.Context, group, topic string, ackIDs []string, retryAfter time.Duration) (AckResult, error) {
	g, err := gs.group(ctx, group, topic)
	if err != nil {
		return AckResult{}, err
	}
	return g.acknowledge(ctx, ackIDs, true, retryAfter)
}

// Reset implements Source.
func (gs *Groups) Reset(ctx context.Context, group, topic string, start subscribe.Start) (Position, error) {
	g, err := gs.group(ctx, group, topic)
	if err != nil {
		return Position{}, err
	}
	return g.reset(ctx, start)
}

// Status returns the state of every group open on this server, sorted by
// group and topic.
func (gs *Groups) Status() []Status {
	gs.mu.Lock()
	var open []*Group
	for _, op := range gs.open {
		select {
		case <-op.ready:
			if op.g != nil {
				open = append(open, op.g)
			}
		default:
		}
	}
	gs.mu.Unlock()
	out := make([]Status, 0, len(open))
	for _, g := range open {
		out = append(out, g.status())
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Topic, b.Topic))
	})
	return out
}

// housekeep closes idle groups and, with Options.Reveal, follows the
// store's erasures so that revealed fields of erased subjects stop at once.
func (gs *Groups) housekeep(ctx context.Context) {
	defer close(gs.done)
	var erasures *pii.ErasureWatcher
	if gs.o.Reveal != nil {
		erasures = pii.NewErasureWatcher(gs.root, gs.o.Reveal.Keys(), gs.o.Logger)
	}
	refresher, _ := gs.o.Upcasts.(interface{ Refresh(context.Context) error })
	var refreshed time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if refresher != nil && time.Since(refreshed) >= 10*time.Second {
			if err := refresher.Refresh(ctx); err != nil && ctx.Err() == nil {
				gs.o.Logger.Warn("members: reading the store's upcasters failed; the ones read before stay", "err", err)
			}
			refreshed = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if erasures != nil {
			if err := erasures.Poll(ctx); err != nil && ctx.Err() == nil {
				gs.o.Logger.Warn("members: reading the store's erasures failed", "err", err)
			}
		}
		gs.closeIdle()
	}
}

func (gs *Groups) closeIdle() {
	now := gs.o.Now()
	var idle []*Group
	gs.mu.Lock()
	for k, op := range gs.open {
		select {
		case <-op.ready:
		default:
			continue
		}
		g := op.g
		g.mu.Lock()
		quiet := now.Sub(g.lastUsed) > gs.o.IdleClose && g.waiting == 0 && len(g.pending) == 0
		g.mu.Unlock()
		if quiet {
			delete(gs.open, k)
			idle = append(idle, g)
		}
	}
	gs.mu.Unlock()
	for _, g := range idle {
		g.close()
	}
}
