package subscribe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// TestChunkEventSetsEveryField: chunk.event assigns the fields of a reused
// batch slot one by one; a field it does not know would keep the value of
// an event delivered before.
func TestChunkEventSetsEveryField(t *testing.T) {
	if n := reflect.TypeFor[outbox.Event]().NumField(); n != len(eventColumns) {
		t.Fatalf("outbox.Event has %d fields, chunk.event sets %d: update chunk.event and eventColumns", n, len(eventColumns))
	}
	c := &chunk{n: 1, headers: []string{""}}
	for i := range eventColumns {
		c.starts[i], c.ends[i], c.nums[i] = []int32{0}, []int32{0}, []int64{0}
		c.null[i] = []bool{i == cHeaders}
	}
	h := "stale"
	e := outbox.Event{ID: "stale", Topic: "stale", Key: "stale", Type: "stale", SchemaVersion: 9, Payload: "stale", Headers: &h,
		OccurredAt: time.Now(), CommitLSN: 9, Seq: 9, Xid: 9, CommitTime: time.Now()}
	c.event(0, &e)
	if want := (outbox.Event{OccurredAt: time.UnixMicro(0).UTC(), CommitTime: time.UnixMicro(0).UTC()}); !reflect.DeepEqual(e, want) {
		t.Fatalf("a reused slot kept stale fields: %+v", e)
	}
}

// TestChunkFillSetsEveryField: fill assigns every field of a reused batch
// slot, the position and version time included.
func TestChunkFillSetsEveryField(t *testing.T) {
	if n := reflect.TypeFor[Event]().NumField(); n != 7 {
		t.Fatalf("Event has %d fields, chunk.fill sets 7 (Event, Position, VersionTime, WriterVersion, Erased, Unreadable, Phantom): update chunk.fill", n)
	}
	c := &chunk{n: 2, headers: []string{"", ""}}
	for i := range eventColumns {
		c.starts[i], c.ends[i], c.nums[i] = []int32{0, 0}, []int32{0, 0}, []int64{0, 0}
		c.null[i] = []bool{i == cHeaders, i == cHeaders}
	}
	h := "stale"
	stale := Event{Event: outbox.Event{ID: "stale", Topic: "stale", Key: "stale", Type: "stale", SchemaVersion: 9, Payload: "stale",
		Headers: &h, OccurredAt: time.Now(), CommitLSN: 9, Seq: 9, Xid: 9, CommitTime: time.Now()},
		Position: Position{Version: 9, Offset: 9}, VersionTime: time.Now(), WriterVersion: 9, Erased: []string{"/stale"}, Unreadable: []string{"/stale"}, Phantom: true}
	evs := []Event{stale, stale, stale}
	vt := time.UnixMilli(1234).UTC()
	c.fill(evs[1:], 0, Position{Version: 4, Offset: 7}, vt)
	for j, e := range evs[1:] {
		want := Event{Event: outbox.Event{OccurredAt: time.UnixMicro(0).UTC(), CommitTime: time.UnixMicro(0).UTC()},
			Position: Position{Version: 4, Offset: 7 + int64(j)}, VersionTime: vt}
		if !reflect.DeepEqual(e, want) {
			t.Fatalf("slot %d kept stale fields: %+v", j+1, e)
		}
	}
	if !reflect.DeepEqual(evs[0], stale) {
		t.Fatal("fill wrote outside its slots")
	}
}

// TestChunkFillRunsMatchEvents: filling a decoded chunk in runs of any
// length from any event gives, event by event, what chunk.event gives,
// at consecutive positions.
func TestChunkFillRunsMatchEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := randomEventFile(t, rng, 2500, nil)
	vt := time.UnixMilli(99).UTC()
	var slots []Event // reused across chunks, as the batch is
	err := decodeEvents(context.Background(), data, nil, func(c *chunk) error {
		for k := 0; k < c.n; {
			m := 1 + rng.IntN(c.n-k)
			slots = slices.Grow(slots[:0], m)[:m]
			c.fill(slots, k, Position{Version: 2, Offset: int64(k)}, vt)
			for j := range m {
				var want outbox.Event
				c.event(k+j, &want)
				got := slots[j]
				if !reflect.DeepEqual(got.Event, want) || got.Position != (Position{Version: 2, Offset: int64(k + j)}) || got.VersionTime != vt {
					return fmt.Errorf("event %d of a run from %d: %+v, want %+v", k+j, k, got, want)
				}
			}
			k += m
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
