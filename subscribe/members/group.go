package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
)

// Group is one server's handle of a (group, topic): the state read from
// the group's log, the index of its events, the reader that fills the
// index and the committer that writes the log. Every change of the state
// goes through the committer goroutine (run), which alone writes entries,
// reads other servers' entries and applies both; mu guards what the
// request goroutines and the reader share with it.
type Group struct {
	name, topic string
	root        storage.Store
	o           Options
	log         *groupLog
	logger      *slog.Logger
	phantoms    *subscribe.Phantoms

	mu        sync.Mutex
	st        *state
	ix        *index
	confirmed time.Time     // when st.Seq was last known to be the log's head
	changed   chan struct{} // closed and replaced on every change
	pending   []*intent
	readErr   error // why the reader stopped, until the next reset
	reader    context.CancelFunc
	members   map[string]time.Time // member name -> its last request
	waiting   int                  // receives waiting for an event
	foreignAt time.Time            // when another server's entry was last read
	lastUsed  time.Time
	rate      rateWindow
	snapSeq   int64
	snapAt    time.Time
	snapping  bool
	entryAt   time.Time // when an entry was last applied

	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// openGroup reads the group's state and starts its committer (and its
// reader, once the group exists).
func openGroup(ctx context.Context, root storage.Store, group, topic string, o Options) (*Group, error) {
	lg, err := newGroupLog(root, group, topic)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	st, confirmed, err := lg.load(ctx)
	if err != nil {
		return nil, err
	}
	g := &Group{name: group, topic: topic, root: root, o: o, log: lg, st: st, confirmed: confirmed, phantoms: subscribe.NewPhantoms(root),
		logger: o.Logger.With("group", group, "topic", topic), changed: make(chan struct{}),
		members: map[string]time.Time{}, lastUsed: o.Now(), snapSeq: st.Seq, snapAt: o.Now(),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	g.ix = newIndex(o.Dedup, st.Low)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g.stop = stop
	if st.Epoch > 0 {
		g.mu.Lock()
		g.startReaderLocked(runCtx)
		g.mu.Unlock()
	}
	go g.run(runCtx)
	return g, nil
}

// close stops the committer and the reader; pending requests fail.
func (g *Group) close() {
	g.stop()
	<-g.done
}

func (g *Group) now() time.Time { return g.o.Now() }

// notifyLocked wakes everything waiting for a change.
func (g *Group) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// run is the committer: it writes the pending intents as entries and
// reads other servers' entries, until ctx ends.
func (g *Group) run(ctx context.Context) {
	defer close(g.done)
	defer func() {
		g.mu.Lock()
		if g.reader != nil {
			g.reader()
		}
		pending := g.pending
		g.pending = nil
		g.mu.Unlock()
		for _, it := range pending {
			it.finish(outcome{err: errClosed})
		}
	}()
	tick := time.NewTicker(g.o.SyncInterval)
	defer tick.Stop()
	var lastSync time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.kick:
		case <-tick.C:
		}
		now := g.now()
		if g.syncDue(now, lastSync) {
			if err := g.sync(ctx); err != nil && ctx.Err() == nil {
				g.logger.Warn("members: reading the group's log failed; trying again", "err", err)
			}
			lastSync = now
		}
		g.commitPending(ctx)
		g.commitLow(ctx)
		g.snapshot(ctx)
	}
}

var errClosed = errors.New("the group was closed on this server: try again")

// syncDue: other servers' entries are read every tick while another
// server was seen writing in the last 30 s, every ten ticks otherwise (a
// server that appears is met at its first write, or its entries at the
// next put, which then fails and the committer reads). A single server
// needs no reading: it applies its own entries as it writes them.
func (g *Group) syncDue(now, last time.Time) bool {
	g.mu.Lock()
	busy := now.Sub(g.foreignAt) < 30*time.Second
	g.mu.Unlock()
	return busy || now.Sub(last) >= 10*g.o.SyncInterval
}

