package memberstest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/subscribe/members"
)

// Recorder records what members were handed and what they acknowledged,
// and checks it against the topic's commit order.
type Recorder struct {
	mu         sync.Mutex
	deliveries []delivery
	acked      map[string]time.Time // event id -> when its successful ack was sent
	ackedBy    map[string]int32     // event id -> the delivery acknowledged
}

type delivery struct {
	id, key, member string
	d               int32
	at              time.Time // when the receive returned it
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{acked: map[string]time.Time{}, ackedBy: map[string]int32{}}
}

// Delivered records that member got m, now.
func (r *Recorder) Delivered(member string, m members.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, delivery{id: m.Event.ID, key: m.Event.Key, member: member, d: m.Delivery, at: time.Now()})
}

// Acked records that the ack of m, sent at sent, took effect.
func (r *Recorder) Acked(m members.Message, sent time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.acked[m.Event.ID]; !ok {
		r.acked[m.Event.ID], r.ackedBy[m.Event.ID] = sent, m.Delivery
	}
}

// Count returns the number of events acknowledged.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acked)
}

// Redeliveries returns the deliveries beyond the first of each event.
func (r *Recorder) Redeliveries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.deliveries {
		if d.d > 1 {
			n++
		}
	}
	return n
}

// Check verifies, for the events of order (the commit order) and their
// keys: every event was acknowledged; no event was handed out after its
// acknowledgement took effect; an event was handed out only after every
// earlier event of its key had been acknowledged (its ack sent before the
// receive returned); and, when exactlyOnce, no event was handed out twice.
func (r *Recorder) Check(t testing.TB, order []string, keys map[string]string, exactlyOnce bool) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	pos := make(map[string]int, len(order))
	for i, id := range order {
		pos[id] = i
	}
	for _, id := range order {
		if _, ok := r.acked[id]; !ok {
			t.Fatalf("event %s (key %s, number %d in commit order) was never acknowledged", id, keys[id], pos[id])
		}
	}
	r.checkOrder(t, order, keys, exactlyOnce)
}

// CheckOrder is Check without the demand that every event was
// acknowledged: for a run stopped part way.
func (r *Recorder) CheckOrder(t testing.TB, order []string, keys map[string]string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkOrder(t, order, keys, false)
}

func (r *Recorder) checkOrder(t testing.TB, order []string, keys map[string]string, exactlyOnce bool) {
	t.Helper()
	pos := make(map[string]int, len(order))
	for i, id := range order {
		pos[id] = i
	}
	byKey := map[string][]string{}
	for _, id := range order {
		byKey[keys[id]] = append(byKey[keys[id]], id)
	}
	seen := map[string]int{}
	for _, d := range r.deliveries {
		i, ok := pos[d.id]
		if !ok {
			t.Fatalf("member %s was handed event %s, which is not in the topic", d.member, d.id)
		}
		seen[d.id]++
		if exactlyOnce && seen[d.id] > 1 {
			t.Fatalf("event %s was handed out twice without any failure", d.id)
		}
		if by, ok := r.ackedBy[d.id]; ok && d.d > by {
			t.Fatalf("event %s was handed out again (delivery %d to %s) after delivery %d was acknowledged", d.id, d.d, d.member, r.ackedBy[d.id])
		}
		for _, prev := range byKey[keys[d.id]] {
			if prev == d.id {
				break
			}
			at, ok := r.acked[prev]
			if !ok || !at.Before(d.at) {
				t.Fatalf("key %s: event %s (number %d in commit order) was handed to %s before event %s (number %d) was acknowledged",
					keys[d.id], d.id, i, d.member, prev, pos[prev])
			}
		}
	}
}

// Member runs one member against src until ctx ends or stop returns
// true: it receives, handles (handle may sleep; an error nacks), acks and
// records. It returns the first unexpected error.
func Member(ctx context.Context, src members.Source, group, topic, name string, rec *Recorder, o MemberOptions) error {
	req := members.ReceiveRequest{Member: name, Max: o.Max, Wait: 200 * time.Millisecond, Visibility: o.Visibility}
	if req.Max == 0 {
		req.Max = 5
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for ctx.Err() == nil {
		msgs, err := src.Receive(ctx, group, topic, req)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if members.IsUnavailable(err) {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("member %s: receive: %w", name, err)
		}
		for _, m := range msgs {
			rec.Delivered(name, m)
		}
		for _, m := range msgs {
			if o.Handle > 0 {
				time.Sleep(time.Duration(rng.Int64N(int64(o.Handle) + 1)))
			}
			if o.Drop != nil && o.Drop(m) {
				continue // a crash: never acknowledged
			}
			sent := time.Now()
			res, err := src.Ack(ctx, group, topic, []string{m.AckID})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if members.IsUnavailable(err) {
					continue
				}
				return fmt.Errorf("member %s: ack: %w", name, err)
			}
			if res.Done == 1 && len(res.Failed) == 0 {
				rec.Acked(m, sent)
			}
		}
	}
	return nil
}

// MemberOptions tune Member.
type MemberOptions struct {
	Max        int
	Visibility time.Duration
	Handle     time.Duration // up to this long per event, at random
	// Drop, when it returns true, leaves the message unacknowledged.
	Drop func(members.Message) bool
}
