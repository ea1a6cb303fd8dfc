package subscribe

import (
	"sort"
	"time"
)

// Columns is a batch by column, what a handler gets in Batch.Columns with
// Options.Columns: event i of the batch (0 <= i < Len()) is read field by
// field, straight from the decoded columns, and no Event is built for it.
// For a handler that reads a few fields of many events it saves building
// every event into the batch. The events, their order and positions are
// those Batch.Events would hold. Strings (and header pointers) read from
// it are never reused and may be kept; the Columns itself is valid only
// during the handler call.
type Columns struct {
	runs []colRun
	n    int
	last int // the run of the last lookup
}

// colRun is events k..k+n-1 of a chunk, events at..at+n-1 of the batch.
type colRun struct {
	c        *chunk
	k, at, n int
	pos      Position // of the run's first event
	vt       time.Time
}

// Len returns the number of events in the batch.
func (cs *Columns) Len() int { return cs.n }

// add appends events k..k+n-1 of chunk c, the first at pos, extending the
// last run when they follow it.
func (cs *Columns) add(c *chunk, k, n int, pos Position, vt time.Time) {
	if l := len(cs.runs) - 1; l >= 0 {
		r := &cs.runs[l]
		if r.c == c && r.k+r.n == k && r.pos.Version == pos.Version && r.pos.Offset+int64(r.n) == pos.Offset {
			r.n += n
			cs.n += n
			return
		}
	}
	cs.runs = append(cs.runs, colRun{c: c, k: k, at: cs.n, n: n, pos: pos, vt: vt})
	cs.n += n
}

// holds reports whether the batch refers to chunk c (as its last run).
func (cs *Columns) holds(c *chunk) bool {
	return len(cs.runs) > 0 && cs.runs[len(cs.runs)-1].c == c
}

func (cs *Columns) reset() {
	clear(cs.runs) // no chunk kept alive by a stale run
	cs.runs, cs.n, cs.last = cs.runs[:0], 0, 0
}

// at returns the run holding event i and the event's index in its chunk.
func (cs *Columns) at(i int) (*colRun, int) {
	if uint(i) >= uint(cs.n) {
		panic("subscribe: Columns index out of range")
	}
	if r := &cs.runs[cs.last]; i < r.at || i >= r.at+r.n {
		cs.last = sort.Search(len(cs.runs), func(j int) bool { return cs.runs[j].at+cs.runs[j].n > i })
	}
	r := &cs.runs[cs.last]
	return r, r.k + i - r.at
}

// str returns string column col of event i.
func (cs *Columns) str(col, i int) string {
	r, k := cs.at(i)
	if r.c.events == nil {
		return r.c.str(col, k)
	}
	e := &r.c.events[k]
	return [...]string{cID: e.ID, cTopic: e.Topic, cKey: e.Key, cType: e.Type, cPayload: e.Payload, cSource: e.Source}[col]
}

// num returns number column col of event i.
func (cs *Columns) num(col, i int) int64 {
	r, k := cs.at(i)
	if r.c.events == nil {
		return r.c.nums[col][k]
	}
	e := &r.c.events[k]
	return [...]int64{cSchemaVersion: int64(e.SchemaVersion), cCommitLSN: e.CommitLSN, cSeq: int64(e.Seq), cXid: e.Xid}[col]
}

// ID returns event i's event_id.
func (cs *Columns) ID(i int) string { return cs.str(cID, i) }

// Topic returns event i's topic.
func (cs *Columns) Topic(i int) string { return cs.str(cTopic, i) }

// Key returns event i's key.
func (cs *Columns) Key(i int) string { return cs.str(cKey, i) }

// Type returns event i's type.
func (cs *Columns) Type(i int) string { return cs.str(cType, i) }

// Payload returns event i's payload (JSON text).
func (cs *Columns) Payload(i int) string { return cs.str(cPayload, i) }

// Source returns the appId of the relay that wrote event i (its source
// database's identity; "" for rows written before it was kept).
func (cs *Columns) Source(i int) string { return cs.str(cSource, i) }

// SchemaVersion returns event i's schema_version.
func (cs *Columns) SchemaVersion(i int) int32 { return int32(cs.num(cSchemaVersion, i)) }

// CommitLSN returns event i's commit_lsn.
func (cs *Columns) CommitLSN(i int) int64 { return cs.num(cCommitLSN, i) }

// Seq returns event i's seq.
func (cs *Columns) Seq(i int) int32 { return int32(cs.num(cSeq, i)) }

// Xid returns event i's xid.
func (cs *Columns) Xid(i int) int64 { return cs.num(cXid, i) }

// Headers returns event i's headers (JSON text), nil when NULL.
func (cs *Columns) Headers(i int) *string {
	r, k := cs.at(i)
	if r.c.events != nil {
		return r.c.events[k].Headers
	}
	if r.c.null[cHeaders][k] {
		return nil
	}
	return &r.c.headers[k]
}

// OccurredAt returns event i's occurred_at (UTC; zero when NULL).
func (cs *Columns) OccurredAt(i int) time.Time { return cs.time(cOccurredAt, i) }

// CommitTime returns event i's commit_time (UTC; zero when NULL).
func (cs *Columns) CommitTime(i int) time.Time { return cs.time(cCommitTime, i) }

func (cs *Columns) time(col, i int) time.Time {
	r, k := cs.at(i)
	switch {
	case r.c.events == nil:
		return micros(r.c.nums[col][k], r.c.null[col][k])
	case col == cOccurredAt:
		return r.c.events[k].OccurredAt
	}
	return r.c.events[k].CommitTime
}

// Position returns event i's position.
func (cs *Columns) Position(i int) Position {
	r, _ := cs.at(i)
	return Position{Version: r.pos.Version, Offset: r.pos.Offset + int64(i-r.at)}
}

// VersionTime returns the commit timestamp of event i's Delta version.
func (cs *Columns) VersionTime(i int) time.Time {
	r, _ := cs.at(i)
	return r.vt
}

// Event returns event i whole, as Batch.Events would hold it.
func (cs *Columns) Event(i int) Event {
	r, k := cs.at(i)
	var ev [1]Event
	r.c.fill(ev[:], k, Position{Version: r.pos.Version, Offset: r.pos.Offset + int64(i-r.at)}, r.vt)
	return ev[0]
}
