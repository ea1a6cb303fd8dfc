package deltasink

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
)

// batch is a sink.Batch: one FileWriter per table (a topic's own, or a
// group's shared by its topics). Once the batch is handed over, units is
// only read; prepared is written by concurrent Prepares of different
// tables.
type batch struct {
	s     *Sink
	units map[string]*unit // by table: a topic's own table is named as the topic
	// byTopic is the unit of each grouped topic (a group's table is never
	// named as a topic: topic names cannot start with "_").
	byTopic map[string]*unit
	// holds caps the position committed for a held topic (Hold).
	holds  map[string]int64
	events int

	mu       sync.Mutex
	prepared map[string]files
}

// unit is one table's share of a batch.
type unit struct {
	table  string
	w      *topic.FileWriter
	shared bool           // a group's table
	topics map[string]int // shared: events per topic, in this batch and carried into it
}

// files are a table's data files, in the store and in row order.
type files struct {
	adds []delta.Add
	rows int
}

// NewBatch starts a batch.
func (s *Sink) NewBatch() sink.Batch {
	return &batch{s: s, units: map[string]*unit{}, byTopic: map[string]*unit{}, prepared: map[string]files{}}
}

// unitOf returns the unit the topic's rows go to, starting it on the
// topic's first row in the batch.
func (b *batch) unitOf(name string) *unit {
	if u := b.units[name]; u != nil {
		return u // the topic's own table
	}
	if u := b.byTopic[name]; u != nil {
		return u
	}
	p := b.s.place(name)
	u := b.units[p.Table]
	if u == nil {
		opts := b.s.opts.Files
		opts.DeadLetter = p.Table == outbox.DeadLetterTopic
		opts.BufferHint = b.s.bufferHint(p.Table)
		u = &unit{table: p.Table, w: topic.NewFileWriter(b.s.sub(p.Table), opts), shared: p.Shared()}
		if u.shared {
			u.topics = map[string]int{}
		}
		b.units[p.Table] = u
	}
	if u.shared {
		b.byTopic[name] = u
	}
	return u
}

func (b *batch) Append(ev *outbox.Event) error {
	u := b.unitOf(ev.Topic)
	if err := u.w.Append(ev); err != nil {
		return err
	}
	if u.shared {
		u.topics[ev.Topic]++
	}
	return b.appended()
}

func (b *batch) AppendDeadLetter(dl *outbox.DeadLetter) error {
	if err := b.unitOf(outbox.DeadLetterTopic).w.AppendDeadLetter(dl); err != nil {
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
		for _, u := range b.units {
			if !yield(u.w) {
				return
			}
		}
	})
}

// Carry moves the table's writer, with its pending rows and its files
// (in memory or spilled, nothing uploaded), to next.
func (b *batch) Carry(table string, next sink.Batch) error {
	n, ok := next.(*batch)
	u := b.units[table]
	switch {
	case !ok || n.s != b.s:
		return fmt.Errorf("carry table %q: the next batch is not of this sink", table)
	case u == nil:
		return fmt.Errorf("carry table %q: nothing appended", table)
	case n.units[table] != nil:
		return fmt.Errorf("carry table %q: the next batch already has rows of it", table)
	}
	n.units[table] = u
	delete(b.units, table)
	for name, x := range b.byTopic {
		if x == u {
			n.byTopic[name] = u
			delete(b.byTopic, name)
		}
	}
	for name, pos := range b.holds {
		if name == table || (u.shared && u.topics[name] > 0) {
			n.Hold(name, pos)
			delete(b.holds, name)
		}
	}
	return nil
}

// Hold caps the position the commit of the topic's table records for it.
func (b *batch) Hold(topic string, pos int64) {
	if b.holds == nil {
		b.holds = map[string]int64{}
	}
	if cur, ok := b.holds[topic]; !ok || pos < cur {
		b.holds[topic] = pos
	}
}

// position is what the commit at pos records for the topic: pos, or its
// Hold position below it.
func (b *batch) position(topic string, pos int64) int64 {
	if h, ok := b.holds[topic]; ok && h < pos {
		return h
	}
	return pos
}

// Prepare finishes the table's files and writes them to the store
// (FileWriter.Close): on local disk each is fsynced and linked under its
// final name, on S3 uploaded. No log entry references them yet. With
// Options.ReadAhead, an open table reads the log's latest version
// meanwhile, ahead of its commit (delta.Table.CheckAhead).
func (b *batch) Prepare(ctx context.Context, table string) error {
	u := b.units[table]
	if u == nil {
		return fmt.Errorf("prepare table %q: nothing appended", table)
	}
	if b.s.opts.ReadAhead {
		if t := b.s.handle(table); t != nil {
			t.CheckAhead(ctx) // the commit's read of the log, beside the files
		}
	}
	rows := u.w.Rows()
	adds, err := u.w.Close(ctx)
	if err != nil {
		return fmt.Errorf("write files of table %q: %w", table, err)
	}
	b.s.noteBuffers(table, u.w.BufferCap())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prepared[table] = files{adds: adds, rows: rows}
	return nil
}

