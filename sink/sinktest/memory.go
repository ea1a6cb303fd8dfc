// Package sinktest holds the conformance suite of the sink contract (Run)
// and Memory, an in-memory sink for the pipeline's unit tests, with hooks
// to fail or block commits.
package sinktest

import (
	"context"
	"fmt"
	"maps"
	"path"
	"strings"
	"sync"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
)

// Row is a committed row as Memory keeps it.
type Row struct {
	Topic      string
	ID         string
	CommitLSN  int64
	Seq        int32
	DeadLetter bool
	Reason     string // a dead letter's reason
}

type memTable struct {
	rows      []Row
	positions map[string]int64 // by source (Memory.Source); absent = -1
	versions  int64
	status    sink.Status // Ready unless set by SetStatus
	reason    string
	deleted   bool // its folder was deleted: the registry entry stays
	inc       int  // its incarnation: a table created again is another one
	// history is the table's state after each of its commits (RollBack).
	history []memVersion
}

// memVersion is a table's state after one of its commits.
type memVersion struct {
	rows      int
	positions map[string]int64
}

// memClaim is a source's claim on a topic's table (catalog.Claim): the
// incarnation that held its position pos.
type memClaim struct {
	inc int
	pos int64
}

// Memory is a sink.Sink that keeps tables in memory. Each source (relay
// appId) has its own position in a table; NewMemory's is the source "".
type Memory struct {
	// BeforeCommit, if set, runs before each topic commit; an error fails
	// the commit. It may block until ctx ends.
	BeforeCommit func(ctx context.Context, topic string, pos int64) error
	// BeforePrepare, if set, runs before each Prepare; an error fails it.
	BeforePrepare func(ctx context.Context, topic string) error

	app string
	*memState
}

type memState struct {
	mu         sync.Mutex
	tables     map[string]*memTable // by topic
	registered map[string]bool
	groups     []memGroup // in the order Group was called
	commits    int
	incs       int                            // incarnations made
	claims     map[string]map[string]memClaim // by source, then topic
}

var _ sink.Sink = (*Memory)(nil)

// NewMemory returns an empty Memory sink.
func NewMemory() *Memory {
	return &Memory{memState: &memState{tables: map[string]*memTable{}, registered: map[string]bool{}, claims: map[string]map[string]memClaim{}}}
}

// Source returns the sink of another relay (appID) over the same tables.
func (m *Memory) Source(appID string) *Memory { return &Memory{app: appID, memState: m.memState} }

func (t *memTable) position(app string) int64 {
	if p, ok := t.positions[app]; ok {
		return p
	}
	return -1
}

func (t *memTable) setPosition(app string, p int64) {
	if t.positions == nil {
		t.positions = map[string]int64{}
	}
	t.positions[app] = p
}

type memGroup struct {
	table    string
	patterns []string
}

// Group places the topics that match patterns (path.Match) in one shared
// table, as a topic group does: their rows of a batch are committed
// together (Batch.Commit of table).
func (m *Memory) Group(table string, patterns ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.groups = append(m.groups, memGroup{table: table, patterns: patterns})
}

// tableOf names the table that holds the topic.
func (m *Memory) tableOf(topic string) string {
	for _, g := range m.groups {
		for _, p := range g.patterns {
			if ok, _ := path.Match(p, topic); ok {
				return g.table
			}
		}
	}
	return topic
}

// Open reports the topic's table as the contract says: a table that no
// longer holds the source's claimed position of the topic (created again,
// rolled back) is Missing.
func (m *Memory) Open(_ context.Context, name string) (sink.Topic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, table := m.tables[name], m.tableOf(name)
	switch {
	case t == nil:
		return sink.Topic{Name: name, Table: table, Status: sink.New, Position: -1}, nil
	case t.deleted:
		return sink.Topic{Name: name, Table: table, Status: sink.Missing, Position: -1, Reason: "table gone"}, nil
	case m.lost(name, t):
		why := "the table went back to an older state: it no longer holds this source's events"
		if m.claims[m.app][name].inc != t.inc {
			why = "the table was replaced: it no longer holds this source's events"
		}
		return sink.Topic{Name: name, Table: table, Status: sink.Missing, Position: -1, Reason: why}, nil
	}
	return sink.Topic{Name: name, Table: table, Status: t.status, Position: t.position(m.app), Reason: t.reason}, nil
}

