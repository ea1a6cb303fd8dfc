package subscribe

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// TestKeptEventsMatchTheFiles: events a handler keeps stay what the files
// hold while the workers go on reading (their file buffers, chunks and
// page buffers are reused), with or without Dedup (events one by one or
// in runs), across a failed batch that resumes in the middle of a chunk.
func TestKeptEventsMatchTheFiles(t *testing.T) {
	root, want := mixedTopic(t)
	for _, dedup := range []int{0, 10_000} {
		c, group := collector{failAt: 2}, fmt.Sprintf("g%d", dedup)
		opts := Options{BatchSize: 700, Dedup: dedup}
		if err := Subscribe(context.Background(), root, "orders", group, c.handle, opts); err == nil {
			t.Fatal("the injected failure did not stop Subscribe")
		}
		if err := Subscribe(context.Background(), root, "orders", group, c.handle, opts); err != nil {
			t.Fatal(err)
		}
		if c.batches[1].From != (Position{Version: 1, Offset: 700}) {
			t.Fatalf("dedup %d: resumed at %v, want version 1 offset 700", dedup, c.batches[1].From)
		}
		if len(c.events) != len(want) {
			t.Fatalf("dedup %d: %d events, want %d", dedup, len(c.events), len(want))
		}
		for i, e := range c.events {
			if !reflect.DeepEqual(e.Event, want[i].Event) || e.Position != want[i].Position {
				t.Fatalf("dedup %d: event %d = %+v at %v, want %+v at %v", dedup, i, e.Event, e.Position, want[i].Event, want[i].Position)
			}
		}
	}
}

// mixedTopic writes topic "orders" with four versions of 2,500, 3,000, 7
// and 2,048 events in files of up to 1,000 (chunks cut in the middle of
// files and files in the middle of chunks) and returns the store root and
// the events its log holds.
func mixedTopic(t *testing.T) (storage.Store, []Event) {
	t.Helper()
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	for _, n := range []int{2500, 3000, 7, 2048} {
		tt.commit(n, 1000)
	}
	return root, logEvents(t, storage.Sub(root, "orders"), 4)
}

// logEvents reads versions 1..last of a topic table through sink/topic, in
// log order, with their positions.
func logEvents(t *testing.T, tbl storage.Store, last int64) []Event {
	t.Helper()
	var evs []Event
	for v := int64(1); v <= last; v++ {
		acts, err := readCommit(context.Background(), tbl, v)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(0)
		for _, a := range acts {
			if a.Add == nil {
				continue
			}
			err := topic.ReadEvents(context.Background(), tbl, *a.Add, func(e outbox.Event) error {
				evs = append(evs, Event{Event: e, Position: Position{Version: v, Offset: off}})
				off++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return evs
}