// take returns the table's prepared files, preparing them first if
// Prepare was not called.
func (b *batch) take(ctx context.Context, table string) (files, error) {
	b.mu.Lock()
	f, ok := b.prepared[table]
	delete(b.prepared, table)
	b.mu.Unlock()
	if ok {
		return f, nil
	}
	if err := b.Prepare(ctx, table); err != nil {
		return files{}, err
	}
	return b.take(ctx, table)
}

// Commit makes the table's rows one Delta commit: txn{appId, pos} in a
// topic's own table; in a group's, one txn{appId/topic, pos} per topic
// of the commit, after registering the topics new to the group.
func (b *batch) Commit(ctx context.Context, table string, pos int64) (sink.Commit, error) {
	f, err := b.take(ctx, table)
	if err != nil {
		return sink.Commit{}, fmt.Errorf("commit table %q: %w", table, err)
	}
	u := b.units[table]
	c := sink.Commit{Events: f.rows}
	t, err := b.s.table(ctx, table)
	if err != nil {
		return c, err
	}
	ca := delta.CommitActions{Adds: f.adds, Operation: "STREAMING UPDATE"}
	if u.shared {
		if err := b.s.registerGrouped(ctx, t, table, u.topics); err != nil {
			return c, fmt.Errorf("commit table %q: %w", table, err)
		}
		c.Topics = maps.Clone(u.topics)
		ca.Txns = b.groupTxns(u.topics, pos)
	} else {
		pos = b.position(table, pos)
		ca.Txn = &delta.Txn{AppID: b.s.opts.AppID, Version: pos}
	}
	races := t.LostRaces()
	c.Version, err = t.Commit(ctx, ca)
	c.Races = int(t.LostRaces() - races)
	if err != nil {
		if errors.Is(err, delta.ErrTableGone) {
			// Gone, or gone back to an older copy (perhaps being put back
			// as this commit looked): the claim records what the handle
			// saw the table hold, so that no restart takes a restored copy
			// at its word.
			err = errors.Join(err, b.s.claims.wentBack(ctx, table, t.Metadata().ID, t.Version(), b.s.allPositions(t, table, u)))
			b.s.forget(table)
		}
		return c, commitError(table, pos, err)
	}
	c.Files = len(f.adds)
	for _, a := range f.adds {
		c.Bytes += a.Size
	}
	b.s.warnLargeState(table, t)
	if err := b.s.claims.committed(ctx, table, t.Metadata().ID, c.Version, b.s.ownPositions(t, table, u), false); err != nil {
		return c, fmt.Errorf("commit table %q: the commit landed, %w", table, err)
	}
	return c, nil
}

// allPositions returns every position of the source the handle knows in
// the table: of all its topics in a group's table, not only u's.
func (s *Sink) allPositions(t *delta.Table, table string, u *unit) map[string]int64 {
	if !u.shared {
		return s.ownPositions(t, table, u)
	}
	out := map[string]int64{}
	for app, v := range t.TxnVersions() {
		if a, topic, ok := catalog.SplitTxnAppID(app); ok && a == s.opts.AppID {
			out[topic] = v
		}
	}
	return out
}

// ownPositions returns the source's positions the handle knows of the
// table's topics: of u's topics in a group's table, of the topic in its
// own.
func (s *Sink) ownPositions(t *delta.Table, table string, u *unit) map[string]int64 {
	out := map[string]int64{}
	if !u.shared {
		if v, ok := t.TxnVersion(s.opts.AppID); ok {
			out[table] = v
		}
		return out
	}
	for name := range u.topics {
		if v, ok := t.TxnVersion(catalog.TxnAppID(s.opts.AppID, name, true)); ok {
			out[name] = v
		}
	}
	return out
}

// stateWarnFiles is how many files (active and tombstones) a table keeps
// in the writer's memory when the sink first warns about it; it warns
// again at every doubling, so a growing table logs a few lines in all.
var stateWarnFiles int64 = 500_000

// warnLargeState logs, once per threshold, that a table's in-memory state
// passed stateWarnFiles, 2×, 4×, ... files: each commit adds one, and a
// topic committing many times a second outgrows the relay's memory.
func (s *Sink) warnLargeState(name string, t *delta.Table) {
	files, tombstones := t.StateSize()
	n := files + tombstones
	if n < stateWarnFiles {
		return
	}
	s.mu.Lock()
	next := stateWarnFiles // the threshold to warn at: the first, or twice the last
	if last := s.stateWarned[name]; last > 0 {
		next = 2 * last
	}
	warn := n >= next
	if warn {
		for 2*next <= n { // a table loaded already large warns once
			next *= 2
		}
		s.stateWarned[name] = next
	}
	s.mu.Unlock()
	if !warn {
		return
	}
	s.opts.Logger.Warn("table state large: every commit of this topic adds a file that the relay keeps in memory (active until compaction, then a tombstone for the file retention), and the relay paces a table past --state-pace-files, so this one was loaded this large or runs with the pacing off; space its commits with --topic-commit-interval (docs/operations.md, Busy topics)",
		"table", name, "files", files, "tombstones", tombstones)
}

