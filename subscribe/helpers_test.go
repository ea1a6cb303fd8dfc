package subscribe

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }

// testTopic writes a topic table the way the relay does: version 0 creates
// it, every later version is one commit of one or more data files whose rows
// are in (commit_lsn, seq) order.
type testTopic struct {
	t     testing.TB
	root  storage.Store
	name  string
	tbl   *delta.Table
	lsn   int64
	total int
}

func newTestTopic(t testing.TB, root storage.Store, name string) *testTopic {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(root, name)
	meta, proto := topic.NewTableMetadata(name)
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &testTopic{t: t, root: root, name: name, tbl: tbl, lsn: 1000}
}

// commit appends one version of n events split into files of perFile rows;
// it returns the version.
func (tt *testTopic) commit(n, perFile int) int64 {
	tt.t.Helper()
	ctx := context.Background()
	w := topic.NewFileWriter(storage.Sub(tt.root, tt.name), topic.FileOptions{MaxFileRows: perFile})
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range n {
		if i%3 == 0 {
			tt.lsn += 100 // a new source transaction every 3 events
		}
		tt.total++
		h := fmt.Sprintf(`{"trace":"t%d"}`, tt.total)
		ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", tt.total), Topic: tt.name, Key: fmt.Sprintf("k%d", tt.total%7),
			Type: "Happened", SchemaVersion: int32(1 + tt.total%2), Payload: fmt.Sprintf(`{"n":%d}`, tt.total), Headers: &h,
			OccurredAt: now.Add(time.Duration(tt.total) * time.Microsecond), CommitLSN: tt.lsn, Seq: int32(i % 3), Xid: tt.lsn / 100, CommitTime: now}
		if tt.total%4 == 0 {
			ev.Headers = nil // NULL headers
		}
		if tt.total%5 == 0 {
			ev.OccurredAt = time.Time{} // NULL occurred_at (a dead letter's)
		}
		if err := w.Append(ev); err != nil {
			tt.t.Fatal(err)
		}
	}
	adds, err := w.Close(ctx)
	if err != nil {
		tt.t.Fatal(err)
	}
	v, err := tt.tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: "test", Version: tt.lsn}})
	if err != nil {
		tt.t.Fatal(err)
	}
	return v
}

// reopen reloads the table handle after rawCommit wrote versions.
func (tt *testTopic) reopen() {
	tt.t.Helper()
	tbl, err := delta.OpenTable(context.Background(), storage.Sub(tt.root, tt.name), delta.Options{})
	if err != nil {
		tt.t.Fatal(err)
	}
	tt.tbl = tbl
}

// rawCommit writes version v with the given actions (compaction, metadata).
func (tt *testTopic) rawCommit(v int64, acts []delta.Action) {
	tt.t.Helper()
	ts := time.Now().UnixMilli()
	acts = append([]delta.Action{{CommitInfo: &delta.CommitInfo{Timestamp: &ts}}}, acts...)
	data, err := delta.EncodeCommit(acts)
	if err != nil {
		tt.t.Fatal(err)
	}
	if err := storage.Sub(tt.root, tt.name).PutIfAbsent(context.Background(), delta.CommitKey(v), data); err != nil {
		tt.t.Fatal(err)
	}
}

func localRoot(t testing.TB) storage.Store {
	t.Helper()
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// collector is a Handler that records what it got.
type collector struct {
	events  []Event
	batches []Batch
	failAt  int // fail the failAt-th batch (1-based), 0 = never
}

func (c *collector) handle(_ context.Context, b *Batch) error {
	if c.failAt > 0 && len(c.batches)+1 == c.failAt {
		c.failAt = 0
		return fmt.Errorf("injected failure")
	}
	cp := *b
	cp.Events = nil
	c.batches = append(c.batches, cp)
	c.events = append(c.events, b.Events...)
	return nil
}
