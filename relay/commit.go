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
	"github.com/deltabus/deltabus/txlog"
)

// committer turns batches into sink commits in two stages, each running
// in its own goroutine so that the receive loop keeps reading (and
// answering keepalives) meanwhile:
//
//   - files writes a batch's data files (sink.Batch.Prepare), its tables
//     in parallel (Config.TableParallelism at once): nothing a reader sees;
//   - logs writes the batch's log entries (sink.Batch.Commit), its tables
//     in parallel, batches strictly one after another in order, and
//     advances the durable position only after every topic commit of the
//     batch has returned.
//
// The session hands a batch over as soon as files is free to take it
// (group commit: free), not when a timer fires, and under load the open
// batch grows while the previous one commits. By default files stays busy
// until logs is done with its batch, so one batch is in flight and the
// two stages never write at once: on a disk (and on an S3 server with
// one), puts issued together queue for the same device, so overlapping
// the stages made each slower and the latency worse (docs/benchmarks.md,
// "Commit stages one after the other"). With Config.CommitOverlap, files
// is free once logs has taken its batch: batch N+1's files are written
// while batch N's log entries are made durable, at most two batches are
// in flight, for stores whose requests do not share a device. The
// committer wakes the session (wake) when files becomes free or a batch
// is durable.
//
// A failed stage fails the committer: failed() reports the error at once,
// trySubmit refuses further batches, and every batch handed over and not
// yet durable is aborted (files already written are orphans). The session
// then ends with that error.
type committer struct {
	r       *Relay
	in      chan *batch   // session → files
	logs    chan *batch   // files → logs; unbuffered: files stays busy until logs takes its batch
	durable atomic.Uint64 // highest LSN whose every event is in a durable commit
	busy    atomic.Bool   // files holds a batch: the session may not submit
	pending atomic.Int32  // batches handed over and not yet durable or aborted
	// waiting is set by a session that holds a batch for a busy files
	// stage: the stage wakes it when it is free.
	waiting atomic.Bool
	wake    func()        // wakes the session's receive loop
	idleC   chan struct{} // signalled (non-blocking) when files is free or a batch is done
	// overlap (Config.CommitOverlap): files takes the next batch as soon
	// as logs has taken its batch. Without it, files waits on loggedC
	// until logs is done with its batch, so the two stages never write at
	// once.
	overlap bool
	loggedC chan struct{}
	txw     *txlog.Writer // the transaction records (txrecords.go), opened at the first
	// held are the records of batches whose topic commits are durable but
	// whose records wait for the next records commit (RecordsInterval);
	// heldAck is the acknowledgement they hold back, heldBatches how many
	// batches they are (still pending: the committer is not idle).
	held        []txlog.Entry
	heldAck     pglogrepl.LSN
	heldBatches int32
	recordsAt   time.Time

	errOnce   sync.Once
	err       error
	failC     chan struct{} // closed when err is set
	done      chan struct{} // closed when both stages returned
	closeOnce sync.Once
}

// newCommitter returns a committer whose durable position starts at start;
// wake (nil: none) interrupts the session's wait for a message.
func newCommitter(r *Relay, start pglogrepl.LSN, wake func()) *committer {
	if wake == nil {
		wake = func() {}
	}
	c := &committer{r: r, in: make(chan *batch), logs: make(chan *batch), wake: wake,
		idleC: make(chan struct{}, 1), failC: make(chan struct{}), done: make(chan struct{}),
		overlap: r.cfg.CommitOverlap, loggedC: make(chan struct{}, 1)}
	c.durable.Store(uint64(start))
	return c
}

// run runs both stages until in is closed and every batch handed over is
// durable or aborted.
func (c *committer) run(ctx context.Context) {
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		c.runLogs(ctx)
	}()
	c.runFiles(ctx)
	close(c.logs)
	<-logsDone
	close(c.done)
}

// runFiles is the files stage.
func (c *committer) runFiles(ctx context.Context) {
	for b := range c.in {
		b.startedAt = time.Now()
		if c.failed() != nil {
			c.drop(b)
		} else if err := c.prepareBatch(ctx, b); err != nil {
			c.fail(err)
			c.drop(b)
		} else {
			b.filedAt = time.Now()
			c.logs <- b
			if !c.overlap {
				<-c.loggedC
			}
		}
		c.busy.Store(false)
		c.signal(c.waiting.Swap(false))
	}
}

// runLogs is the logs stage. Records held back (heldRecords) are
// committed when the interval passes, or when the stage ends.
func (c *committer) runLogs(ctx context.Context) {
	var flush <-chan time.Time
	for {
		var b *batch
		select {
		case b = <-c.logs:
			if b == nil { // closed: the session ends, nothing is held back
				c.flushRecords(ctx)
				return
			}
		case <-flush:
			flush = nil
			c.flushRecords(ctx)
			continue
		}
		if c.failed() != nil {
			c.drop(b)
			c.logged()
			continue
		}
		held, err := c.commitBatch(ctx, b)
		if err != nil {
			c.fail(err)
			c.drop(b)
			c.logged()
			continue
		}
		if held {
			if flush == nil {
				flush = time.After(time.Until(c.recordsAt.Add(c.recordsInterval())))
			}
		} else {
			c.pending.Add(-1)
			c.signal(true) // the session acknowledges what is now durable
		}
		c.logged()
	}
}

