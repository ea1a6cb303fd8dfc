package sinktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
)

// Harness gives the suite one implementation over a fresh backing store.
type Harness struct {
	Sink sink.Sink
	// Reopen returns a new Sink over the same backing store, as a
	// restarted relay would.
	Reopen func() sink.Sink
	// IDs returns the event ids of the topic's committed rows in order.
	IDs func(t *testing.T, topic string) []string
	// Delete removes the topic's table as an operator deleting its folder
	// would (the catalog's registry entry stays).
	Delete func(t *testing.T, topic string)
	// Source returns the Sink of another relay (its own appId, another
	// source database) over the same backing store.
	Source func(appID string) sink.Sink
	// Group creates topic group name of the topic patterns and returns
	// the name of its table.
	Group func(t *testing.T, name string, patterns ...string) string
	// RollBack restores a table to its state before its last n commits,
	// as a restore from an older copy of it (a backup, S3 object
	// versions) does: the same table, a lower latest version.
	RollBack func(t *testing.T, table string, n int)
}

// Run runs the conformance suite; newHarness is called once per case.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"OpenNew", testOpenNew},
		{"CommitThenReopen", testCommitThenReopen},
		{"Fenced", testFenced},
		{"Abort", testAbort},
		{"PrepareThenCommit", testPrepareThenCommit},
		{"PreparedThenAborted", testPreparedThenAborted},
		{"Carry", testCarry},
		{"ConcurrentTopics", testConcurrentTopics},
		{"DeletedTable", testDeletedTable},
		{"SharedTopicPositions", testSharedTopicPositions},
		{"SharedTopicConcurrent", testSharedTopicConcurrent},
		{"GroupCommit", testGroupCommit},
		{"GroupTopicPositions", testGroupTopicPositions},
		{"GroupCarry", testGroupCarry},
		{"GroupTableDeleted", testGroupTableDeleted},
		{"GroupConcurrentSources", testGroupConcurrentSources},
		{"Hold", testHold},
		{"GroupHold", testGroupHold},
		{"ReplacedTable", testReplacedTable},
		{"GroupTableReplaced", testGroupTableReplaced},
		{"RolledBackTable", testRolledBackTable},
		{"RolledBackWhileStopped", testRolledBackWhileStopped},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newHarness(t)) })
	}
}

func event(topic string, n int, pos int64) *outbox.Event {
	return &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Topic: topic, Key: "k", Type: "t",
		SchemaVersion: 1, Payload: `{}`, OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: pos, Seq: int32(n), CommitTime: time.Unix(1700000000, 0).UTC()}
}

