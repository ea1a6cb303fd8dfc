// Package deltasink implements the relay's sink.Sink over Delta topic
// tables: one table per topic under the store root, or one per topic
// group (catalog.Group) shared by its topics (sink/topic gives their
// schema and data files, sink/delta their log), each commit carrying
// txn{appId, version = batch position} (in a group's table one txn per
// topic of the commit, appId/topic: catalog.Placement), and the catalog's
// topic registry.
//
// Guarantees, beyond the sink contract:
//   - A table is created (version 0) and registered by the first commit of
//     its topic; a registered topic whose table is gone is Missing, never
//     recreated empty. A grouped topic is registered, with its group
//     table's id, before its first rows are committed: when the group's
//     table is gone, or was replaced by another (its events with it), the
//     topic is Missing.
//   - A group's batch is one commit: one mixed data file (or more, past
//     the file size) for all its topics, whose stats bound the topic
//     column, so the requests of a commit do not grow with its topics.
//   - Before each commit the previous version's commit file is checked
//     (with Options.ReadAhead, read while the commit's data files are
//     written, at most 250 ms before its put): a table deleted under the
//     relay, or restored to an older copy of itself, fails with
//     sink.ErrTableGone, and no log without its beginning, nor one that
//     lost commits, is ever written on.
//   - A table that no longer holds the source's claimed progress of a
//     topic (catalog.Claim: created again, by another source's rebuild
//     say, or restored to an older copy) is Missing to that source until
//     its own events are restored into it (claims.go).
//   - Rows of a batch wait in per-topic column buffers, then in encoded
//     files held in memory up to topic.FileOptions.MemoryBuffer; across the
//     topics of a batch, past Options.PendingBudget of both, the topic
//     holding the most has its rows encoded or its files written to the
//     store (topic.BoundPending), so memory is bounded whatever the number
//     of topics or the transaction size.
package deltasink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Options configure a Sink.
type Options struct {
	AppID  string       // the relay's txn appId (required)
	Logger *slog.Logger // nil = slog.Default()
	Files  topic.FileOptions
	// PendingBudget bounds what a batch holds in memory across its topics:
	// unencoded rows and encoded files not yet written to the store
	// (default 16 MiB).
	PendingBudget int64
	// SyncCheckpoints writes checkpoints inside the commit that reaches
	// the interval instead of in the background.
	SyncCheckpoints bool
	// ReadAhead reads the version each commit follows while the commit's
	// data files are written (delta.Table.CheckAhead), for stores whose
	// reads are network round trips (S3): the commit's put then waits for
	// no GET. On local disk the read costs microseconds and stays on the
	// commit's path.
	ReadAhead bool
}

// Sink is a sink.Sink over the Delta tables of a store.
type Sink struct {
	root storage.Store
	opts Options

	mu     sync.Mutex
	tables map[string]*delta.Table // handles of the tables this process writes
	// places is where each topic Open saw lives; opened is when each
	// group table's handle was last read whole (groupHandle).
	places map[string]catalog.Placement
	opened map[string]time.Time
	groups groupCache
	// bufferHints is, per topic, the capacity of the row buffers its
	// last batch's writer released (topic.FileOptions.BufferHint).
	bufferHints map[string]int
	// stateWarned is, per table, the state size it was last warned at
	// (warnLargeState).
	stateWarned map[string]int64

	checkpointGate *delta.CheckpointGate // the tables' background checkpoints take turns
	claims         *claims               // the source's claims on the tables (claims.go)
}

var (
	_ sink.Sink          = (*Sink)(nil)
	_ sink.StateReporter = (*Sink)(nil)
)

// New returns a Sink over root.
func New(root storage.Store, opts Options) *Sink {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PendingBudget <= 0 {
		opts.PendingBudget = 16 << 20
	}
	opts.Files.Source = opts.AppID // every row says which source wrote it
	return &Sink{root: root, opts: opts, tables: map[string]*delta.Table{}, bufferHints: map[string]int{}, stateWarned: map[string]int64{},
		places: map[string]catalog.Placement{}, opened: map[string]time.Time{}, checkpointGate: delta.NewCheckpointGate(),
		claims: newClaims(root, opts.AppID, opts.Logger)}
}