// lost reports whether t no longer holds the source's claimed position of
// topic; m.mu held.
func (m *Memory) lost(topic string, t *memTable) bool {
	c, ok := m.claims[m.app][topic]
	return ok && t.position(m.app) < c.pos
}

// claim records that t holds the source's position pos of topic; m.mu
// held.
func (m *Memory) claim(topic string, t *memTable, pos int64) {
	if m.claims[m.app] == nil {
		m.claims[m.app] = map[string]memClaim{}
	}
	m.claims[m.app][topic] = memClaim{inc: t.inc, pos: pos}
}

// RollBack restores the topic's table to its state before its last n
// commits, as a restore from an older copy of it does.
func (m *Memory) RollBack(name string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table(name)
	keep := len(t.history) - n
	if keep <= 0 {
		t.rows, t.positions, t.history = nil, nil, nil
		return
	}
	v := t.history[keep-1]
	t.rows, t.positions, t.history = t.rows[:v.rows], maps.Clone(v.positions), t.history[:keep]
}

// versioned records t's state after a commit; m.mu held.
func (t *memTable) versioned() {
	t.versions++
	t.history = append(t.history, memVersion{rows: len(t.rows), positions: maps.Clone(t.positions)})
}

// Rows returns the topic's committed rows in commit order.
func (m *Memory) Rows(name string) []Row {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tables[name]; t != nil {
		return append([]Row(nil), t.rows...)
	}
	return nil
}

// Commits returns how many table commits succeeded.
func (m *Memory) Commits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}

// SetStatus makes the topic's table report status (Foreign, Incompatible)
// and refuse commits unless Ready.
func (m *Memory) SetStatus(name string, st sink.Status, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table(name)
	t.status, t.reason = st, reason
}

// Delete removes the topic's table, or a group's table with every topic
// in it, as an operator deleting its folder would: the registry entries
// stay.
func (m *Memory) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for topic := range m.tables {
		if topic != name && m.tableOf(topic) == name {
			*m.tables[topic] = memTable{deleted: true, inc: m.newInc()}
		}
	}
	if m.tableOf(name) == name {
		t := m.table(name)
		*t = memTable{deleted: true, inc: m.newInc()}
	}
}

func (m *Memory) table(name string) *memTable {
	t := m.tables[name]
	if t == nil {
		t = &memTable{inc: m.newInc()}
		m.tables[name] = t
		m.registered[name] = true
	}
	return t
}

func (m *Memory) newInc() int { m.incs++; return m.incs }

// NewBatch starts a batch.
func (m *Memory) NewBatch() sink.Batch {
	return &memBatch{m: m, rows: map[string][]Row{}, holds: map[string]int64{}}
}

// CommitRebuild records the rebuild's position (its rows live in files
// Memory cannot read; Added placeholder rows stand for them).
func (m *Memory) CommitRebuild(_ context.Context, rec catalog.RebuildRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table(rec.Topic)
	if t.deleted {
		*t = memTable{inc: m.newInc()}
	}
	if t.position(m.app) >= rec.TxnVersion {
		m.claim(rec.Topic, t, t.position(m.app))
		return nil
	}
	for i := range rec.Added {
		t.rows = append(t.rows, Row{ID: fmt.Sprintf("rebuild-%s-%d", rec.ID, i), CommitLSN: rec.TxnVersion})
	}
	t.setPosition(m.app, rec.TxnVersion)
	t.versioned()
	m.claim(rec.Topic, t, rec.TxnVersion)
	return nil
}

// Close does nothing.
func (m *Memory) Close(context.Context) {}

type memBatch struct {
	m     *Memory
	mu    sync.Mutex       // Commit runs concurrently for different tables
	rows  map[string][]Row // by table
	holds map[string]int64 // Hold positions, by topic
}

// Hold caps the position the commit of the topic's table records for it.
func (b *memBatch) Hold(topic string, pos int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.holds[topic]; !ok || pos < cur {
		b.holds[topic] = pos
	}
}

// position is what a commit at pos records for the topic.
func (b *memBatch) position(topic string, pos int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h, ok := b.holds[topic]; ok && h < pos {
		return h
	}
	return pos
}

