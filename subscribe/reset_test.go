package subscribe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// TestResetToVersionAndTime: a replay from a version or a time delivers
// from there; FromLatest delivers only what comes after.
func TestResetToVersionAndTime(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	tt := newTestTopic(t, root, "orders")
	tt.commit(3, 3)
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	tt.commit(4, 4)
	tt.commit(5, 5)
	var c collector
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{}); err != nil || len(c.events) != 12 {
		t.Fatalf("first read: %v, %d events", err, len(c.events))
	}
	cp, err := Reset(ctx, root, nil, "orders", "g", FromTime(mid))
	if err != nil || cp.Position != (Position{Version: 2}) {
		t.Fatalf("Reset FromTime = %+v, %v; want version 2", cp.Position, err)
	}
	c = collector{}
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{}); err != nil || len(c.events) != 9 || c.events[0].Version != 2 {
		t.Fatalf("after reset to a time: %v, %d events", err, len(c.events))
	}
	if _, err := Reset(ctx, root, nil, "orders", "g", FromVersion(3)); err != nil {
		t.Fatal(err)
	}
	c = collector{}
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{}); err != nil || len(c.events) != 5 {
		t.Fatalf("after reset to version 3: %v, %d events", err, len(c.events))
	}
	c = collector{}
	if err := Subscribe(ctx, root, "orders", "new", c.handle, Options{Start: FromLatest()}); err != nil || len(c.events) != 0 {
		t.Fatalf("FromLatest: %v, %d events", err, len(c.events))
	}
	tt.commit(2, 2)
	if err := Subscribe(ctx, root, "orders", "new", c.handle, Options{}); err != nil || len(c.events) != 2 {
		t.Fatalf("FromLatest then new events: %v, %d events", err, len(c.events))
	}
}

// TestReplacedTableIsAnError: a topic table deleted and recreated under the
// same name restarts its versions; a group's checkpoint no longer applies.
func TestReplacedTableIsAnError(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	tt := newTestTopic(t, root, "orders")
	tt.commit(3, 3)
	if err := Subscribe(ctx, root, "orders", "g", (&collector{}).handle, Options{}); err != nil {
		t.Fatal(err)
	}
	objs, _ := root.List(ctx, "orders/", "")
	for _, o := range objs {
		if err := root.Delete(ctx, o.Key); err != nil {
			t.Fatal(err)
		}
	}
	tt = newTestTopic(t, root, "orders")
	tt.commit(1, 1)
	err := Subscribe(ctx, root, "orders", "g", (&collector{}).handle, Options{})
	if err == nil || !strings.Contains(err.Error(), "the topic's table was replaced") {
		t.Fatalf("Subscribe on a recreated table = %v", err)
	}
}

// TestDedupWindowDropsRepeatedIDs: the same event ids committed again
// within the window are not delivered twice; the window is bounded.
func TestDedupWindowDropsRepeatedIDs(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	tt := newTestTopic(t, root, "orders")
	tt.commit(5, 5)
	acts, err := readCommit(ctx, storage.Sub(root, "orders"), 1)
	if err != nil {
		t.Fatal(err)
	}
	tt.rawCommit(2, []delta.Action{{Add: acts[1].Add}}) // the same file again: five repeated ids
	var c collector
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{Dedup: 100}); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, c.events, 5)
	w := NewDedupWindow(3)
	k := func(id string) DedupKey { return DedupKey{"deltabus-1-s", id} }
	for _, id := range []string{"a", "b", "c", "d"} {
		w.Add(k(id))
	}
	if w.Contains(k("a")) || !w.Contains(k("b")) || !w.Contains(k("d")) || len(w.count) != 3 {
		t.Fatalf("window of 3 after 4 ids: %v", w.count)
	}
	// Two sources' events with one id are two events.
	if w.Contains(DedupKey{"deltabus-2-s", "d"}) {
		t.Fatal("another source's event with the same id taken for a duplicate")
	}
}
