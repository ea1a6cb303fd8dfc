package subscribe

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
)

// Position is a place in a topic table: the next event to deliver is event
// number Offset (0-based, in log order: the version's data files in the
// order of their add actions, rows in file order) of Delta version Version.
// Offset 0 means every event of every version before Version was handled.
type Position struct {
	Version int64 `json:"version"`
	Offset  int64 `json:"offset"`
}

func (p Position) String() string { return fmt.Sprintf("version %d offset %d", p.Version, p.Offset) }

// Event is one event of a topic as a subscription delivers it: the row the
// relay wrote (outbox.Event: id, topic, key, type, payload and headers as
// JSON text, occurred_at, commit_lsn, seq, xid, commit_time and
// schema_version) and where it is in the table. SchemaVersion is the
// version of Payload as delivered: the producer's, unless Options.Upcasters
// converted the event, and WriterVersion is always the producer's.
type Event struct {
	outbox.Event
	Position              // the event's own position (Version, Offset)
	VersionTime time.Time // commit timestamp of the Delta version (inCommitTimestamp, else commitInfo.timestamp, else file mtime)
	// WriterVersion is the schema version the producer wrote the event
	// with (the table's schema_version); SchemaVersion differs from it
	// only when an upcaster converted the payload.
	WriterVersion int32
	// Erased lists the JSON pointers of the payload's personal fields
	// whose data subject was erased: they read as null (Options.Reveal).
	// Nil when none was.
	Erased []string
	// Unreadable lists the JSON pointers of the payload's personal fields
	// whose envelope does not open under its key (altered, or copied from
	// another event or field): they read as null too (Options.Reveal). The
	// event is delivered all the same. Nil when none was.
	Unreadable []string
	// Phantom: a fork record names the event as published from a
	// timeline its source abandoned at a failover (Phantoms): its state
	// change was lost with the old primary.
	Phantom bool
}

// Batch is what a Handler receives. Events are in delivery order. The
// Events slice is reused after the handler returns: copy what you keep (the
// events' strings may be kept).
type Batch struct {
	Topic, Group string
	Events       []Event
	// Columns holds the batch's events by column with Options.Columns
	// (Events is then empty); nil otherwise. Valid during the handler call.
	Columns *Columns
	// From is the position before the first event, To the position after
	// the last: the checkpoint the batch commits.
	From, To Position
	// Tx is the checkpoint's transaction when the checkpoint store is
	// transactional (pgcheckpoint): write the batch's state change in it and
	// the checkpoint commits with it, or neither does. Do not commit or roll
	// it back. Nil with the object-store checkpoints.
	Tx pgx.Tx
}

// Handler handles one batch. Returning an error stops the subscription
// without moving the checkpoint: the batch is delivered again on the next
// Subscribe.
type Handler func(ctx context.Context, b *Batch) error
