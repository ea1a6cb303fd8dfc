package subscribe

import (
	"context"
	"sync"
)

// committer writes the checkpoints of an at-least-once store (the
// handler's effects are not in the checkpoint's transaction anyway) in the
// background, so the next batch is read and handled while the previous
// position is being written; a newer position replaces one not yet
// written. A crash can therefore deliver up to two batches again instead
// of one; a checkpoint moved by someone else stops the subscription at its
// next batch.
type committer struct {
	cps    Checkpoints
	mu     sync.Mutex
	cond   *sync.Cond
	stored *Checkpoint // last written
	next   *Checkpoint // waiting to be written
	busy   bool
	err    error
	done   bool
}

func newCommitter(cps Checkpoints, stored *Checkpoint) *committer {
	c := &committer{cps: cps, stored: stored}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// run writes pending positions until stop.
func (c *committer) run(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for c.next == nil && !c.done {
			c.cond.Wait()
		}
		if c.next == nil {
			return
		}
		next, prev := *c.next, c.stored
		c.next, c.busy = nil, true
		c.mu.Unlock()
		err := c.cps.Commit(ctx, prev, next, nil)
		c.mu.Lock()
		c.busy = false
		if err != nil {
			c.err, c.done = err, true
		} else {
			c.stored = &next
		}
		c.cond.Broadcast()
	}
}

// submit queues next; it returns the error of an earlier write.
func (c *committer) submit(next Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.next = &next
	c.cond.Broadcast()
	return nil
}

// wait blocks until everything submitted is written.
func (c *committer) wait() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for (c.next != nil || c.busy) && c.err == nil {
		c.cond.Wait()
	}
	return c.err
}

// stop ends run after the pending write.
func (c *committer) stop() {
	c.mu.Lock()
	c.done = true
	c.cond.Broadcast()
	c.mu.Unlock()
}