// logged tells files, when the stages do not overlap, that logs is done
// with the batch files handed it.
func (c *committer) logged() {
	if !c.overlap {
		c.loggedC <- struct{}{}
	}
}

// drop aborts a batch that will not be committed.
func (c *committer) drop(b *batch) {
	b.abort()
	c.pending.Add(-1)
}

// signal tells waitIdle that a stage moved on and, with wake, interrupts
// the session's receive.
func (c *committer) signal(wake bool) {
	select {
	case c.idleC <- struct{}{}:
	default:
	}
	if wake {
		c.wake()
	}
}

func (c *committer) fail(err error) {
	c.errOnce.Do(func() {
		c.err = err
		close(c.failC)
		c.wake()
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

// trySubmit hands b over if the files stage is free and the committer has
// not failed.
func (c *committer) trySubmit(b *batch) bool {
	if c.failed() != nil || !c.busy.CompareAndSwap(false, true) {
		return false
	}
	c.pending.Add(1)
	select {
	case c.in <- b:
		return true
	case <-c.done:
		c.pending.Add(-1)
		c.busy.Store(false)
		return false
	}
}

// free reports whether the files stage can take a batch now. When it
// cannot, it asks to be woken when it can.
func (c *committer) free() bool {
	if !c.busy.Load() {
		return true
	}
	c.waiting.Store(true)
	// Checked again: files may have become free between the two loads,
	// before it could see waiting.
	return !c.busy.Load()
}

// idle reports whether no batch is being committed: every batch handed
// over is durable (or the committer failed).
func (c *committer) idle() bool { return c.pending.Load() == 0 }

// waitIdle waits until a stage moves on, the committer fails, ctx ends or
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

// close stops the committer after the batches in flight and returns its
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

// prepareBatch writes the data files of every topic of b.
func (c *committer) prepareBatch(ctx context.Context, b *batch) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.r.cfg.TableParallelism)
	for _, name := range b.order {
		g.Go(func() error {
			if err := b.sb.Prepare(gctx, name); err != nil {
				return c.topicError(b, name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// commitBatch commits b's tables, then its records, then moves the
// durable position to b's acknowledgement; held reports that b's records
// (and with them its acknowledgement) wait for the next records commit.
func (c *committer) commitBatch(ctx context.Context, b *batch) (held bool, err error) {
	start := b.startedAt
	b.loggingAt = time.Now()
	ctx = b.trace.commitContext(ctx, b)
	defer func() { b.trace.end(b, err) }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.r.cfg.TableParallelism)
	for _, name := range b.order {
		g.Go(func() error { return c.commitTopic(gctx, b, name) })
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	if held = c.holdRecords(b); !held {
		if err := c.commitRecords(ctx, b.records); err != nil {
			return false, err
		}
		c.advance(b.ackLSN())
	}
	c.r.batchStart.Store(start.UnixNano())
	c.r.health.progress(time.Now())
	c.r.metrics.batchCommitted(b, time.Since(start))
	c.r.log.Debug("batch committed", "batch", b.seq, "events", b.events, "tables", len(b.order),
		"txs", b.txs, "end_lsn", b.endLSN, "took", time.Since(start), "records_pending", held)
	return held, nil
}

// commitTopic commits one table of b: a topic's own, or a group's with
// all its topics of the batch.
func (c *committer) commitTopic(ctx context.Context, b *batch, table string) (err error) {
	ctx, span := c.startTopicCommit(ctx, b, table)
	var res sink.Commit
	defer func() { endTopicCommit(span, table, b.lastLSN, res, err) }()
	res, err = b.sb.Commit(ctx, table, c.r.positions.Pos(b.lastLSN))
	c.r.metrics.lostRaces(res.Races)
	if err != nil {
		return c.topicError(b, table, err)
	}
	if res.Topics == nil {
		c.r.metrics.topicCommitted(table, res.Events) // the topic's own table
	}
	for name, events := range res.Topics {
		c.r.metrics.topicCommitted(name, events)
	}
	c.r.log.Debug("table committed", "table", table, "topics", len(res.Topics), "version", res.Version, "events", res.Events, "files", res.Files)
	return nil
}

// topicError names a fenced relay a zombie.
func (c *committer) topicError(b *batch, name string, err error) error {
	if errors.Is(err, sink.ErrFenced) {
		return fatalError{fmt.Errorf("topic %q: another relay of this source (appId %q) already committed up to LSN %s; this instance is a zombie and stops: %w",
			name, c.r.id.AppID, b.lastLSN, err)}
	}
	return err
}
