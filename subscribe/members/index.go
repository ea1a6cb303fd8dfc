package members

import (
	"container/heap"
	"time"

	"github.com/deltabus/deltabus/subscribe"
)

// The index is one server's view of a group's events: every event of the
// topic from the state's Low on, in table order, as read (the buffer),
// with each key's unacknowledged events in a queue. Only the head of a
// key's queue can be handed out; it is in the ready heap when it may be
// handed out now, in the timed heap when its lease or its nack's delay
// ends later. Heap items carry the record's generation: a record changed
// since it was pushed leaves a stale item behind, skipped when popped.

// record is one event of the buffer.
type record struct {
	pos   Position
	n     int64 // order in the buffer
	key   *keyQueue
	ev    *subscribe.Event // nil once acknowledged
	dup   bool             // its event_id was read before (deduplication)
	size  int64            // bytes held for the event, counted in index.bytes
	acked bool
	next  *record // the key's next unacknowledged record
	gen   uint32
}

type keyQueue struct {
	name       string
	head, tail *record
}

type item struct {
	r   *record
	gen uint32
	at  time.Time // timed heap: when the record may be ready
}

type readyHeap []item // by buffer order: the oldest event first

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].r.n < h[j].r.n }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *readyHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

type timedHeap []item // by time

func (h timedHeap) Len() int           { return len(h) }
func (h timedHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timedHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *timedHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// index is guarded by its Group's mutex.
type index struct {
	buf    []*record // buf[front:] from the state's Low on
	front  int
	byPos  map[Position]*record
	keys   map[string]*keyQueue
	ready  readyHeap
	timed  timedHeap
	seen   *subscribe.DedupWindow
	nextN  int64
	readTo Position // after the last event the reader delivered
	unread int      // records not acknowledged
	bytes  int64    // held by the records' events (about)
}

// eventBytes is about what an event held in the index costs: its strings
// and the structures around them.
func eventBytes(ev *subscribe.Event) int64 {
	n := len(ev.ID) + len(ev.Key) + len(ev.Type) + len(ev.Payload) + len(ev.Source) + 400
	if ev.Headers != nil {
		n += len(*ev.Headers)
	}
	return int64(n)
}

func newIndex(dedup int, from Position) *index {
	return &index{byPos: map[Position]*record{}, keys: map[string]*keyQueue{}, seen: subscribe.NewDedupWindow(dedup), readTo: from}
}

// buffered is the number of records held.
func (x *index) buffered() int { return len(x.buf) - x.front }

// add appends the next event read. Events before the state's Low were
// acknowledged: only their ids are remembered.
func (x *index) add(ev *subscribe.Event, st *state, now time.Time) {
	id := subscribe.DedupKey{Source: ev.Source, ID: ev.ID}
	dup := x.seen.Contains(id)
	x.seen.Add(id)
	p := ev.Position
	x.readTo = Position{Version: p.Version, Offset: p.Offset + 1}
	if st.isAcked(p) {
		return
	}
	r := &record{pos: p, n: x.nextN, ev: ev, dup: dup, size: eventBytes(ev)}
	x.nextN++
	x.bytes += r.size
	x.buf = append(x.buf, r)
	x.byPos[p] = r
	x.unread++
	q := x.keys[ev.Key]
	if q == nil {
		q = &keyQueue{name: ev.Key}
		x.keys[ev.Key] = q
	}
	r.key = q
	if q.tail == nil {
		q.head, q.tail = r, r
		x.schedule(r, st, now)
		return
	}
	q.tail.next, q.tail = r, r
}

// schedule files the head record r in the ready or the timed heap, after
// its state changed.
func (x *index) schedule(r *record, st *state, now time.Time) {
	r.gen++
	if r.acked || r.key.head != r {
		return
	}
	f := st.flight[r.pos]
	if f.ready(now) {
		heap.Push(&x.ready, item{r: r, gen: r.gen})
		return
	}
	at := f.Until
	if f.NotBefore.After(at) {
		at = f.NotBefore
	}
	heap.Push(&x.timed, item{r: r, gen: r.gen, at: at})
}

// due moves the timed records whose time came to the ready heap.
func (x *index) due(now time.Time) {
	for len(x.timed) > 0 && !x.timed[0].at.After(now) {
		it := heap.Pop(&x.timed).(item)
		if it.gen == it.r.gen {
			heap.Push(&x.ready, item{r: it.r, gen: it.r.gen})
		}
	}
}

// nextDue returns when the earliest timed record becomes ready (zero: none).
func (x *index) nextDue() time.Time {
	for len(x.timed) > 0 {
		if it := x.timed[0]; it.gen == it.r.gen {
			return it.at
		}
		heap.Pop(&x.timed)
	}
	return time.Time{}
}

// take pops up to n records that may be handed out now and that can
// accepts, oldest first. The caller either applies an entry that leases
// or skips them, or gives them back with putBack.
func (x *index) take(n int, st *state, now time.Time, can func(*record) bool) (got, refused []*record) {
	x.due(now)
	for len(got) < n && len(x.ready) > 0 {
		it := heap.Pop(&x.ready).(item)
		r := it.r
		if it.gen != r.gen || r.acked || r.key.head != r || !st.flight[r.pos].ready(now) {
			continue
		}
		if can != nil && !r.dup && !can(r) {
			refused = append(refused, r)
			continue
		}
		got = append(got, r)
	}
	return got, refused
}

// putBack returns records take popped and no entry changed.
func (x *index) putBack(rs []*record, st *state, now time.Time) {
	for _, r := range rs {
		x.schedule(r, st, now)
	}
}

// hasReady reports whether some record may be handed out now.
func (x *index) hasReady(st *state, now time.Time) bool {
	x.due(now)
	for len(x.ready) > 0 {
		it := x.ready[0]
		r := it.r
		if it.gen == r.gen && !r.acked && r.key.head == r && st.flight[r.pos].ready(now) {
			return true
		}
		heap.Pop(&x.ready)
	}
	return false
}

// acked marks the record at p acknowledged: it leaves its key's queue,
// whose next record (if any) becomes the head.
func (x *index) acked(p Position, st *state, now time.Time) {
	r := x.byPos[p]
	if r == nil || r.acked {
		return
	}
	r.acked, r.ev = true, nil
	r.gen++
	x.unread--
	x.bytes -= r.size
	q := r.key
	if q.head == r {
		q.head = r.next
		if q.head == nil {
			q.tail = nil
			delete(x.keys, q.name)
		} else {
			x.schedule(q.head, st, now)
		}
	} else { // not the head: never handed out by rule, but a state read anew may say so
		for prev := q.head; prev != nil; prev = prev.next {
			if prev.next == r {
				prev.next = r.next
				if q.tail == r {
					q.tail = prev
				}
				break
			}
		}
	}
	r.next = nil
}

// trim drops the acknowledged records at the front and returns the
// position before which every event is acknowledged: the first record not
// acknowledged, or after the last event read.
func (x *index) trim() Position {
	for x.front < len(x.buf) && x.buf[x.front].acked {
		delete(x.byPos, x.buf[x.front].pos)
		x.buf[x.front] = nil
		x.front++
	}
	if x.front > 1024 && x.front > len(x.buf)/2 {
		x.buf = append(x.buf[:0:0], x.buf[x.front:]...)
		x.front = 0
	}
	if x.front < len(x.buf) {
		return x.buf[x.front].pos
	}
	return x.readTo
}

// dropBefore forgets the records before p (the state's Low moved there,
// by another server's entry or a reload).
func (x *index) dropBefore(p Position, st *state, now time.Time) {
	for x.front < len(x.buf) && less(x.buf[x.front].pos, p) {
		x.acked(x.buf[x.front].pos, st, now)
		x.trim()
	}
}

// oldest returns the first record not acknowledged, nil when none.
func (x *index) oldest() *record {
	x.trim()
	if x.front < len(x.buf) {
		return x.buf[x.front]
	}
	return nil
}
