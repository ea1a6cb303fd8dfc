package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/sink"
)

// committer turns batches into sink commits, one batch at a time and in
// order, and advances the durable position only after every topic commit of
// a batch has returned. It runs in its own goroutine so the receive loop
// keeps reading (and answering keepalives) while files and commits are
// written.
//
// A failed commit fails the committer: failed() reports the error at once,
// trySubmit refuses further batches, and batches already handed over are
// aborted. The session then ends with that error.
type committer struct {
	r       *Relay
	in      chan *batch
	durable atomic.Uint64 // highest LSN whose every event is in a durable commit
	busy    atomic.Bool   // a batch is being committed
	idleC   chan struct{} // signalled (non-blocking) when a batch is done

	errOnce   sync.Once
	err       error
	failC     chan struct{} // closed when err is set
	done      chan struct{} // closed when run returns
	closeOnce sync.Once
}

func newCommitter(r *Relay, start pglogrepl.LSN) *committer {
	c := &committer{r: r, in: make(chan *batch), idleC: make(chan struct{}, 1),
		failC: make(chan struct{}), done: make(chan struct{})}
	c.durable.Store(uint64(start))
	return c
}

// run commits batches until in is closed.
func (c *committer) run(ctx context.Context) {
	defer close(c.done)
	for b := range c.in {
		if c.failed() != nil {
			b.abort()
		} else if err := c.commitBatch(ctx, b); err != nil {
			b.abort()
			c.fail(err)
		}
		c.busy.Store(false)
		select {
		case c.idleC <- struct{}{}:
		default:
		}
	}
}

func (c *committer) fail(err error) {
	c.errOnce.Do(func() {
		c.err = err
		close(c.failC)
	})
}

// failed returns the commit error, if any.
func (c *committer) failed() error {
	select {
	case <-c.failC:
		return c.err
	default:
		return nil
	}
}

// trySubmit hands b over if the committer is idle and has not failed.
func (c *committer) trySubmit(b *batch) bool {
	if c.failed() != nil || !c.busy.CompareAndSwap(false, true) {
		return false
	}
	select {
	case c.in <- b:
		return true
	case <-c.done:
		c.busy.Store(false)
		return false
	}
}

// idle reports whether no batch is being committed.
func (c *committer) idle() bool { return !c.busy.Load() }

// waitIdle waits until the committer finishes a batch, fails, ctx ends or
// at most d.
func (c *committer) waitIdle(ctx context.Context, d time.Duration) error {
	if c.idle() {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.idleC:
	case <-c.failC:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return nil
}

// close stops the committer after the batch in flight and returns its
// error, if any.
func (c *committer) close() error {
	c.closeOnce.Do(func() { close(c.in) })
	<-c.done
	return c.failed()
}

// advance moves the durable position forward (never back).
func (c *committer) advance(lsn pglogrepl.LSN) {
	for {
		cur := c.durable.Load()
		if uint64(lsn) <= cur || c.durable.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

func (c *committer) durableLSN() pglogrepl.LSN { return pglogrepl.LSN(c.durable.Load()) }

func (c *committer) commitBatch(ctx context.Context, b *batch) (err error) {
	start := time.Now()
	ctx = b.trace.commitContext(ctx, b)
	defer func() { b.trace.end(b, err) }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, name := range b.order {
		g.Go(func() error { return c.commitTopic(gctx, b, name) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.advance(b.ackLSN())
	c.r.batchStart.Store(start.UnixNano())
	c.r.health.progress(time.Now())
	c.r.metrics.batchCommitted(b, time.Since(start))
	c.r.log.Debug("batch committed", "batch", b.seq, "events", b.events, "topics", len(b.order),
		"txs", b.txs, "end_lsn", b.endLSN, "took", time.Since(start))
	return nil
}

func (c *committer) commitTopic(ctx context.Context, b *batch, name string) (err error) {
	ctx, span := c.startTopicCommit(ctx, b, name)
	var res sink.Commit
	defer func() { endTopicCommit(span, name, b.lastLSN, res, err) }()
	res, err = b.sb.Commit(ctx, name, int64(b.lastLSN))
	if errors.Is(err, sink.ErrFenced) {
		return fatalError{fmt.Errorf("topic %q: another relay of this source (appId %q) already committed up to LSN %s; this instance is a zombie and stops: %w",
			name, c.r.id.AppID, b.lastLSN, err)}
	}
	c.r.metrics.lostRaces(res.Races)
	if err != nil {
		return err
	}
	c.r.metrics.topicCommitted(name, res.Events)
	c.r.log.Debug("topic committed", "topic", name, "version", res.Version, "events", res.Events, "files", res.Files)
	return nil
}
