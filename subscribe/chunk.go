package subscribe

import (
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// chunk is up to chunkEvents consecutive events of one data file, as a
// decode worker hands them to the subscription. The relay's files are
// decoded by column: a string column's values of the chunk are ranges of
// one string (text: the values copied one after the other, one PLAIN
// page's bytes with their length prefixes, or the column's dictionary),
// numbers are int64s; the subscription builds each Event straight into its
// batch (or hands the chunk over by column), so the events read ahead hold no pointers
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

// key returns the dedup key of event k: its source and id.
func (c *chunk) key(k int) DedupKey {
	if c.events != nil {
		return DedupKey{c.events[k].Source, c.events[k].ID}
	}
	return DedupKey{c.str(cSource, k), c.str(cID, k)}
}

// event sets *e to event k. Its strings share the chunk's allocations,
// which are never reused: a handler may keep them.
func (c *chunk) event(k int, e *outbox.Event) {
	var ev [1]Event
	c.fill(ev[:], k, Position{}, time.Time{})
	*e = ev[0].Event
}

// fill sets evs[j] to event k+j of the chunk, at pos advanced by j, in
// version time vt. Every field is set one by one (TestChunkFillSetsEveryField):
// a composite literal would be built aside and copied with a bulk write
// barrier; the columns are sliced once for the run, so the loop indexes
// them without bounds checks.
func (c *chunk) fill(evs []Event, k int, pos Position, vt time.Time) {
	if c.events != nil {
		c.fillEvents(evs, k, pos, vt)
		return
	}
	n := len(evs)
	id, top, key, typ, pay := c.strCol(cID, k, n), c.strCol(cTopic, k, n), c.strCol(cKey, k, n), c.strCol(cType, k, n), c.strCol(cPayload, k, n)
	src := c.strCol(cSource, k, n)
	hdrs, noHdr := c.headers[k:k+n], c.null[cHeaders][k:k+n]
	sv, lsn, seq, xid := c.nums[cSchemaVersion][k:k+n], c.nums[cCommitLSN][k:k+n], c.nums[cSeq][k:k+n], c.nums[cXid][k:k+n]
	occ, noOcc := c.nums[cOccurredAt][k:k+n], c.null[cOccurredAt][k:k+n]
	ct, noCt := c.nums[cCommitTime][k:k+n], c.null[cCommitTime][k:k+n]
	// The fields that mostly repeat from event to event (topic, type,
	// commit and version times) are written only when the reused slot
	// holds another value: that saves the write barriers of their
	// pointers while the garbage collector marks.
	for j := range evs {
		e := &evs[j]
		e.ID, e.Key, e.Payload = id.at(j), key.at(j), pay.at(j)
		if v := top.at(j); e.Topic != v {
			e.Topic = v
		}
		if v := typ.at(j); e.Type != v {
			e.Type = v
		}
		if v := src.at(j); e.Source != v {
			e.Source = v
		}
		e.SchemaVersion = int32(sv[j])
		e.WriterVersion = e.SchemaVersion
		var h *string
		if !noHdr[j] {
			h = &hdrs[j]
		}
		e.Headers = h
		e.OccurredAt = micros(occ[j], noOcc[j])
		e.CommitLSN, e.Seq, e.Xid = lsn[j], int32(seq[j]), xid[j]
		if v := micros(ct[j], noCt[j]); e.CommitTime != v {
			e.CommitTime = v
		}
		e.Position = Position{Version: pos.Version, Offset: pos.Offset + int64(j)}
		if e.VersionTime != vt {
			e.VersionTime = vt
		}
		if e.Erased != nil || e.Unreadable != nil { // set by Options.Reveal, per delivery
			e.Erased, e.Unreadable = nil, nil
		}
		e.Phantom = false // set per delivery (Phantoms)
	}
}

// fillEvents is fill for a chunk of other writers' events.
func (c *chunk) fillEvents(evs []Event, k int, pos Position, vt time.Time) {
	for j := range evs {
		evs[j].Event = c.events[k+j]
		evs[j].WriterVersion = evs[j].SchemaVersion
		evs[j].Position, evs[j].VersionTime = Position{Version: pos.Version, Offset: pos.Offset + int64(j)}, vt
		evs[j].Erased, evs[j].Unreadable, evs[j].Phantom = nil, nil, false
	}
}

// strRun is values k.. of a string column of a chunk.
type strRun struct {
	text         string
	starts, ends []int32
}

func (c *chunk) strCol(i, k, n int) strRun {
	return strRun{text: c.text[i], starts: c.starts[i][k : k+n], ends: c.ends[i][k : k+n]}
}

func (r *strRun) at(j int) string { return r.text[r.starts[j]:r.ends[j]] }

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
