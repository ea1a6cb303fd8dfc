package subscribe

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// EventJSON is an event as `relay consume` prints it and the HTTP
// consumer API (package subscribe/serve) hands it over: payload and
// headers as nested JSON (headers null when absent), times in RFC 3339,
// and the event's position in the table (version, offset).
type EventJSON struct {
	EventID       string          `json:"event_id"`
	Topic         string          `json:"topic"`
	Key           string          `json:"key"`
	Type          string          `json:"type"`
	SchemaVersion int32           `json:"schema_version"`
	Payload       json.RawMessage `json:"payload"`
	Headers       json.RawMessage `json:"headers"`
	OccurredAt    string          `json:"occurred_at"`
	CommitLSN     int64           `json:"commit_lsn"`
	Seq           int32           `json:"seq"`
	Xid           int64           `json:"xid"`
	CommitTime    string          `json:"commit_time"`
	Source        string          `json:"source,omitempty"`
	Version       int64           `json:"version"`
	Offset        int64           `json:"offset"`
	// WriterVersion is the producer's schema version, set only when an
	// upcaster converted the payload (schema_version is then the version
	// asked for).
	WriterVersion int32    `json:"writer_version,omitempty"`
	Erased        []string `json:"erased,omitempty"`     // pointers of fields whose subject was erased (null in payload)
	Unreadable    []string `json:"unreadable,omitempty"` // pointers of fields whose envelope does not open (null in payload)
	// Phantom: published from a timeline the source abandoned at a
	// failover; its state change was lost with the old primary.
	Phantom bool `json:"phantom,omitempty"`
}

// NewEventJSON returns e's JSON form. Payload and headers that are not
// valid JSON (the table holds what the relay wrote, but the store is not
// trusted) become JSON strings.
func NewEventJSON(e *Event) EventJSON {
	headers := json.RawMessage("null")
	if e.Headers != nil {
		headers = nestedJSON(*e.Headers)
	}
	j := EventJSON{EventID: e.ID, Topic: e.Topic, Key: e.Key, Type: e.Type, SchemaVersion: e.SchemaVersion,
		Payload: nestedJSON(e.Payload), Headers: headers, OccurredAt: stamp(e.OccurredAt), CommitLSN: e.CommitLSN,
		Seq: e.Seq, Xid: e.Xid, CommitTime: stamp(e.CommitTime), Source: e.Source, Version: e.Version,
		Offset: e.Offset, Erased: e.Erased, Unreadable: e.Unreadable, Phantom: e.Phantom}
	if e.WriterVersion != 0 && e.WriterVersion != e.SchemaVersion {
		j.WriterVersion = e.WriterVersion
	}
	return j
}

// Event turns j back into an Event (a client of the HTTP API).
func (j *EventJSON) Event() (Event, error) {
	e := Event{Event: outbox.Event{ID: j.EventID, Topic: j.Topic, Key: j.Key, Type: j.Type, SchemaVersion: j.SchemaVersion,
		Payload: string(j.Payload), CommitLSN: j.CommitLSN, Seq: j.Seq, Xid: j.Xid, Source: j.Source},
		Position: Position{Version: j.Version, Offset: j.Offset}, WriterVersion: j.WriterVersion, Erased: j.Erased, Unreadable: j.Unreadable, Phantom: j.Phantom}
	if e.WriterVersion == 0 {
		e.WriterVersion = e.SchemaVersion
	}
	if len(j.Headers) > 0 && string(j.Headers) != "null" {
		h := string(j.Headers)
		e.Headers = &h
	}
	var err error
	if e.OccurredAt, err = unstamp(j.OccurredAt); err != nil {
		return Event{}, fmt.Errorf("event %s: occurred_at: %w", j.EventID, err)
	}
	if e.CommitTime, err = unstamp(j.CommitTime); err != nil {
		return Event{}, fmt.Errorf("event %s: commit_time: %w", j.EventID, err)
	}
	return e, nil
}

func nestedJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s)
	return q
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func unstamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
