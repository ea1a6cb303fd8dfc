package subscribe

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/retentiontest"
	"github.com/deltabus/deltabus/tests/grouptest"
	"github.com/deltabus/deltabus/tests/s3test"
)

// getLog is a store that records the keys it was asked to Get.
type getLog struct {
	storage.Store
	mu   sync.Mutex
	keys []string
}

func (g *getLog) Get(ctx context.Context, key string) ([]byte, error) {
	g.mu.Lock()
	g.keys = append(g.keys, key)
	g.mu.Unlock()
	return g.Store.Get(ctx, key)
}

// dataGets returns the data files of table read through the store, with
// how often each was read.
func (g *getLog) dataGets(table string) map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for _, k := range g.keys {
		if rest, ok := strings.CutPrefix(k, table+"/"); ok && !strings.HasPrefix(rest, delta.LogDir) {
			out[rest]++
		}
	}
	return out
}

// rep returns n copies of the topics, one after the other.
func rep(n int, topics ...string) []string {
	var out []string
	for range n {
		out = append(out, topics...)
	}
	return out
}

// writeGroup writes group m's table: versions of interleaved topics, a
// version of m.b alone, one of m.0 and m.c (bounds that enclose m.a
// without holding it), and a large version of several files, mixed ones
// and one of m.a alone.
func writeGroup(t *testing.T, root storage.Store) *grouptest.Table {
	g := grouptest.New(t, root, "m", []string{"m.*"}, grouptest.Options{MaxFileRows: 500, RowGroupRows: 300})
	t.Cleanup(g.Close)
	for _, v := range [][]string{
		{"m.a", "m.b", "m.a", "m.b", "m.a"},
		{"m.b", "m.b", "m.b"},
		{"m.0", "m.c", "m.0", "m.c"},
		{"m.a"},
		append(rep(400, "m.a", "m.b", "m.b"), rep(600, "m.a")...),
		{"m.b", "m.c"},
		{"m.a", "m.a", "m.c", "m.a"},
	} {
		g.Commit(v...)
	}
	return g
}

// checkTopicEvents checks that got are exactly the events of topic g
// wrote, in order, each at its position.
func checkTopicEvents(t *testing.T, g *grouptest.Table, topic string, got []Event) {
	t.Helper()
	want := g.Events[topic]
	if len(got) != len(want) {
		t.Fatalf("%s: delivered %d events, want %d", topic, len(got), len(want))
	}
	for i, e := range got {
		w := want[i]
		pos := g.Positions[w.ID]
		if e.ID != w.ID || e.Topic != topic || e.Payload != w.Payload || e.CommitLSN != w.CommitLSN || e.Seq != w.Seq ||
			e.Source != grouptest.AppID || e.Version != pos[0] || e.Offset != pos[1] {
			t.Fatalf("%s event %d = %s %s %s at %s, want %s %s at %d/%d", topic, i, e.ID, e.Topic, e.Payload, e.Position,
				w.ID, w.Payload, pos[0], pos[1])
		}
	}
}

// TestGroupTopicGetsOnlyItsEvents: a consumer of one topic of a group gets
// exactly its events, in order, at positions counted among its own events
// of each version, across versions of interleaved topics; data files of
// other topics only are never read; the checkpoint is on the group table.
// On local disk and S3.
func TestGroupTopicGetsOnlyItsEvents(t *testing.T) {
	t.Run("Local", func(t *testing.T) { testGroupTopicEvents(t, localRoot(t)) })
	t.Run("S3", func(t *testing.T) {
		b := s3test.NewBucket(t)
		root, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		testGroupTopicEvents(t, root)
	})
}