func ids(evs ...*outbox.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func open(t *testing.T, s sink.Sink, topic string) sink.Topic {
	t.Helper()
	tp, err := s.Open(context.Background(), topic)
	if err != nil {
		t.Fatalf("Open(%q): %v", topic, err)
	}
	return tp
}

func commit(t *testing.T, b sink.Batch, topic string, pos int64) sink.Commit {
	t.Helper()
	c, err := b.Commit(context.Background(), topic, pos)
	if err != nil {
		t.Fatalf("Commit(%q, %d): %v", topic, pos, err)
	}
	return c
}

func testOpenNew(t *testing.T, h Harness) {
	if tp := open(t, h.Sink, "orders"); tp.Status != sink.New || tp.Position != -1 {
		t.Fatalf("a topic never written: %+v, want New at -1", tp)
	}
}

func testCommitThenReopen(t *testing.T, h Harness) {
	b := h.Sink.NewBatch()
	o1, p1, o2 := event("orders", 1, 100), event("payments", 2, 100), event("orders", 3, 200)
	dl := &outbox.DeadLetter{Event: *event("Bad", 4, 200), Reason: "invalid topic", SourceTable: "public.outbox", RawRow: `{}`}
	for _, e := range []*outbox.Event{o1, p1, o2} {
		if err := b.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.AppendDeadLetter(dl); err != nil {
		t.Fatal(err)
	}
	if c := commit(t, b, "orders", 200); c.Events != 2 {
		t.Fatalf("orders commit: %+v, want 2 events", c)
	}
	commit(t, b, "payments", 200)
	commit(t, b, outbox.DeadLetterTopic, 200)
	s := h.Reopen()
	for _, name := range []string{"orders", "payments", outbox.DeadLetterTopic} {
		if tp := open(t, s, name); tp.Status != sink.Ready || tp.Position != 200 {
			t.Fatalf("%s after reopen: %+v, want Ready at 200", name, tp)
		}
	}
	if got := h.IDs(t, "orders"); !slices.Equal(got, ids(o1, o2)) {
		t.Fatalf("orders rows %q, want %q", got, ids(o1, o2))
	}
	if got := h.IDs(t, outbox.DeadLetterTopic); !slices.Equal(got, ids(&dl.Event)) {
		t.Fatalf("dead letters %q", got)
	}
}

// A carried topic skips its batch's commit; its rows are committed with
// the next batch's, before them, in one commit.
func testCarry(t *testing.T, h Harness) {
	b1 := h.Sink.NewBatch()
	o1, p1, o2 := event("orders", 1, 100), event("payments", 2, 100), event("orders", 3, 200)
	for _, e := range []*outbox.Event{o1, p1} {
		if err := b1.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	b2 := h.Sink.NewBatch()
	if err := b1.Carry("orders", b2); err != nil {
		t.Fatal(err)
	}
	if err := b1.Carry("orders", b2); err == nil {
		t.Fatal("carrying a topic twice succeeded")
	}
	commit(t, b1, "payments", 100)
	if _, err := b1.Commit(context.Background(), "orders", 100); err == nil {
		t.Fatal("committing a carried topic in its old batch succeeded")
	}
	if tp := open(t, h.Reopen(), "orders"); tp.Position != -1 {
		t.Fatalf("orders before the carried commit: %+v, want nothing committed", tp)
	}
	if err := b2.Append(o2); err != nil {
		t.Fatal(err)
	}
	if c := commit(t, b2, "orders", 200); c.Events != 2 {
		t.Fatalf("carried commit: %+v, want 2 events", c)
	}
	b1.Abort()
	b2.Abort()
	if got := h.IDs(t, "orders"); !slices.Equal(got, ids(o1, o2)) {
		t.Fatalf("orders rows %q, want %q", got, ids(o1, o2))
	}
	if tp := open(t, h.Reopen(), "orders"); tp.Position != 200 {
		t.Fatalf("orders after the carried commit: %+v, want position 200", tp)
	}
}

func testFenced(t *testing.T, h Harness) {
	b := h.Sink.NewBatch()
	e1 := event("orders", 1, 100)
	_ = b.Append(e1)
	commit(t, b, "orders", 100)
	zombie := h.Reopen().NewBatch()
	_ = zombie.Append(event("orders", 2, 100))
	if _, err := zombie.Commit(context.Background(), "orders", 100); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("second commit at the same position: %v, want ErrFenced", err)
	}
	if got := h.IDs(t, "orders"); !slices.Equal(got, ids(e1)) {
		t.Fatalf("rows after a fenced commit: %q", got)
	}
}

func testAbort(t *testing.T, h Harness) {
	b := h.Sink.NewBatch()
	_ = b.Append(event("orders", 1, 100))
	b.Abort()
	if tp := open(t, h.Reopen(), "orders"); tp.Status != sink.New {
		t.Fatalf("after an aborted batch: %+v, want New", tp)
	}
}

// testPrepareThenCommit: the relay's pipeline writes the next batch's
// files (Prepare) before the previous batch commits; each commit then
// holds exactly its own rows, in order.
func testPrepareThenCommit(t *testing.T, h Harness) {
	ctx := context.Background()
	b1, b2 := h.Sink.NewBatch(), h.Sink.NewBatch()
	e1, e2, e3 := event("orders", 1, 100), event("orders", 2, 100), event("orders", 3, 200)
	_ = b1.Append(e1)
	_ = b1.Append(e2)
	if err := b1.Prepare(ctx, "orders"); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	_ = b2.Append(e3)
	if err := b2.Prepare(ctx, "orders"); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if tp := open(t, h.Reopen(), "orders"); tp.Status != sink.New {
		t.Fatalf("after Prepare alone: %+v, want New (prepared files are not visible)", tp)
	}
	if c := commit(t, b1, "orders", 100); c.Events != 2 {
		t.Fatalf("first commit holds %d events, want 2", c.Events)
	}
	if c := commit(t, b2, "orders", 200); c.Events != 1 {
		t.Fatalf("second commit holds %d events, want 1", c.Events)
	}
	if got, want := h.IDs(t, "orders"), ids(e1, e2, e3); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if err := h.Sink.NewBatch().Prepare(ctx, "orders"); err == nil {
		t.Fatal("Prepare of a topic with no rows succeeded")
	}
}

// testPreparedThenAborted: files prepared for a batch that never commits
// (the previous batch's commit failed) are never visible.
func testPreparedThenAborted(t *testing.T, h Harness) {
	b := h.Sink.NewBatch()
	_ = b.Append(event("orders", 1, 100))
	if err := b.Prepare(context.Background(), "orders"); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	b.Abort()
	if tp := open(t, h.Reopen(), "orders"); tp.Status != sink.New {
		t.Fatalf("after a prepared, aborted batch: %+v, want New", tp)
	}
}

func testConcurrentTopics(t *testing.T, h Harness) {
	b := h.Sink.NewBatch()
	var names []string
	for i := range 12 {
		n := fmt.Sprintf("topic-%02d", i)
		names = append(names, n)
		for j := range 50 {
			_ = b.Append(event(n, i*100+j, 500))
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Commit(context.Background(), n, 500)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s := h.Reopen()
	for _, n := range names {
		if tp := open(t, s, n); tp.Position != 500 || len(h.IDs(t, n)) != 50 {
			t.Fatalf("%s: %+v with %d rows", n, tp, len(h.IDs(t, n)))
		}
	}
}

// testDeletedTable: a table deleted under a writer is never written again
// without its beginning, and a reopen reports it Missing.
func testDeletedTable(t *testing.T, h Harness) {
	b := h.Sink.NewBatch()
	_ = b.Append(event("orders", 1, 100))
	commit(t, b, "orders", 100)
	h.Delete(t, "orders")
	b = h.Sink.NewBatch()
	_ = b.Append(event("orders", 2, 200))
	if _, err := b.Commit(context.Background(), "orders", 200); !errors.Is(err, sink.ErrTableGone) {
		t.Fatalf("commit to a deleted table: %v, want ErrTableGone", err)
	}
	if tp := open(t, h.Reopen(), "orders"); tp.Status != sink.Missing {
		t.Fatalf("reopened deleted table: %+v, want Missing", tp)
	}
	if got := h.IDs(t, "orders"); len(got) != 0 {
		t.Fatalf("a deleted table has rows %q", got)
	}
}

// testSharedTopicPositions: two sources' relays write one topic; each has
// its own position, whatever the other's (their LSNs are of two clusters),
// and a replay of one is fenced by its own position only.
func testSharedTopicPositions(t *testing.T, h Harness) {
	a, b := h.Sink, h.Source("deltabus-2-other")
	ba := a.NewBatch()
	ea := event("orders", 1, 900)
	_ = ba.Append(ea)
	commit(t, ba, "orders", 900)
	bb := b.NewBatch()
	eb := event("orders", 2, 100)
	_ = bb.Append(eb)
	if _, err := bb.Commit(context.Background(), "orders", 100); err != nil {
		t.Fatalf("source B below source A's position: %v, want committed", err)
	}
	if tp := open(t, h.Reopen(), "orders"); tp.Position != 900 {
		t.Fatalf("source A's position %d, want 900", tp.Position)
	}
	if tp := open(t, h.Source("deltabus-2-other"), "orders"); tp.Position != 100 {
		t.Fatalf("source B's position %d, want 100", tp.Position)
	}
	if tp := open(t, h.Source("deltabus-3-new"), "orders"); tp.Position != -1 || tp.Status != sink.Ready {
		t.Fatalf("a third source: %+v, want Ready at -1", tp)
	}
	replay := h.Source("deltabus-2-other").NewBatch()
	_ = replay.Append(event("orders", 3, 100))
	if _, err := replay.Commit(context.Background(), "orders", 100); !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("source B's replay: %v, want ErrFenced", err)
	}
	if got := h.IDs(t, "orders"); !slices.Equal(got, ids(ea, eb)) {
		t.Fatalf("rows %q, want %q", got, ids(ea, eb))
	}
}

// testSharedTopicConcurrent: several sources commit into one topic at once
// (a new table, so they race for its creation too): every commit lands
// once, and each source's rows are in its own order.
func testSharedTopicConcurrent(t *testing.T, h Harness) {
	const sources, batches, per = 3, 8, 5
	concurrentSources(t, h, sources, func(s int, snk sink.Sink) error {
		for k := range batches {
			b := snk.NewBatch()
			for j := range per {
				_ = b.Append(event("shared", s*10000+k*100+j, int64(1000*(k+1))))
			}
			if _, err := b.Commit(context.Background(), "shared", int64(1000*(k+1))); err != nil {
				return err
			}
		}
		return nil
	})
	got := h.IDs(t, "shared")
	if len(got) != sources*batches*per {
		t.Fatalf("%d rows, want %d", len(got), sources*batches*per)
	}
	inSourceOrder(t, "shared", got)
	for s := range sources {
		if tp := open(t, h.Source(fmt.Sprintf("deltabus-%d-s", s+1)), "shared"); tp.Position != 1000*batches {
			t.Fatalf("source %d at %d, want %d", s, tp.Position, 1000*batches)
		}
	}
}

// concurrentSources runs write for sources sinks of appIds
// deltabus-<s+1>-s at once and fails the test with their errors.
func concurrentSources(t *testing.T, h Harness, sources int, write func(s int, snk sink.Sink) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, sources)
	for s := range sources {
		snk := h.Source(fmt.Sprintf("deltabus-%d-s", s+1))
		wg.Go(func() { errs[s] = write(s, snk) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// inSourceOrder checks that the rows ids of topic name, numbered
// source*10000+n by the concurrent tests, keep each source's order.
func inSourceOrder(t *testing.T, name string, ids []string) {
	t.Helper()
	last := map[int]int{}
	for _, id := range ids {
		var n int
		fmt.Sscanf(id[len(id)-12:], "%d", &n)
		s := n / 10000
		if prev, ok := last[s]; ok && n <= prev {
			t.Fatalf("%s, source %d: row %d after %d", name, s, n, prev)
		}
		last[s] = n
	}
}

// testHold: a held topic's commit records its Hold position, not the
// batch's; the cap moves with carried rows; a topic without rows in the
// batch is not committed by a hold.
func testHold(t *testing.T, h Harness) {
	b1 := h.Sink.NewBatch()
	o1, p1 := event("orders", 1, 100), event("payments", 2, 100)
	_ = b1.Append(o1)
	_ = b1.Append(p1)
	b1.Hold("orders", 149)
	b1.Hold("refunds", 149)
	b2 := h.Sink.NewBatch()
	if err := b1.Carry("orders", b2); err != nil {
		t.Fatal(err)
	}
	commit(t, b1, "payments", 300)
	p2 := event("payments", 3, 400)
	_ = b2.Append(p2)
	commit(t, b2, "orders", 400)
	commit(t, b2, "payments", 400)
	s := h.Reopen()
	for name, want := range map[string]int64{"orders": 149, "payments": 400} {
		if tp := open(t, s, name); tp.Position != want {
			t.Fatalf("%s at %d, want %d", name, tp.Position, want)
		}
	}
	if tp := open(t, s, "refunds"); tp.Status != sink.New {
		t.Fatalf("a held topic without rows: %+v, want New (nothing committed)", tp)
	}
	if got := h.IDs(t, "orders"); !slices.Equal(got, ids(o1)) {
		t.Fatalf("orders rows %q, want %q", got, ids(o1))
	}
}
