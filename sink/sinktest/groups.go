package sinktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
)

// Cases of topic groups: many topics sharing one table (catalog.Group).

// openIn opens topic with s and checks that table holds it.
func openIn(t *testing.T, s sink.Sink, topic, table string) sink.Topic {
	t.Helper()
	tp := open(t, s, topic)
	if tp.Table != table {
		t.Fatalf("Open(%q).Table = %q, want %q", topic, tp.Table, table)
	}
	return tp
}

// testGroupCommit: the topics of a group are one commit of its table,
// each at the batch's position, each with its own rows in order; a topic
// outside the group keeps its own table.
func testGroupCommit(t *testing.T, h Harness) {
	table := h.Group(t, "m", "m.a", "m.b")
	openIn(t, h.Sink, "m.a", table)
	openIn(t, h.Sink, "m.b", table)
	openIn(t, h.Sink, "orders", "orders")
	b := h.Sink.NewBatch()
	a1, b1, o1, a2 := event("m.a", 1, 100), event("m.b", 2, 100), event("orders", 3, 100), event("m.a", 4, 200)
	for _, e := range []*outbox.Event{a1, b1, o1, a2} {
		if err := b.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	c := commit(t, b, table, 200)
	if c.Events != 3 || c.Topics["m.a"] != 2 || c.Topics["m.b"] != 1 || len(c.Topics) != 2 {
		t.Fatalf("group commit: %+v, want 3 events: m.a 2, m.b 1", c)
	}
	commit(t, b, "orders", 200)
	s := h.Reopen()
	for _, name := range []string{"m.a", "m.b"} {
		if tp := openIn(t, s, name, table); tp.Status != sink.Ready || tp.Position != 200 {
			t.Fatalf("%s after reopen: %+v, want Ready at 200", name, tp)
		}
	}
	if tp := openIn(t, s, "m.c", "m.c"); tp.Status != sink.New {
		t.Fatalf("a topic no pattern of the group matches: %+v, want New in its own table", tp)
	}
	for name, want := range map[string][]string{"m.a": ids(a1, a2), "m.b": ids(b1), "orders": ids(o1)} {
		if got := h.IDs(t, name); !slices.Equal(got, want) {
			t.Fatalf("%s rows %q, want %q", name, got, want)
		}
	}
}

// testGroupTopicPositions: each topic of a group has its own position: a
// commit holding only some topics of the group moves only theirs, and a
// replay is fenced by the position of the topic it holds.
func testGroupTopicPositions(t *testing.T, h Harness) {
	table := h.Group(t, "m", "m.*")
	openIn(t, h.Sink, "m.a", table)
	openIn(t, h.Sink, "m.b", table)
	b := h.Sink.NewBatch()
	a1 := event("m.a", 1, 100)
	_ = b.Append(a1)
	commit(t, b, table, 100)
	b = h.Sink.NewBatch()
	b1 := event("m.b", 2, 300)
	_ = b.Append(b1)
	commit(t, b, table, 300)
	s := h.Reopen()
	if tp := openIn(t, s, "m.a", table); tp.Position != 100 {
		t.Fatalf("m.a at %d, want 100 (a later commit of m.b only)", tp.Position)
	}
	if tp := openIn(t, s, "m.b", table); tp.Position != 300 {
		t.Fatalf("m.b at %d, want 300", tp.Position)
	}
	// Another source has positions of its own in the same group table.
	other := h.Source("deltabus-2-other")
	openIn(t, other, "m.a", table)
	ob := other.NewBatch()
	oa := event("m.a", 3, 50)
	_ = ob.Append(oa)
	commit(t, ob, table, 50)
	zombie := h.Reopen()
	openIn(t, zombie, "m.a", table)
	z := zombie.NewBatch()
	_ = z.Append(event("m.a", 4, 100))
	if _, err := z.Commit(context.Background(), table, 100); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("a replay of m.a at its position: %v, want ErrFenced", err)
	}
	if got, want := h.IDs(t, "m.a"), ids(a1, oa); !slices.Equal(got, want) {
		t.Fatalf("m.a rows %q, want %q", got, want)
	}
}