func testGroupTopicEvents(t *testing.T, root storage.Store) {
	ctx := context.Background()
	g := writeGroup(t, root)
	last := int64(7)
	for _, name := range []string{"m.a", "m.b", "m.c", "m.0"} {
		gl := &getLog{Store: root}
		var c collector
		if err := Subscribe(ctx, gl, name, "g", c.handle, Options{BatchSize: 7}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkTopicEvents(t, g, name, c.events)
		cp, ok, err := NewStoreCheckpoints(root).Load(ctx, "g", name)
		if err != nil || !ok || cp.Position != (Position{Version: last + 1}) || cp.TableID != g.ID() {
			t.Fatalf("%s: checkpoint %+v %t %v, want version %d of table %s", name, cp, ok, err, last+1, g.ID())
		}
		got := gl.dataGets(g.Table)
		for v := int64(1); v <= last; v++ {
			for _, add := range g.DataFiles(v) {
				may := topic.MayHold(add.Stats, name)
				if n := got[add.Path]; (n > 0) != may || n > 1 {
					t.Errorf("%s: data file %s of version %d read %d times; it may hold the topic: %t", name, add.Path, v, n, may)
				}
			}
		}
	}
	if n := len(g.DataFiles(5)); n != 4 {
		t.Fatalf("version 5 has %d files, want 4 (mixed ones and one of m.a alone)", n)
	}
}

// TestGroupTopicColumnsAndDedup: by column, and with deduplication, a
// grouped topic's consumer gets the same events.
func TestGroupTopicColumnsAndDedup(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	g := writeGroup(t, root)
	var got []Event
	h := func(_ context.Context, b *Batch) error {
		for i := range b.Columns.Len() {
			got = append(got, b.Columns.Event(i))
		}
		return nil
	}
	if err := Subscribe(ctx, root, "m.a", "cols", h, Options{Columns: true, BatchSize: 100}); err != nil {
		t.Fatal(err)
	}
	checkTopicEvents(t, g, "m.a", got)
	var c collector
	if err := Subscribe(ctx, root, "m.a", "dedup", c.handle, Options{Dedup: 10}); err != nil {
		t.Fatal(err)
	}
	checkTopicEvents(t, g, "m.a", c.events)
}

// TestGroupTopicResumesInsideAVersion: from a checkpoint at any offset
// among the topic's events of a version, the next event delivered is the
// topic's event at that offset; a failed batch is delivered again.
func TestGroupTopicResumesInsideAVersion(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	g := writeGroup(t, root)
	want := g.Events["m.a"]
	cps := NewStoreCheckpoints(root)
	for i := 0; i < len(want); i += 1 + i/3 {
		pos := g.Positions[want[i].ID]
		group := "at" + itoa(int64(i))
		next := Checkpoint{Group: group, Topic: "m.a", Position: Position{Version: pos[0], Offset: pos[1]}, TableID: g.ID()}
		if err := cps.Commit(ctx, nil, next, nil); err != nil {
			t.Fatal(err)
		}
		var c collector
		if err := Subscribe(ctx, root, "m.a", group, c.handle, Options{BatchSize: 50}); err != nil {
			t.Fatal(err)
		}
		if len(c.events) != len(want)-i || c.events[0].ID != want[i].ID {
			t.Fatalf("from %d/%d: %d events, the first %s; want %d from %s", pos[0], pos[1], len(c.events), c.events[0].ID, len(want)-i, want[i].ID)
		}
	}
	c := collector{failAt: 4}
	if err := Subscribe(ctx, root, "m.a", "fails", c.handle, Options{BatchSize: 5}); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Subscribe = %v, want the handler's error", err)
	}
	if err := Subscribe(ctx, root, "m.a", "fails", c.handle, Options{BatchSize: 5}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range c.events {
		if !slices.Contains(ids, e.ID) {
			ids = append(ids, e.ID)
		}
	}
	if !slices.Equal(ids, g.IDs("m.a")) {
		t.Fatalf("after a failed batch: %d distinct events, want %d in order", len(ids), len(want))
	}
}

// TestGroupTopicStartsAndRetention: Reset to a version or a time of the
// group table, FromLatest, and retention of the group table's log work for
// a grouped topic as for a topic's own table.
func TestGroupTopicStartsAndRetention(t *testing.T) {
	root := localRoot(t)
	ctx := context.Background()
	g := writeGroup(t, root)
	from := func(v int64) []string {
		var out []string
		for _, e := range g.Events["m.a"] {
			if g.Positions[e.ID][0] >= v {
				out = append(out, e.ID)
			}
		}
		return out
	}
	ids := func(evs []Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID)
		}
		return out
	}
	if cp, err := Reset(ctx, root, nil, "m.a", "g", FromVersion(4)); err != nil || cp.TableID != g.ID() {
		t.Fatalf("Reset: %+v %v", cp, err)
	}
	var c collector
	if err := Subscribe(ctx, root, "m.a", "g", c.handle, Options{}); err != nil || !slices.Equal(ids(c.events), from(4)) {
		t.Fatalf("after Reset to version 4: %v, %d events, want %d", err, len(c.events), len(from(4)))
	}
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	v8 := g.Commit("m.b", "m.a")
	v9 := g.Commit("m.a", "m.c")
	if cp, err := Reset(ctx, root, nil, "m.a", "g", FromTime(mid)); err != nil || cp.Position != (Position{Version: v8}) {
		t.Fatalf("Reset FromTime = %+v, %v; want version %d", cp, err, v8)
	}
	c = collector{}
	if err := Subscribe(ctx, root, "m.a", "g", c.handle, Options{}); err != nil || !slices.Equal(ids(c.events), from(v8)) {
		t.Fatalf("after Reset to a time: %v, %v", err, ids(c.events))
	}
	c = collector{}
	if err := Subscribe(ctx, root, "m.a", "late", c.handle, Options{Start: FromLatest()}); err != nil || len(c.events) != 0 {
		t.Fatalf("FromLatest: %v, %d events", err, len(c.events))
	}
	g.Commit("m.c")
	v11 := g.Commit("m.a", "m.b", "m.a")
	if err := Subscribe(ctx, root, "m.a", "late", c.handle, Options{}); err != nil || !slices.Equal(ids(c.events), from(v11)) {
		t.Fatalf("FromLatest, then: %v, %v, want %v", err, ids(c.events), from(v11))
	}
	retentiontest.CleanLog(t, g.Store(), v9)
	var re *RetentionError
	err := Subscribe(ctx, root, "m.a", "new", c.handle, Options{})
	if !errors.As(err, &re) || re.Topic != "m.a" || re.Version != 0 || re.Earliest != v9 {
		t.Fatalf("a new group after clean-up of the group table: %v", err)
	}
	if _, err := Reset(ctx, root, nil, "m.a", "new", FromVersion(v8)); !errors.As(err, &re) {
		t.Fatalf("Reset before the group table's earliest version = %v", err)
	}
}

