package outbox

import (
	"encoding/json"
	"time"
)

// DeadLetterTopic is the topic that receives every outbox row that cannot
// become an event, with the reason. It is never blocked on and never skipped.
const DeadLetterTopic = "_dead_letter"

// Event is one outbox row as it lands in its topic table. The first eight
// fields come from the outbox row, the last four from the source transaction.
type Event struct {
	ID            string    // outbox id (uuid text): the consumers' dedup key
	Topic         string    // safe path segment, see ValidTopic
	Key           string    // entity key; per-key order follows topic order
	Type          string    // what happened
	SchemaVersion int32     // payload schema version, default 1
	Payload       string    // JSON text
	Headers       *string   // JSON text, nil when the row has none
	OccurredAt    time.Time // UTC, microsecond precision

	CommitLSN  int64     // source commit LSN
	Seq        int32     // position of the row in its source transaction
	Xid        int64     // source transaction id
	CommitTime time.Time // source commit time, UTC

	// Source is the appId of the relay that wrote the event into its topic
	// (the identity of its source database), as readers of a topic table
	// find it; empty in what producers and the router build, and in rows
	// written before releases kept it.
	Source string
}

// DeadLetter is an outbox row that could not become an Event. It lands in
// the DeadLetterTopic table with the event columns that could be read (the
// rest empty), the reason, the source table and the raw row as JSON.
type DeadLetter struct {
	Event              // whatever could be extracted; Topic is the row's own topic value if any
	Reason      string // why the row is not an event, e.g. `invalid topic name "a/b"`
	SourceTable string // "schema.table"
	RawRow      string // JSON object: column name -> text value (null for NULL)
}

// Refused returns the dead letter of an event that was routed but may not
// enter its topic (its contract refuses it, its topic's table takes no
// events of this relay): the event as it is, the reason, and as raw row
// the event's fields as JSON. Every path that writes events (the stream,
// a snapshot, a rebuild) renders it alike, so that the dead letter of one
// event is one row whichever path wrote it. ev may be a View: the dead
// letter aliases its text as ev does.
func Refused(ev *Event, reason, sourceTable string) *DeadLetter {
	b, _ := json.Marshal(map[string]any{"id": ev.ID, "topic": ev.Topic, "key": ev.Key, "type": ev.Type,
		"schema_version": ev.SchemaVersion, "payload": json.RawMessage(ev.Payload), "headers": ev.Headers,
		"occurred_at": ev.OccurredAt})
	return &DeadLetter{Event: *ev, Reason: reason, SourceTable: sourceTable, RawRow: string(b)}
}