// testGroupCarry: a group's rows are carried whole into the next batch and
// committed with it.
func testGroupCarry(t *testing.T, h Harness) {
	table := h.Group(t, "m", "m.*")
	openIn(t, h.Sink, "m.a", table)
	openIn(t, h.Sink, "m.b", table)
	b1, b2 := h.Sink.NewBatch(), h.Sink.NewBatch()
	a1, b1e, a2 := event("m.a", 1, 100), event("m.b", 2, 100), event("m.a", 3, 200)
	_ = b1.Append(a1)
	_ = b1.Append(b1e)
	if err := b1.Carry(table, b2); err != nil {
		t.Fatal(err)
	}
	_ = b2.Append(a2)
	if c := commit(t, b2, table, 200); c.Events != 3 || c.Topics["m.b"] != 1 {
		t.Fatalf("carried group commit: %+v, want 3 events", c)
	}
	if got, want := h.IDs(t, "m.a"), ids(a1, a2); !slices.Equal(got, want) {
		t.Fatalf("m.a rows %q, want %q", got, want)
	}
	if tp := openIn(t, h.Reopen(), "m.b", table); tp.Position != 200 {
		t.Fatalf("m.b at %d, want 200", tp.Position)
	}
}

// testGroupTableDeleted: a group's table deleted under the relay leaves
// each of its topics Missing, never recreated empty by a commit.
func testGroupTableDeleted(t *testing.T, h Harness) {
	table := h.Group(t, "m", "m.*")
	openIn(t, h.Sink, "m.a", table)
	b := h.Sink.NewBatch()
	_ = b.Append(event("m.a", 1, 100))
	commit(t, b, table, 100)
	h.Delete(t, table)
	b = h.Sink.NewBatch()
	_ = b.Append(event("m.a", 2, 200))
	if _, err := b.Commit(context.Background(), table, 200); !errors.Is(err, sink.ErrTableGone) {
		t.Fatalf("commit to a deleted group table: %v, want ErrTableGone", err)
	}
	if tp := openIn(t, h.Reopen(), "m.a", table); tp.Status != sink.Missing {
		t.Fatalf("m.a after its group table was deleted: %+v, want Missing", tp)
	}
}

// testGroupConcurrentSources: several sources commit into one group's
// table at once (a new table, so they race for its creation and for each
// topic's registration too), each batch holding both topics of the group:
// every commit lands once with a txn per topic, and each source's rows of
// each topic are in its own order.
func testGroupConcurrentSources(t *testing.T, h Harness) {
	const sources, batches = 3, 8
	table := h.Group(t, "m", "m.*")
	concurrentSources(t, h, sources, func(s int, snk sink.Sink) error {
		for _, name := range []string{"m.a", "m.b"} {
			if _, err := snk.Open(context.Background(), name); err != nil {
				return err
			}
		}
		for k := range batches {
			b := snk.NewBatch()
			pos := int64(1000 * (k + 1))
			for j, name := range []string{"m.a", "m.b", "m.a"} {
				_ = b.Append(event(name, s*10000+k*100+j, pos))
			}
			if _, err := b.Commit(context.Background(), table, pos); err != nil {
				return err
			}
		}
		return nil
	})
	for name, per := range map[string]int{"m.a": 2, "m.b": 1} {
		got := h.IDs(t, name)
		if len(got) != sources*batches*per {
			t.Fatalf("%s: %d rows, want %d", name, len(got), sources*batches*per)
		}
		inSourceOrder(t, name, got)
		for s := range sources {
			if tp := openIn(t, h.Source(fmt.Sprintf("deltabus-%d-s", s+1)), name, table); tp.Position != 1000*batches {
				t.Fatalf("%s, source %d at %d, want %d", name, s, tp.Position, 1000*batches)
			}
		}
	}
}

// testGroupHold: a held topic of a group commits at its Hold position in
// the group's commit, the group's other topics at the batch's.
func testGroupHold(t *testing.T, h Harness) {
	table := h.Group(t, "m", "m.*")
	openIn(t, h.Sink, "m.a", table)
	openIn(t, h.Sink, "m.b", table)
	b := h.Sink.NewBatch()
	a1, b1 := event("m.a", 1, 100), event("m.b", 2, 300)
	_ = b.Append(a1)
	_ = b.Append(b1)
	b.Hold("m.a", 199)
	if c := commit(t, b, table, 300); c.Events != 2 {
		t.Fatalf("group commit with a held topic: %+v, want 2 events", c)
	}
	s := h.Reopen()
	if tp := openIn(t, s, "m.a", table); tp.Position != 199 {
		t.Fatalf("held m.a at %d, want its hold position 199", tp.Position)
	}
	if tp := openIn(t, s, "m.b", table); tp.Position != 300 {
		t.Fatalf("m.b at %d, want the batch's 300", tp.Position)
	}
}
