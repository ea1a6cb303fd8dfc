package subscribe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/retentiontest"
)

func checkOrder(t *testing.T, evs []Event, want int) {
	t.Helper()
	if len(evs) != want {
		t.Fatalf("delivered %d events, want %d", len(evs), want)
	}
	seen := map[string]bool{}
	for i, e := range evs {
		if seen[e.ID] {
			t.Fatalf("event %s delivered twice", e.ID)
		}
		seen[e.ID] = true
		if i == 0 {
			continue
		}
		p := evs[i-1]
		if e.CommitLSN < p.CommitLSN || (e.CommitLSN == p.CommitLSN && e.Seq <= p.Seq) {
			t.Fatalf("event %d (%d,%d) not after event %d (%d,%d)", i, e.CommitLSN, e.Seq, i-1, p.CommitLSN, p.Seq)
		}
	}
}

// TestDeliversEveryEventInOrder: several versions of several files, batches
// spanning versions; every event once, in (commit_lsn, seq) order, with its
// position, and the checkpoint after the last.
func TestDeliversEveryEventInOrder(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	for _, n := range []int{10, 1, 25, 7} {
		tt.commit(n, 4)
	}
	var c collector
	if err := Subscribe(context.Background(), root, "orders", "g1", c.handle, Options{BatchSize: 6}); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, c.events, 43)
	if e := c.events[11]; e.Version != 3 || e.Offset != 0 || e.Payload != `{"n":12}` || e.Headers != nil || e.SchemaVersion != 1 || c.events[10].Headers == nil || *c.events[10].Headers != `{"trace":"t11"}` {
		t.Errorf("event 11 = %+v", e)
	}
	for i, b := range c.batches {
		if i > 0 && b.From != c.batches[i-1].To {
			t.Errorf("batch %d starts at %v, previous ended at %v", i, b.From, c.batches[i-1].To)
		}
		if b.Tx != nil {
			t.Error("object-store checkpoints gave a tx")
		}
	}
	cp, ok, err := NewStoreCheckpoints(root).Load(context.Background(), "g1", "orders")
	if err != nil || !ok || cp.Position != (Position{Version: 5}) || cp.TableID == "" {
		t.Fatalf("checkpoint %+v %t %v, want version 5 offset 0", cp, ok, err)
	}
}

// TestResumesAfterAFailedBatch: a handler error stops the subscription with
// the checkpoint before the batch; the next run delivers that batch again
// and goes on (at least once), nothing skipped.
func TestResumesAfterAFailedBatch(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	tt.commit(20, 8)
	tt.commit(5, 8)
	c := collector{failAt: 3}
	err := Subscribe(context.Background(), root, "orders", "g", c.handle, Options{BatchSize: 4})
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Subscribe = %v, want the handler's error", err)
	}
	if err := Subscribe(context.Background(), root, "orders", "g", c.handle, Options{BatchSize: 4}); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, c.events, 25)
	if c.batches[2].From != (Position{Version: 1, Offset: 8}) {
		t.Errorf("third batch from %v, want version 1 offset 8", c.batches[2].From)
	}
}

// TestSkipsVersionsWithoutDataChange: a compaction commit (remove + add
// with dataChange=false) and a metadata-only commit deliver nothing, and
// the checkpoint moves past them.
func TestSkipsVersionsWithoutDataChange(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	tt.commit(6, 3)
	var c collector
	ctx := context.Background()
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{}); err != nil {
		t.Fatal(err)
	}
	compact(t, tt, 2, 1)
	snap, _ := delta.LoadSnapshot(ctx, storage.Sub(root, "orders"), -1)
	tt.rawCommit(3, []delta.Action{{Metadata: &snap.Metadata}})
	tt.reopen()
	tt.commit(2, 3)
	if err := Subscribe(ctx, root, "orders", "g", c.handle, Options{}); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, c.events, 8)
	if c.events[6].Version != 4 {
		t.Errorf("event after the compaction is at version %d, want 4", c.events[6].Version)
	}
}

// compact writes version v rewriting every file of version src into one
// file with dataChange=false, as OPTIMIZE does; it returns the removed keys.
func compact(t *testing.T, tt *testTopic, v, src int64) []string {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(tt.root, tt.name)
	acts, err := readCommit(ctx, st, src)
	if err != nil {
		t.Fatal(err)
	}
	var out []delta.Action
	var removed []string
	now := time.Now().UnixMilli()
	for _, a := range acts {
		if a.Add == nil {
			continue
		}
		size := a.Add.Size
		out = append(out, delta.Action{Remove: &delta.Remove{Path: a.Add.Path, DeletionTimestamp: &now, Size: &size}})
		removed = append(removed, a.Add.Path)
		data, err := st.Get(ctx, a.Add.Path)
		if err != nil {
			t.Fatal(err)
		}
		copyPath := "compacted-" + a.Add.Path
		if err := st.Put(ctx, copyPath, data); err != nil {
			t.Fatal(err)
		}
		add := *a.Add
		add.Path, add.DataChange = copyPath, false
		out = append(out, delta.Action{Add: &add})
	}
	tt.rawCommit(v, out)
	return removed
}

