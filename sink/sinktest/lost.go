package sinktest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
)

// Cases of tables that lost a source's events: deleted and created again
// by another source's rebuild, or restored to an older copy of
// themselves. A source's lost table stays lost to it (Missing) until its
// own events are restored into it.

const otherSource = "deltabus-2-other"

// rebuilt commits a rebuild of topic at position r with s, as the relay
// does when `relay rebuild` hands it the snapshot.
func rebuilt(t *testing.T, s sink.Sink, topic string, r int64) {
	t.Helper()
	if err := s.CommitRebuild(context.Background(), catalog.RebuildRecord{ID: "0123abcd", Topic: topic, TxnVersion: r}); err != nil {
		t.Fatalf("CommitRebuild(%q, %d): %v", topic, r, err)
	}
}

// wantMissing opens topic with s and requires it Missing.
func wantMissing(t *testing.T, s sink.Sink, topic, what string) {
	t.Helper()
	if tp := open(t, s, topic); tp.Status != sink.Missing || tp.Reason == "" {
		t.Fatalf("%s: %+v, want Missing with a reason", what, tp)
	}
}

// testReplacedTable: sources A and B write orders; the table is lost and
// A's rebuild creates it again with A's events. B's events are not in the
// new table: it is Missing to B, after any restart, until B's own rebuild
// commits; A streams on.
func testReplacedTable(t *testing.T, h Harness) {
	a, b := h.Sink, h.Source(otherSource)
	ba := a.NewBatch()
	_ = ba.Append(event("orders", 1, 900))
	commit(t, ba, "orders", 900)
	bb := b.NewBatch()
	_ = bb.Append(event("orders", 2, 100))
	commit(t, bb, "orders", 100)
	h.Delete(t, "orders")
	wantMissing(t, h.Source(otherSource), "orders", "source B after the table was deleted")
	rebuilt(t, h.Reopen(), "orders", 1000)
	if tp := open(t, h.Reopen(), "orders"); tp.Status != sink.Ready || tp.Position != 1000 {
		t.Fatalf("source A after its rebuild: %+v, want Ready at 1000", tp)
	}
	wantMissing(t, b, "orders", "source B after source A's rebuild created the table again")
	wantMissing(t, h.Source(otherSource), "orders", "source B restarted after source A's rebuild")
	rebuilt(t, h.Source(otherSource), "orders", 300)
	if tp := open(t, h.Source(otherSource), "orders"); tp.Status != sink.Ready || tp.Position != 300 {
		t.Fatalf("source B after its own rebuild: %+v, want Ready at 300", tp)
	}
}

// testGroupTableReplaced: testReplacedTable for a grouped topic, whose
// group's table A's rebuild creates again (and registers the topic in).
func testGroupTableReplaced(t *testing.T, h Harness) {
	table := h.Group(t, "m", "m.*")
	a, b := h.Sink, h.Source(otherSource)
	openIn(t, a, "m.a", table)
	openIn(t, b, "m.a", table)
	ba := a.NewBatch()
	_ = ba.Append(event("m.a", 1, 900))
	commit(t, ba, table, 900)
	bb := b.NewBatch()
	_ = bb.Append(event("m.a", 2, 100))
	commit(t, bb, table, 100)
	h.Delete(t, table)
	rebuilt(t, h.Reopen(), "m.a", 1000)
	if tp := openIn(t, h.Reopen(), "m.a", table); tp.Status != sink.Ready || tp.Position != 1000 {
		t.Fatalf("source A after its rebuild: %+v, want Ready at 1000", tp)
	}
	wantMissing(t, h.Source(otherSource), "m.a", "source B restarted after source A's rebuild created the group's table again")
	rebuilt(t, h.Source(otherSource), "m.a", 300)
	if tp := openIn(t, h.Source(otherSource), "m.a", table); tp.Status != sink.Ready || tp.Position != 300 {
		t.Fatalf("source B after its own rebuild: %+v, want Ready at 300", tp)
	}
}

// testRolledBackTable: a table restored to an older copy while the relay
// writes it is never written on: the next commit fails with ErrTableGone,
// the topic is Missing after a restart, and a rebuild restores it.
func testRolledBackTable(t *testing.T, h Harness) {
	if h.RollBack == nil {
		t.Skip("the harness cannot roll a table back")
	}
	s := h.Sink
	for i, pos := range []int64{100, 200, 300} {
		b := s.NewBatch()
		_ = b.Append(event("orders", i+1, pos))
		commit(t, b, "orders", pos)
	}
	h.RollBack(t, "orders", 2)
	b := s.NewBatch()
	_ = b.Append(event("orders", 4, 400))
	if _, err := b.Commit(context.Background(), "orders", 400); !errors.Is(err, sink.ErrTableGone) {
		t.Fatalf("commit on a table rolled back under the writer: %v, want ErrTableGone", err)
	}
	if got := h.IDs(t, "orders"); len(got) != 1 {
		t.Fatalf("rows %q after the rollback, want the first commit's only", got)
	}
	wantMissing(t, h.Reopen(), "orders", "a rolled-back table after a restart")
	rebuilt(t, h.Reopen(), "orders", 500)
	if tp := open(t, h.Reopen(), "orders"); tp.Status != sink.Ready || tp.Position != 500 {
		t.Fatalf("after the rebuild: %+v, want Ready at 500", tp)
	}
}

// testRolledBackWhileStopped: a table restored to an older copy while the
// relay was stopped is Missing at its next start to the source whose
// commits it lost; another source whose commits it kept is not held.
func testRolledBackWhileStopped(t *testing.T, h Harness) {
	if h.RollBack == nil {
		t.Skip("the harness cannot roll a table back")
	}
	ctx := context.Background()
	other := h.Source(otherSource)
	ob := other.NewBatch()
	_ = ob.Append(event("orders", 9, 50))
	commit(t, ob, "orders", 50)
	other.Close(ctx)
	s := h.Reopen()
	for i, pos := range []int64{100, 200, 300} {
		b := s.NewBatch()
		_ = b.Append(event("orders", i+1, pos))
		commit(t, b, "orders", pos)
	}
	s.Close(ctx) // a graceful stop
	h.RollBack(t, "orders", 2)
	tp := open(t, h.Reopen(), "orders")
	if tp.Status != sink.Missing || !strings.Contains(tp.Reason, "older") {
		t.Fatalf("restarted after its table was rolled back: %+v, want Missing naming the older state", tp)
	}
	if tp := open(t, h.Source(otherSource), "orders"); tp.Status != sink.Ready || tp.Position != 50 {
		t.Fatalf("a source whose commits the rollback kept: %+v, want Ready at 50", tp)
	}
}
