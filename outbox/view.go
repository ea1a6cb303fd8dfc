package outbox

import (
	"unsafe"

	"github.com/deltabus/deltabus/decoding"
)

// A View is an Event read in place: its text fields alias the decoded row
// they came from (the replication stream's receive buffer), so they are
// valid only until the decoder's next message. Topic is the exception: it
// is interned by the Router and stays valid. A caller that keeps any other
// field past that point must copy it (strings.Clone). One View, reused for
// every row of a stream, routes events without allocating.
type View struct {
	Event
	headers string // what Event.Headers points to
}

// view fills view with the event of a row that check found valid.
func (p *plan) view(row *decoding.Row, v *values, view *View, topicName func([]byte) string) {
	text := func(f int) []byte {
		if !v.ok[f] {
			return nil
		}
		return row.New[p.idx[f]].Data
	}
	view.Event = Event{
		ID: lowerID(text(fID)), Topic: topicName(text(fTopic)), Key: alias(text(fKey)), Type: alias(text(fType)),
		SchemaVersion: v.schemaVersion, Payload: alias(text(fPayload)), OccurredAt: v.occurredAt,
	}
	view.headers = ""
	if v.ok[fHeaders] {
		view.headers = alias(text(fHeaders))
		view.Headers = &view.headers
	}
	setTxn(&view.Event, row)
	if !v.ok[fOccurredAt] {
		view.OccurredAt = view.CommitTime
	}
}

// alias returns b as a string without copying: it changes when b does.
func alias(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// lowerID returns the uuid text b in lower case: b itself when it has no
// upper-case letter (PostgreSQL's uuid type writes lower case), else a copy.
func lowerID(b []byte) string {
	for _, c := range b {
		if c >= 'A' && c <= 'F' {
			return lowerUUID(b)
		}
	}
	return alias(b)
}

func lowerUUID(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return unsafe.String(unsafe.SliceData(out), len(out))
}
