package subscribe

import (
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// chunk is up to chunkEvents consecutive events of one data file, as a
// decode worker hands them to the subscription. The relay's files are
// decoded by column: a string column's values of the chunk are ranges of
// one string (text), numbers are int64s; the subscription builds each
// Event straight into its batch, so the events read ahead hold no pointers
// but a few per column for the garbage collector to trace. Files of other
// writers come through sink/topic as events.
type chunk struct {
	n      int
	events []outbox.Event // other writers' files; nil for decoded columns

	text    [len(eventColumns)]string  // string columns: the values
	starts  [len(eventColumns)][]int32 // string columns: value k is text[starts[k]:ends[k]]
	ends    [len(eventColumns)][]int32
	nums    [len(eventColumns)][]int64 // number and timestamp columns
	null    [len(eventColumns)][]bool
	headers []string // header values, owned by the events that point into it
}

// str returns value k of the string column i ("" when NULL).
func (c *chunk) str(i, k int) string {
	return c.text[i][c.starts[i][k]:c.ends[i][k]]
}

// id returns the event id of event k.
func (c *chunk) id(k int) string {
	if c.events != nil {
		return c.events[k].ID
	}
	return c.str(cID, k)
}

// event sets *e to event k. Its strings share the chunk's allocations,
// which are never reused: a handler may keep them.
func (c *chunk) event(k int, e *outbox.Event) {
	if c.events != nil {
		*e = c.events[k]
		return
	}
	// Every field, one by one (TestChunkEventSetsEveryField): a composite
	// literal would be built aside and copied with a bulk write barrier.
	e.ID, e.Topic, e.Key, e.Type = c.str(cID, k), c.str(cTopic, k), c.str(cKey, k), c.str(cType, k)
	e.SchemaVersion, e.Payload = int32(c.nums[cSchemaVersion][k]), c.str(cPayload, k)
	e.Headers = nil
	if !c.null[cHeaders][k] {
		e.Headers = &c.headers[k]
	}
	e.OccurredAt = micros(c.nums[cOccurredAt][k], c.null[cOccurredAt][k])
	e.CommitLSN, e.Seq, e.Xid = c.nums[cCommitLSN][k], int32(c.nums[cSeq][k]), c.nums[cXid][k]
	e.CommitTime = micros(c.nums[cCommitTime][k], c.null[cCommitTime][k])
}

// appendEvents appends the chunk's events to evs.
func (c *chunk) appendEvents(evs []outbox.Event) []outbox.Event {
	for k := range c.n {
		evs = append(evs, outbox.Event{})
		c.event(k, &evs[len(evs)-1])
	}
	return evs
}

func micros(us int64, null bool) time.Time {
	if null {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
