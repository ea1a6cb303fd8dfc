package deltasink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
)

// batch is a sink.Batch: one FileWriter per topic. Once the batch is
// handed over, writers is only read; prepared is written by concurrent
// Prepares of different topics.
type batch struct {
	s       *Sink
	writers map[string]*topic.FileWriter
	events  int

	mu       sync.Mutex
	prepared map[string]files
}

// files are a topic's data files, in the store and in row order.
type files struct {
	adds []delta.Add
	rows int
}

// NewBatch starts a batch.
func (s *Sink) NewBatch() sink.Batch {
	return &batch{s: s, writers: map[string]*topic.FileWriter{}, prepared: map[string]files{}}
}

func (b *batch) writer(name string) *topic.FileWriter {
	w := b.writers[name]
	if w == nil {
		opts := b.s.opts.Files
		opts.DeadLetter = name == outbox.DeadLetterTopic
		opts.BufferHint = b.s.bufferHint(name)
		w = topic.NewFileWriter(b.s.sub(name), opts)
		b.writers[name] = w
	}
	return w
}

func (b *batch) Append(ev *outbox.Event) error {
	if err := b.writer(ev.Topic).Append(ev); err != nil {
		return err
	}
	return b.appended()
}

func (b *batch) AppendDeadLetter(dl *outbox.DeadLetter) error {
	if err := b.writer(outbox.DeadLetterTopic).AppendDeadLetter(dl); err != nil {
		return err
	}
	return b.appended()
}

// appended keeps memory bounded; it looks at the writers only every 1024
// rows, which keeps it off the hot path.
func (b *batch) appended() error {
	b.events++
	if b.events&1023 != 0 {
		return nil
	}
	return topic.BoundPending(b.s.opts.PendingBudget, func(yield func(*topic.FileWriter) bool) {
		for _, w := range b.writers {
			if !yield(w) {
				return
			}
		}
	})
}

// Carry moves the topic's writer, with its pending rows and its files
// (in memory or spilled, nothing uploaded), to next.
func (b *batch) Carry(name string, next sink.Batch) error {
	n, ok := next.(*batch)
	switch {
	case !ok || n.s != b.s:
		return fmt.Errorf("carry topic %q: the next batch is not of this sink", name)
	case b.writers[name] == nil:
		return fmt.Errorf("carry topic %q: nothing appended", name)
	case n.writers[name] != nil:
		return fmt.Errorf("carry topic %q: the next batch already has rows of it", name)
	}
	n.writers[name] = b.writers[name]
	delete(b.writers, name)
	return nil
}

// Prepare finishes the topic's files and writes them to the store
// (FileWriter.Close): on local disk each is fsynced and linked under its
// final name, on S3 uploaded. No log entry references them yet.
func (b *batch) Prepare(ctx context.Context, name string) error {
	w := b.writers[name]
	if w == nil {
		return fmt.Errorf("prepare topic %q: nothing appended", name)
	}
	rows := w.Rows()
	adds, err := w.Close(ctx)
	if err != nil {
		return fmt.Errorf("write files of topic %q: %w", name, err)
	}
	b.s.noteBuffers(name, w.BufferCap())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prepared[name] = files{adds: adds, rows: rows}
	return nil
}

// take returns the topic's prepared files, preparing them first if
// Prepare was not called.
func (b *batch) take(ctx context.Context, name string) (files, error) {
	b.mu.Lock()
	f, ok := b.prepared[name]
	delete(b.prepared, name)
	b.mu.Unlock()
	if ok {
		return f, nil
	}
	if err := b.Prepare(ctx, name); err != nil {
		return files{}, err
	}
	return b.take(ctx, name)
}

func (b *batch) Commit(ctx context.Context, name string, pos int64) (sink.Commit, error) {
	f, err := b.take(ctx, name)
	if err != nil {
		return sink.Commit{}, fmt.Errorf("commit topic %q: %w", name, err)
	}
	adds := f.adds
	c := sink.Commit{Events: f.rows}
	t, err := b.s.table(ctx, name)
	if err != nil {
		return c, err
	}
	races := t.LostRaces()
	c.Version, err = t.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: b.s.opts.AppID, Version: pos}, Operation: "STREAMING UPDATE"})
	c.Races = int(t.LostRaces() - races)
	if err != nil {
		if errors.Is(err, delta.ErrTableGone) {
			b.s.forget(name)
		}
		return c, commitError(name, pos, err)
	}
	c.Files = len(adds)
	for _, a := range adds {
		c.Bytes += a.Size
	}
	return c, nil
}

func (b *batch) Abort() {
	for _, w := range b.writers {
		w.Abort()
	}
}

func commitError(name string, pos int64, err error) error {
	switch {
	case errors.Is(err, delta.ErrTableGone):
		return fmt.Errorf("commit topic %q: %w: %w", name, sink.ErrTableGone, err)
	case errors.Is(err, delta.ErrAlreadyCommitted):
		return fmt.Errorf("topic %q position %d: %w: %w", name, pos, sink.ErrFenced, err)
	case errors.Is(err, delta.ErrConcurrentMetadataChange), errors.Is(err, delta.ErrUnsupportedProtocol):
		return fmt.Errorf("topic %q: %w: %w", name, sink.ErrIncompatible, err)
	}
	return fmt.Errorf("commit topic %q (position %d): %w", name, pos, err)
}

// CommitFiles commits data files written elsewhere (a snapshot, a
// rebuild) to the topic as one commit at position pos, creating and
// registering the table if it does not exist. It fails with sink.ErrFenced
// (wrapped) when the table is already at or past pos.
func (s *Sink) CommitFiles(ctx context.Context, name string, adds []delta.Add, pos int64) (int64, error) {
	s.forget(name)
	t, err := s.table(ctx, name)
	if err != nil {
		return -1, err
	}
	if cur, ok := t.TxnVersion(s.opts.AppID); ok && cur >= pos {
		return -1, fmt.Errorf("topic %q is at position %d, files for %d: %w", name, cur, pos, sink.ErrFenced)
	}
	v, err := t.Commit(ctx, delta.CommitActions{Adds: adds, Operation: "WRITE",
		Txn: &delta.Txn{AppID: s.opts.AppID, Version: pos}})
	if err != nil {
		return -1, commitError(name, pos, err)
	}
	return v, nil
}

// CommitRebuild commits a rebuild's snapshot files with its txn version;
// a table already at that position is left as it is.
func (s *Sink) CommitRebuild(ctx context.Context, rec catalog.RebuildRecord) error {
	_, err := s.CommitFiles(ctx, rec.Topic, rec.Adds, rec.TxnVersion)
	if err != nil && !errors.Is(err, sink.ErrFenced) {
		return fmt.Errorf("commit rebuild %s: %w", rec.ID, err)
	}
	return nil
}
