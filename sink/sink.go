// Package sink is the contract between the relay's streaming pipeline and
// the tables it commits to: one table per topic, or one per topic group
// (many low-rate topics sharing a table, catalog.Group), each commit
// carrying the source position of the batch it holds for every topic in
// it, so a replayed transaction is recognised and a zombie instance is
// fenced.
//
// The relay (package relay) drives a Sink; package deltasink implements it
// over Delta topic tables, and sinktest holds the conformance suite every
// implementation passes plus an in-memory implementation for the
// pipeline's unit tests. The exactly-once argument that relies on this
// contract is in package catalog.
package sink

import (
	"context"
	"errors"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
)

// Sink holds one table per topic or topic group. It is safe for
// concurrent use.
type Sink interface {
	// Open reads what the topic's table holds for this relay: its status,
	// the position of its last commit of the topic, and which table holds
	// the topic (Topic.Table). It does not create anything.
	Open(ctx context.Context, topic string) (Topic, error)
	// NewBatch starts a batch: rows of any number of topics, committed
	// per table.
	NewBatch() Batch
	// CommitRebuild commits a rebuild's snapshot files to its topic with
	// txn position rec.TxnVersion, creating the table if it is missing;
	// nothing is written when the table's position is already there.
	CommitRebuild(ctx context.Context, rec catalog.RebuildRecord) error
	// Close waits for background work (checkpoints) to end, or for ctx.
	Close(ctx context.Context)
}

// StateReporter is a Sink that keeps tables' state in memory and reports
// its size, table by table (the relay's deltabus_table_state_files).
type StateReporter interface {
	// TableStates returns the size of every table the sink holds open,
	// in any order. It must not wait for a commit in progress.
	TableStates() []TableState
}

// TableState is the size of one open table's state: its active files and
// the tombstones kept for its checkpoints.
type TableState struct {
	Table             string
	Files, Tombstones int64
}

// Batch is one batch's rows on their way to one commit per table: a
// topic's own table, or a group's, whose one commit holds every topic of
// the group the batch has rows of. Append, AppendDeadLetter and Carry are
// called from one goroutine; Prepare and Commit may then be called
// concurrently for different tables, once per table each, Prepare (if at
// all) before Commit and from any goroutine that the caller has ordered
// after the appends; exactly one of Commit, Carry or Abort ends the
// batch's use of each table. Tables are named as Open's Topic.Table.
type Batch interface {
	// Append adds an event to its table's share of the batch. Rows of a
	// table are committed in the order they were appended. ev may be an
	// outbox.View: its text is valid only during the call, so Append
	// copies what it keeps (Topic excepted, which stays valid). A sink
	// that places topics in groups may refuse a topic it has not opened.
	Append(ev *outbox.Event) error
	// AppendDeadLetter adds a row to the dead-letter topic.
	AppendDeadLetter(dl *outbox.DeadLetter) error
	// Prepare writes the table's data files to the store, where no reader
	// sees them until Commit references them: the relay writes one
	// batch's files while the previous batch's commits are made durable.
	// Commit without Prepare does both.
	Prepare(ctx context.Context, table string) error
	// Commit makes the table's rows one commit of the table at position
	// pos (the commit LSN of the batch's last source transaction) for
	// every topic among them (a held topic at its Hold position instead),
	// creating the table if it does not exist. An error wrapping ErrFenced
	// means the table already holds the position of one of them: another
	// instance wrote it.
	Commit(ctx context.Context, table string, pos int64) (Commit, error)
	// Carry moves the table's rows, uncommitted and in order, to next (a
	// batch of the same Sink that has no rows of the table yet): they are
	// committed with next's rows of the table, before them, and so are
	// the table's topics' Hold positions. The caller must not acknowledge
	// past the first carried transaction until then.
	Carry(table string, next Batch) error
	// Hold caps the position the commit of the topic's table records for
	// the topic at pos: the topic is held from the transaction after pos
	// on (its events from there are dropped, to be read again), so the
	// batch's rows of it are all of transactions at or below pos, and its
	// position must not reach the batch's. Without it, the batch's later
	// position would make the topic skip its held transactions when they
	// are read again. The table's other topics keep the batch's position.
	// A topic without rows in the batch is not committed by it.
	Hold(topic string, pos int64)
	// Abort discards every row not committed. Files already written are
	// unreferenced orphans.
	Abort()
}

// Commit describes one table commit.
type Commit struct {
	Version int64 // table version written
	Events  int
	// Topics is the number of events of each topic in a group table's
	// commit; nil for a topic's own table, whose Events are the topic's.
	Topics map[string]int
	Files  int
	Bytes  int64
	// Races is how many times the commit lost its version to another
	// writer (another source's relay, compaction) whose commit did not
	// conflict with it, and was retried at the next version: not an error.
	Races int
}

// Status says whether a topic's table can take the relay's events.
type Status int

const (
	// Ready: the table exists and the relay may append to it.
	Ready Status = iota
	// New: no table and none registered; the first commit creates it.
	New
	// Missing: the catalog registers the topic but its table is gone or
	// unreadable (Reason says which). Never recreated empty on its own.
	Missing
	// Foreign: a table this relay never wrote, with a schema or protocol
	// it cannot append to; its events go to the dead-letter topic.
	Foreign
	// Incompatible: a table this relay wrote, since changed by another
	// writer in a way it cannot append to (schema, protocol).
	Incompatible
)

func (s Status) String() string {
	switch s {
	case Ready:
		return "ready"
	case New:
		return "new"
	case Missing:
		return "missing"
	case Foreign:
		return "foreign"
	case Incompatible:
		return "incompatible"
	}
	return "unknown"
}

// Topic is a topic table's state as Open finds it.
type Topic struct {
	Name string
	// Table names the table that holds the topic: Name for a topic's own
	// table, a group's table (catalog.GroupTable) for a grouped topic.
	// Batch's Prepare, Commit and Carry take it.
	Table    string
	Status   Status
	Position int64  // position of the relay's last commit; -1 when none
	Reason   string // why the status is not Ready or New
}

var (
	// ErrFenced: the table already holds the batch's position; another
	// instance of this relay (a zombie) committed it. The relay stops.
	ErrFenced = errors.New("sink: the table already holds this position (another instance of this relay wrote it)")
	// ErrIncompatible: another writer changed the table so that the relay
	// cannot append any more (schema, protocol, a replaced table).
	ErrIncompatible = errors.New("sink: the table was changed in a way this relay cannot append to")
	// ErrTableGone: the table was deleted (or its log truncated) under the
	// relay; nothing was written.
	ErrTableGone = errors.New("sink: the table is gone")
)