func (s *Sink) tableOpts() delta.Options {
	return delta.Options{Logger: s.opts.Logger, AsyncCheckpoints: !s.opts.SyncCheckpoints, CheckpointGate: s.checkpointGate,
		CheckpointSpacing: delta.DefaultCheckpointSpacing}
}

func (s *Sink) sub(name string) storage.Store { return storage.Sub(s.root, name) }

// Open finds where the topic lives (package catalog's registry and
// groups), reads that table and keeps the handle for commits. A topic's
// own table is read afresh; a group's is read whole once per
// groupReuse, and otherwise checked (its latest commit still there).
func (s *Sink) Open(ctx context.Context, name string) (sink.Topic, error) {
	p, err := s.locate(ctx, name)
	if err != nil {
		return sink.Topic{Name: name, Table: name, Position: -1}, err
	}
	if p.Shared() {
		return s.openGrouped(ctx, p)
	}
	return s.openOwn(ctx, p)
}

// openOwn reads a topic's own table afresh. Whether the registry holds
// the topic is p's, read by locate just before; a table found but not
// registered (its creator stopped between version 0 and registering it)
// is registered before it is used.
func (s *Sink) openOwn(ctx context.Context, p catalog.Placement) (sink.Topic, error) {
	name := p.Topic
	t := sink.Topic{Name: name, Table: name, Position: -1}
	s.forget(name)
	tbl, err := delta.OpenTable(ctx, s.sub(name), s.tableOpts())
	switch {
	case errors.Is(err, delta.ErrNoTable):
		t.Status = sink.New
		if p.Registered {
			t.Status, t.Reason = sink.Missing, "the catalog registers the topic but its table is gone"
		}
	case errors.Is(err, delta.ErrBrokenLog):
		t.Status, t.Reason = sink.Missing, err.Error()
	case errors.Is(err, delta.ErrUnsupportedProtocol):
		t.Status, t.Reason = s.notOurs(ctx, name, err.Error())
	case err != nil:
		return t, fmt.Errorf("open topic %q table: %w", name, err)
	default:
		if v, ok := tbl.TxnVersion(s.opts.AppID); ok {
			t.Position = v
		}
		lost, err := s.claims.check(ctx, name, name, tbl.Metadata().ID, tbl.Version(), t.Position)
		if err != nil {
			return t, fmt.Errorf("open topic %q table: %w", name, err)
		}
		if lost != "" {
			t.Status, t.Reason = sink.Missing, lost
			return t, nil
		}
		upgraded, err := topic.CheckOrUpgrade(ctx, tbl, name == outbox.DeadLetterTopic)
		switch {
		case errors.Is(err, topic.ErrForeignSchema):
			t.Status, t.Reason = sink.Foreign, err.Error()
			if t.Position >= 0 {
				t.Status = sink.Incompatible
			}
		case err != nil:
			return t, fmt.Errorf("open topic %q table: %w", name, err)
		default:
			if upgraded {
				s.opts.Logger.Info("topic table upgraded to this release's schema (nullable columns added)", "topic", name)
			}
			if !p.Registered {
				// Its creator stopped between version 0 and registering it.
				if err := catalog.RegisterTopic(ctx, s.root, name); err != nil {
					return t, err
				}
			}
			s.keep(name, tbl)
		}
	}
	if name == outbox.DeadLetterTopic && (t.Status == sink.Foreign || t.Status == sink.Incompatible) {
		return t, fmt.Errorf("the dead-letter table %s cannot be written (%s): move it away so the relay can create its own", s.sub(name), t.Reason)
	}
	return t, nil
}