// sync reads and applies the entries after the state's, written by other
// servers (or by this one, when a put's outcome was unknown). A gap (the
// log was cleaned past the state) reads the newest snapshot instead.
func (g *Group) sync(ctx context.Context) error {
	ents, confirmed, err := g.log.readAfter(ctx, g.st.Seq)
	if errors.Is(err, errGap) {
		return g.reload(ctx)
	}
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, lg := range ents {
		g.applyLocked(ctx, lg.seq, &lg.e)
		if lg.e.Server != g.o.Server {
			g.foreignAt = g.now()
		}
	}
	g.confirmed = confirmed
	return nil
}

// reload replaces the state by the log's newest, and the index with it.
func (g *Group) reload(ctx context.Context) error {
	st, confirmed, err := g.log.load(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.logger.Info("members: the group's log moved past this server's state; read its newest snapshot", "seq", st.Seq)
	old := g.st
	g.st, g.confirmed, g.foreignAt = st, confirmed, g.now()
	if st.Epoch != old.Epoch {
		g.restartLocked(ctx)
	} else {
		g.ix.rebuild(st, g.now())
	}
	g.notifyLocked()
	return nil
}

// restartLocked drops the index and reads the topic again from the
// state's Low (a reset, or a new epoch read from the log).
func (g *Group) restartLocked(ctx context.Context) {
	g.ix = newIndex(g.o.Dedup, g.st.Low)
	g.readErr = nil
	g.startReaderLocked(ctx)
}

// applyLocked applies entry seq to the state and the index.
func (g *Group) applyLocked(ctx context.Context, seq int64, e *entry) {
	now := g.now()
	before := g.st.Epoch
	g.st.apply(seq, e)
	g.entryAt = now
	if e.Reset != nil || g.st.Epoch != before {
		g.restartLocked(ctx)
		g.notifyLocked()
		return
	}
	x, st := g.ix, g.st
	for _, l := range e.Lease {
		if r := x.byPos[l.pos()]; r != nil {
			x.schedule(r, st, now)
		}
	}
	for _, a := range e.Ack {
		x.acked(a.pos(), st, now)
	}
	g.rate.add(now, int64(len(e.Ack)))
	for _, a := range e.Skip {
		x.acked(a.pos(), st, now)
	}
	for _, n := range e.Nack {
		if r := x.byPos[n.pos()]; r != nil {
			x.schedule(r, st, now)
		}
	}
	if e.Low != nil {
		x.dropBefore(st.Low, st, now)
	}
	x.trim()
	g.notifyLocked()
}

// rebuild brings the index in line with a state read anew within the
// same epoch: records it acknowledged are dropped, the others filed again.
func (x *index) rebuild(st *state, now time.Time) {
	x.dropBefore(st.Low, st, now)
	for _, r := range x.buf[x.front:] {
		if r.acked {
			continue
		}
		if st.isAcked(r.pos) {
			x.acked(r.pos, st, now)
			continue
		}
		x.schedule(r, st, now)
	}
	x.trim()
}

// submit queues an intent for the committer and waits for its outcome.
func (g *Group) submit(ctx context.Context, it *intent) outcome {
	it.done = make(chan outcome, 1)
	g.mu.Lock()
	g.pending = append(g.pending, it)
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	select {
	case out := <-it.done:
		return out
	case <-ctx.Done():
		return outcome{err: ctx.Err()}
	case <-g.done:
		return outcome{err: errClosed}
	}
}

// storeError is a failure of the store, not of the request.
type storeError struct{ err error }

func (e *storeError) Error() string {
	return fmt.Sprintf("the group's state could not be written or read (the store failed; nothing is lost, try again): %v", e.err)
}
func (e *storeError) Unwrap() error { return e.err }

// IsUnavailable reports whether err is the store or the server failing
// (a retry may succeed), not the request.
func IsUnavailable(err error) bool {
	var (
		se *storeError
		ue *unavailableError
	)
	return errors.As(err, &se) || errors.As(err, &ue) || errors.Is(err, errClosed) || errors.Is(err, errContention)
}

// Unavailable marks err as a failure a retry may cure (a Source over the
// network: the server down or answering 5xx).
func Unavailable(err error) error { return &unavailableError{err} }

type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }
