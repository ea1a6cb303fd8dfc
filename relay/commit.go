package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// committer turns batches into Delta commits, one batch at a time and in
// order, and advances the durable position only after every topic commit of
// a batch has returned. It runs in its own goroutine so the receive loop
// keeps reading (and answering keepalives) while files and commits are
// written.
type committer struct {
	root      storage.Store
	appID     string
	tableOpts delta.Options
	log       *slog.Logger
	metrics   *Metrics

	in      chan *batch
	durable atomic.Uint64 // highest LSN whose every event is in a durable Delta commit
	busy    atomic.Bool   // a batch is being committed
	done    chan struct{}
	errOnce sync.Once
	err     error
}

func newCommitter(root storage.Store, appID string, start pglogrepl.LSN, log *slog.Logger, m *Metrics) *committer {
	c := &committer{root: root, appID: appID, tableOpts: delta.Options{Logger: log, AsyncCheckpoints: true}, log: log, metrics: m, in: make(chan *batch), done: make(chan struct{})}
	c.durable.Store(uint64(start))
	return c
}

// run commits batches until in is closed or a commit fails.
func (c *committer) run(ctx context.Context) {
	defer close(c.done)
	for b := range c.in {
		if err := c.commitBatch(ctx, b); err != nil {
			c.fail(err)
			b.abort()
			for b := range c.in { // drain so senders never block
				b.abort()
			}
			return
		}
		c.busy.Store(false)
	}
}

func (c *committer) fail(err error) {
	c.errOnce.Do(func() { c.err = err })
}

// failed returns the commit error, if any; valid after done is closed or
// at any time for a quick check.
func (c *committer) failed() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// trySubmit hands b over if the committer is idle.
func (c *committer) trySubmit(b *batch) bool {
	if !c.busy.CompareAndSwap(false, true) {
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

// advance moves the durable position forward (never back).
func (c *committer) advance(lsn pglogrepl.LSN) {
	for {
		cur := c.durable.Load()
		if uint64(lsn) <= cur || c.durable.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

func (c *committer) commitBatch(ctx context.Context, b *batch) error {
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, name := range b.order {
		tb := b.topics[name]
		g.Go(func() error { return c.commitTopic(gctx, b, tb) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	c.advance(b.endLSN)
	c.metrics.batchCommitted(b, time.Since(start))
	c.log.Debug("batch committed", "batch", b.seq, "events", b.events, "topics", len(b.order),
		"txs", b.txs, "end_lsn", b.endLSN, "took", time.Since(start))
	return nil
}

func (c *committer) commitTopic(ctx context.Context, b *batch, tb *topicBatch) error {
	t := tb.table
	adds, err := tb.writer.Close(ctx)
	if err != nil {
		return fmt.Errorf("write files of topic %q: %w", t.name, err)
	}
	if err := t.ensureTable(ctx, c.root, c.tableOpts); err != nil {
		return err
	}
	version, err := t.table.Commit(ctx, delta.CommitActions{
		Adds:      adds,
		Txn:       &delta.Txn{AppID: c.appID, Version: int64(b.lastLSN)},
		Operation: "STREAMING UPDATE",
	})
	if errors.Is(err, delta.ErrAlreadyCommitted) {
		return fatalError{fmt.Errorf("topic %q: another relay with appId %q already committed up to LSN %s; this instance is a zombie and stops: %w",
			t.name, c.appID, b.lastLSN, err)}
	}
	if err != nil {
		return fmt.Errorf("commit topic %q (txn version %s): %w", t.name, b.lastLSN, err)
	}
	c.metrics.topicCommitted(t.name, tb.events, b.lastTime)
	c.log.Debug("topic committed", "topic", t.name, "version", version, "events", tb.events, "files", len(adds))
	return nil
}