// TestRetentionPassedIsAnError: the log cleaned the way cleanup does (a
// checkpoint kept, every commit before it deleted) fails a group behind it
// with the clear error; a group at or after the checkpoint goes on.
func TestRetentionPassedIsAnError(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	ctx := context.Background()
	for range 3 {
		tt.commit(2, 2)
	}
	var c collector
	if err := Subscribe(ctx, root, "orders", "behind", c.handle, Options{}); err != nil {
		t.Fatal(err)
	}
	for range 9 {
		tt.commit(2, 2)
	}
	retentiontest.CleanLog(t, storage.Sub(root, "orders"), 10)
	err := Subscribe(ctx, root, "orders", "behind", c.handle, Options{})
	var re *RetentionError
	if !errors.As(err, &re) || !errors.Is(err, ErrRetentionPassed) ||
		!strings.Contains(err.Error(), "retention passed this group's position (version 4, earliest 10)") {
		t.Fatalf("Subscribe behind retention = %v", err)
	}
	if err := Subscribe(ctx, root, "orders", "new", c.handle, Options{}); !errors.As(err, &re) || re.Earliest != 10 || re.Version != 0 {
		t.Fatalf("new group from version 0 after cleanup = %v", err)
	}
	if _, err := Reset(ctx, root, nil, "orders", "behind", FromVersion(3)); !errors.As(err, &re) {
		t.Fatalf("Reset before the earliest version = %v", err)
	}
	if _, err := Reset(ctx, root, nil, "orders", "behind", FromVersion(10)); err != nil {
		t.Fatal(err)
	}
	c = collector{}
	if err := Subscribe(ctx, root, "orders", "behind", c.handle, Options{}); err != nil || len(c.events) != 6 {
		t.Fatalf("after reset: %v, %d events (want versions 10-12: 6)", err, len(c.events))
	}
}

// TestVacuumedFileIsARetentionError: a compaction rewrote the files of the
// version a group is at and VACUUM deleted them.
func TestVacuumedFileIsARetentionError(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	ctx := context.Background()
	tt.commit(4, 2)
	if err := Subscribe(ctx, root, "orders", "g", (&collector{}).handle, Options{}); err != nil {
		t.Fatal(err)
	}
	tt.commit(4, 2)
	removed := compact(t, tt, 3, 2)
	for _, p := range removed {
		if err := storage.Sub(root, "orders").Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	err := Subscribe(ctx, root, "orders", "g", (&collector{}).handle, Options{})
	if !strings.Contains(fmt.Sprint(err), "retention passed this group's position (version 2, earliest 3): data file") {
		t.Fatalf("Subscribe over a vacuumed file = %v", err)
	}
}

// countingStore counts the requests a subscription makes.
type countingStore struct {
	storage.Store
	mu     sync.Mutex
	lists  []string // startAfter of each List
	gets   int
	active bool
}

func (c *countingStore) List(ctx context.Context, prefix, after string) ([]storage.Object, error) {
	c.mu.Lock()
	if c.active {
		c.lists = append(c.lists, after)
	}
	c.mu.Unlock()
	return c.Store.List(ctx, prefix, after)
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	if c.active {
		c.gets++
	}
	c.mu.Unlock()
	return c.Store.Get(ctx, key)
}

// TestIdlePollIsOneListAfterThePosition: once caught up, each poll is one
// List of _delta_log starting after the last version read, and no Get.
func TestIdlePollIsOneListAfterThePosition(t *testing.T) {
	root := localRoot(t)
	tt := newTestTopic(t, root, "orders")
	for range 30 {
		tt.commit(1, 1)
	}
	cs := &countingStore{Store: root}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	delivered := 0
	h := func(_ context.Context, b *Batch) error {
		mu.Lock()
		defer mu.Unlock()
		delivered += len(b.Events)
		if delivered == 30 {
			cs.mu.Lock()
			cs.active = true
			cs.mu.Unlock()
			time.AfterFunc(220*time.Millisecond, cancel)
		}
		return nil
	}
	err := Subscribe(ctx, cs, "orders", "g", h, Options{Follow: true, PollInterval: 20 * time.Millisecond})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.lists) < 5 || cs.gets > 1 { // the one Get: the checkpoint's read-compare before the last commit
		t.Fatalf("idle polls: %d lists, %d gets", len(cs.lists), cs.gets)
	}
	for _, after := range cs.lists[1:] {
		if after != "orders/"+delta.CommitKey(29) {
			t.Fatalf("idle poll listed after %q, want after version 29", after)
		}
	}
}
