package relay

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/sinktest"
)

// Topics of a group share one commit per batch: every topic of the group
// the batch holds moves to the batch's position in that one commit, and
// each keeps its own rows in order.
func TestGroupedTopicsShareOneCommit(t *testing.T) {
	mem, log := sinktest.NewMemory(), &commitLog{at: map[string][]time.Time{}}
	mem.BeforeCommit = log.hook
	mem.Group("_group.m", "m.a", "m.b", "m.c")
	h := newHarness(t, mem, 0x1000, nil)
	var end = h.src.lsn
	for range 20 {
		_, end = h.src.tx("m.a", "m.b", "orders", "m.c")
	}
	h.waitAck(end)
	for _, name := range []string{"m.a", "m.b", "m.c", "orders"} {
		if got := ids(mem.Rows(name)); !slices.Equal(got, h.src.sent[name]) {
			t.Fatalf("%s: %d rows, want %d in order", name, len(got), len(h.src.sent[name]))
		}
	}
	if n := len(log.times("m.a")) + len(log.times("m.b")) + len(log.times("m.c")); n != 0 {
		t.Fatalf("%d commits named after a grouped topic; a group commits as its table", n)
	}
	group, orders := len(log.times("_group.m")), len(log.times("orders"))
	if group == 0 || group != orders {
		t.Fatalf("%d group commits and %d commits of orders, want as many (each batch commits each table once)", group, orders)
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A group's commit interval, from its definition in the store, paces its
// table in place of the relay's interval.
func TestGroupCommitIntervalFromTheStore(t *testing.T) {
	const interval = 200 * time.Millisecond
	mem, log := sinktest.NewMemory(), &commitLog{at: map[string][]time.Time{}}
	mem.BeforeCommit = log.hook
	mem.Group("_group.m", "m.a", "m.b")
	h := newHarnessWith(t, mem, 0x1000, nil, func(r *Relay) {
		g := catalog.Group{Name: "m", Topics: []string{"m.*"}, CommitInterval: interval.String()}
		if err := catalog.WriteGroup(context.Background(), r.store, g); err != nil {
			t.Fatal(err)
		}
	})
	var end = h.src.lsn
	began := time.Now()
	for range 40 {
		_, end = h.src.tx("m.a", "m.b", "orders")
		time.Sleep(10 * time.Millisecond)
	}
	h.waitAck(end)
	took := time.Since(began)
	at := log.times("_group.m")
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < interval/2 {
			t.Fatalf("group commits %d and %d %v apart, want at least %v", i-1, i, gap, interval)
		}
	}
	if limit := int(took/interval) + 4; len(at) > limit {
		t.Fatalf("%d group commits over %v at a %v interval, want at most %d", len(at), took, interval, limit)
	}
	if n := len(log.times("orders")); n <= len(at) {
		t.Fatalf("orders (unpaced) committed %d times, the paced group %d: want more", n, len(at))
	}
	for _, name := range []string{"m.a", "m.b", "orders"} {
		if got := ids(mem.Rows(name)); !slices.Equal(got, h.src.sent[name]) {
			t.Fatalf("%s: %d rows, want %d in order", name, len(got), len(h.src.sent[name]))
		}
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatal(err)
	}
}