// groupTxns are a group commit's txns: one per topic, in name order, at
// pos (a held topic's at its Hold position).
func (b *batch) groupTxns(topics map[string]int, pos int64) []delta.Txn {
	names := slices.Sorted(maps.Keys(topics))
	txns := make([]delta.Txn, len(names))
	for i, n := range names {
		txns[i] = delta.Txn{AppID: catalog.TxnAppID(b.s.opts.AppID, n, true), Version: b.position(n, pos)}
	}
	return txns
}

func (b *batch) Abort() {
	for _, u := range b.units {
		u.w.Abort()
	}
}

// commitError wraps a commit's error of the table (a topic's own, a
// group's) in the sink's errors.
func commitError(table string, pos int64, err error) error {
	what := fmt.Sprintf("topic %q", table)
	if g, ok := catalog.GroupOfTable(table); ok {
		what = fmt.Sprintf("group %q table", g)
	}
	switch {
	case errors.Is(err, delta.ErrTableGone):
		return fmt.Errorf("commit %s: %w: %w", what, sink.ErrTableGone, err)
	case errors.Is(err, delta.ErrAlreadyCommitted):
		return fmt.Errorf("%s position %d: %w: %w", what, pos, sink.ErrFenced, err)
	case errors.Is(err, delta.ErrConcurrentMetadataChange), errors.Is(err, delta.ErrUnsupportedProtocol):
		return fmt.Errorf("%s: %w: %w", what, sink.ErrIncompatible, err)
	}
	return fmt.Errorf("commit %s (position %d): %w", what, pos, err)
}

// CommitFiles commits data files written elsewhere (a snapshot, a
// rebuild) to the topic as one commit at position pos, creating and
// registering the table if it does not exist. For a grouped topic the
// files are in its group's table (Placement; bootstrap and rebuild write
// them there) and the topic is registered with that table's id: a rebuild
// restores a topic into its group's current table. It fails with
// sink.ErrFenced (wrapped) when the table is already at or past pos.
func (s *Sink) CommitFiles(ctx context.Context, name string, adds []delta.Add, pos int64) (int64, error) {
	return s.commitFiles(ctx, name, pos, delta.CommitActions{Adds: adds, Operation: "WRITE"})
}

// commitFiles is CommitFiles with the commit's other actions given: its
// txn is set here.
func (s *Sink) commitFiles(ctx context.Context, name string, pos int64, ca delta.CommitActions) (int64, error) {
	p, err := s.locate(ctx, name)
	if err != nil {
		return -1, err
	}
	s.forget(p.Table)
	t, err := s.table(ctx, p.Table)
	if err != nil {
		return -1, err
	}
	appID := p.TxnAppID(s.opts.AppID)
	id := t.Metadata().ID
	if cur, ok := t.TxnVersion(appID); ok && cur >= pos {
		if err := s.claims.committed(ctx, p.Table, id, t.Version(), map[string]int64{name: cur}, true); err != nil {
			return -1, err
		}
		return -1, fmt.Errorf("topic %q is at position %d, files for %d: %w", name, cur, pos, sink.ErrFenced)
	}
	if p.Shared() {
		if err := s.registerIn(ctx, p, id); err != nil {
			return -1, err
		}
	}
	ca.Txn = &delta.Txn{AppID: appID, Version: pos}
	v, err := t.Commit(ctx, ca)
	if err != nil {
		return -1, commitError(name, pos, err)
	}
	// Written before the caller moves on (a bootstrap's marker, a
	// rebuild's resolution): the table is now where the topic's progress is.
	if err := s.claims.committed(ctx, p.Table, id, v, map[string]int64{name: pos}, true); err != nil {
		return -1, fmt.Errorf("topic %q: the commit landed, %w", name, err)
	}
	return v, nil
}

// AppendFiles commits data files written elsewhere to a table as one
// blind append without a txn, creating and registering the table if it
// does not exist: a rebuild's new dead letters, which their identity
// deduplicates instead of a position (package bootstrap).
func (s *Sink) AppendFiles(ctx context.Context, table string, adds []delta.Add) (int64, error) {
	s.forget(table)
	t, err := s.table(ctx, table)
	if err != nil {
		return -1, err
	}
	v, err := t.Commit(ctx, delta.CommitActions{Adds: adds, Operation: "WRITE"})
	if err != nil {
		return -1, commitError(table, -1, err)
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