// TestGroupTopicBeforeItsTable: a follower of a topic of a group whose
// table does not exist yet waits for it and gets its events; a follower
// of a topic not placed yet whose events go to another group's table
// (a group created meanwhile, first in name order) stops with an error.
func TestGroupTopicBeforeItsTable(t *testing.T) {
	root := localRoot(t)
	g := grouptest.New(t, root, "m", []string{"m.*"}, grouptest.Options{})
	t.Cleanup(g.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c collector
	var mu sync.Mutex
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Subscribe(fctx, root, "m.x", "g", func(ctx context.Context, b *Batch) error {
			mu.Lock()
			defer mu.Unlock()
			if err := c.handle(ctx, b); err != nil {
				return err
			}
			if len(c.events) == 2 {
				stop()
			}
			return nil
		}, Options{Follow: true, PollInterval: 10 * time.Millisecond})
	}()
	time.Sleep(50 * time.Millisecond)
	g.Commit("m.y", "m.x")
	g.Commit("m.x", "m.y")
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	checkTopicEvents(t, g, "m.x", c.events)

	go func() {
		done <- Subscribe(ctx, root, "m.z", "g", (&collector{}).handle, Options{Follow: true, PollInterval: 10 * time.Millisecond})
	}()
	time.Sleep(50 * time.Millisecond)
	a := grouptest.New(t, root, "a", []string{"m.z"}, grouptest.Options{})
	t.Cleanup(a.Close)
	a.Commit("m.z")
	if err := <-done; err == nil || !strings.Contains(err.Error(), `topic "m.z" was placed in table "_group.a" while this subscription read "_group.m"`) {
		t.Fatalf("a topic placed in another group's table: %v", err)
	}
}