func (b *memBatch) Append(ev *outbox.Event) error {
	// ev may alias the replication stream (outbox.View): keep copies.
	b.m.mu.Lock()
	table := b.m.tableOf(ev.Topic)
	b.m.mu.Unlock()
	b.rows[table] = append(b.rows[table], Row{Topic: ev.Topic, ID: strings.Clone(ev.ID), CommitLSN: ev.CommitLSN, Seq: ev.Seq})
	return nil
}

func (b *memBatch) AppendDeadLetter(dl *outbox.DeadLetter) error {
	n := outbox.DeadLetterTopic
	b.rows[n] = append(b.rows[n], Row{Topic: n, ID: strings.Clone(dl.ID), CommitLSN: dl.CommitLSN, Seq: dl.Seq, DeadLetter: true, Reason: dl.Reason})
	return nil
}

// Prepare checks that the table has rows (Memory has no files to write).
func (b *memBatch) Prepare(ctx context.Context, table string) error {
	if hook := b.m.BeforePrepare; hook != nil {
		if err := hook(ctx, table); err != nil {
			return fmt.Errorf("prepare table %q: %w", table, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rows[table] == nil {
		return fmt.Errorf("prepare table %q: nothing appended", table)
	}
	return nil
}

// Commit commits the table's rows: every topic among them moves to pos
// (a held topic to its Hold position), or none does.
func (b *memBatch) Commit(ctx context.Context, table string, pos int64) (sink.Commit, error) {
	b.mu.Lock()
	rows := b.rows[table]
	delete(b.rows, table)
	b.mu.Unlock()
	if rows == nil {
		return sink.Commit{}, fmt.Errorf("commit table %q: nothing appended", table)
	}
	if hook := b.m.BeforeCommit; hook != nil {
		if err := hook(ctx, table, pos); err != nil {
			return sink.Commit{}, fmt.Errorf("commit table %q: %w", table, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return sink.Commit{}, err
	}
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Topic]++
	}
	positions := map[string]int64{}
	for name := range counts {
		positions[name] = b.position(name, pos)
	}
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	for name := range counts {
		t := b.m.table(name)
		switch {
		case t.deleted:
			return sink.Commit{}, fmt.Errorf("commit topic %q: %w", name, sink.ErrTableGone)
		case b.m.lost(name, t):
			return sink.Commit{}, fmt.Errorf("commit topic %q: the table went back to an older state: %w", name, sink.ErrTableGone)
		case t.status != sink.Ready:
			return sink.Commit{}, fmt.Errorf("commit topic %q: %w: %s", name, sink.ErrIncompatible, t.reason)
		case t.position(b.m.app) >= positions[name]:
			return sink.Commit{}, fmt.Errorf("topic %q at %d, batch %d: %w", name, t.position(b.m.app), positions[name], sink.ErrFenced)
		}
	}
	var version int64
	for _, r := range rows {
		t := b.m.table(r.Topic)
		t.rows = append(t.rows, r)
	}
	for name := range counts {
		t := b.m.table(name)
		t.setPosition(b.m.app, positions[name])
		t.versioned()
		b.m.claim(name, t, positions[name])
		version = max(version, t.versions)
	}
	b.m.commits++
	if len(counts) == 1 && counts[table] > 0 {
		counts = nil // a topic's own table, as the contract says
	}
	return sink.Commit{Version: version, Events: len(rows), Topics: counts, Files: 1}, nil
}

func (b *memBatch) Carry(table string, next sink.Batch) error {
	n, ok := next.(*memBatch)
	if !ok || n.m != b.m {
		return fmt.Errorf("carry table %q: the next batch is not of this sink", table)
	}
	b.mu.Lock()
	rows := b.rows[table]
	delete(b.rows, table)
	b.mu.Unlock()
	if rows == nil {
		return fmt.Errorf("carry table %q: nothing appended", table)
	}
	if n.rows[table] != nil {
		return fmt.Errorf("carry table %q: the next batch already has rows of it", table)
	}
	n.rows[table] = rows
	for _, r := range rows {
		b.mu.Lock()
		pos, ok := b.holds[r.Topic]
		delete(b.holds, r.Topic)
		b.mu.Unlock()
		if ok {
			n.Hold(r.Topic, pos)
		}
	}
	return nil
}

func (b *memBatch) Abort() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.rows)
}