// notOurs tells a table this relay wrote (its log holds our txn) from one
// it never wrote.
func (s *Sink) notOurs(ctx context.Context, name, reason string) (sink.Status, string) {
	snap, err := delta.LoadSnapshot(ctx, s.sub(name), -1)
	if err == nil {
		if _, ok := snap.Txns[s.opts.AppID]; ok {
			return sink.Incompatible, reason
		}
	}
	return sink.Foreign, reason
}

func (s *Sink) keep(name string, t *delta.Table) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables[name] = t
}

func (s *Sink) forget(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tables, name)
}

// handle returns the table's handle if the sink has it open, nil if not.
func (s *Sink) handle(name string) *delta.Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tables[name]
}

// table returns the topic's handle, opening the table, or creating and
// registering it on its topic's first commit. An existing table is opened
// as it is (another writer may have changed its properties, its
// description or its column comments since, or created it a moment ago):
// only a schema that is not a DeltaBus topic schema refuses it.
func (s *Sink) table(ctx context.Context, name string) (*delta.Table, error) {
	if t := s.handle(name); t != nil {
		return t, nil
	}
	t, err := s.openExisting(ctx, name)
	if errors.Is(err, delta.ErrNoTable) {
		meta, proto := topic.NewTableMetadata(name)
		err = delta.CreateTable(ctx, s.sub(name), meta, proto, nil)
		if err != nil && !errors.Is(err, delta.ErrTableExists) {
			return nil, fmt.Errorf("create topic %q table: %w", name, err)
		}
		t, err = s.openExisting(ctx, name) // ours, or a concurrent writer's
	}
	if err != nil {
		return nil, err
	}
	if _, group := catalog.GroupOfTable(name); !group {
		// A group's topics are registered one by one (registerGrouped).
		if err := catalog.RegisterTopic(ctx, s.root, name); err != nil {
			return nil, err
		}
	}
	s.keep(name, t)
	return t, nil
}

// openExisting opens the topic's table and checks (or upgrades) its schema;
// delta.ErrNoTable when there is none.
func (s *Sink) openExisting(ctx context.Context, name string) (*delta.Table, error) {
	t, err := delta.OpenTable(ctx, s.sub(name), s.tableOpts())
	if errors.Is(err, delta.ErrNoTable) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("open topic %q table: %w: %w", name, sink.ErrIncompatible, err)
	}
	upgraded, err := topic.CheckOrUpgrade(ctx, t, name == outbox.DeadLetterTopic)
	switch {
	case errors.Is(err, topic.ErrForeignSchema):
		return nil, fmt.Errorf("topic %q table: %w: %w", name, sink.ErrIncompatible, err)
	case err != nil:
		return nil, fmt.Errorf("open topic %q table: %w", name, err)
	case upgraded:
		s.opts.Logger.Info("topic table upgraded to this release's schema (nullable columns added)", "topic", name)
	}
	return t, nil
}

// Close writes the claims the sink holds ahead of the store and waits for
// background checkpoints, or for ctx: a checkpoint cut short is harmless
// (readers fall back to an older one).
func (s *Sink) Close(ctx context.Context) {
	s.claims.flush(ctx)
	s.mu.Lock()
	tables := make([]*delta.Table, 0, len(s.tables))
	for _, t := range s.tables {
		tables = append(tables, t)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, t := range tables {
			t.Wait()
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// TableStates reports the state each open table holds in memory
// (sink.StateReporter), in no particular order: the relay's pacing reads
// it every second on its receive loop, and neither it nor the metrics
// need an order.
func (s *Sink) TableStates() []sink.TableState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]sink.TableState, 0, len(s.tables))
	for name, t := range s.tables {
		files, tombstones := t.StateSize()
		out = append(out, sink.TableState{Table: name, Files: files, Tombstones: tombstones})
	}
	return out
}

// bufferHint is the topic's topic.FileOptions.BufferHint.
func (s *Sink) bufferHint(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bufferHints[name]
}

// noteBuffers records the capacity of the row buffers the topic's writer
// released, the next writer's hint.
func (s *Sink) noteBuffers(name string, capacity int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bufferHints[name] = capacity
}
