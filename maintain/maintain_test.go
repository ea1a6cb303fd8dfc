package maintain

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/deltasink"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/verify"
)

// write commits n batches of 10 events to each topic through the relay's
// sink, as the relay does: one small file and one commit per batch.
func write(t *testing.T, root storage.Store, topics []string, n int) map[string][]string {
	t.Helper()
	ctx := context.Background()
	s := deltasink.New(root, deltasink.Options{AppID: "deltabus-test", SyncCheckpoints: true})
	want := map[string][]string{}
	id := 0
	for b := range n {
		batch := s.NewBatch()
		pos := int64(1000 + b*100)
		for _, tp := range topics {
			for range 10 {
				id++
				ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", id), Topic: tp, Key: "k", Type: "t",
					SchemaVersion: 1, Payload: `{"n":1}`, OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: pos, Seq: int32(id), CommitTime: time.Now().UTC()}
				if err := batch.Append(ev); err != nil {
					t.Fatal(err)
				}
				want[tp] = append(want[tp], ev.ID)
			}
		}
		for _, tp := range topics {
			if _, err := batch.Commit(ctx, tp, pos); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close(ctx)
	return want
}

func ids(t *testing.T, root storage.Store, topic string) []string {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), root, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.ID)
	}
	return out
}

// TestRunKeepsEveryRowAndTheTxn: compaction, clean-up and vacuum at
// accelerated retention leave few files and log entries, every row once in
// order, and the relay's position; a held topic is left alone.
func TestRunKeepsEveryRowAndTheTxn(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := write(t, root, []string{"orders", "payments"}, 230)
	if err := catalog.WriteRebuildState(ctx, root, catalog.RebuildState{Topic: "payments", AppID: "deltabus-test", Paused: catalog.HoldMissingTable, PausedAt: "0/10"}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(48 * time.Hour)
	rep, err := Run(ctx, root, Options{LogRetention: time.Hour, FileRetention: time.Hour, Now: func() time.Time { return later }})
	if err != nil || rep.Failed() {
		t.Fatalf("Run: %v %+v", err, rep)
	}
	byTopic := map[string]TableReport{}
	for _, tr := range rep.Tables {
		byTopic[tr.Topic] = tr
	}
	if o := byTopic["orders"]; o.Compacted != 230 || o.ActiveFiles > 2 || o.LogDeleted == 0 || o.FilesDeleted != 230 {
		t.Fatalf("orders: %+v; want 230 files compacted and vacuumed, at most 2 left, log entries deleted", o)
	}
	if p := byTopic["payments"]; p.Skipped == "" || p.Compacted != 0 {
		t.Fatalf("payments is held but was maintained: %+v", p)
	}
	if got := ids(t, root, "orders"); !slices.Equal(got, want["orders"]) {
		t.Fatalf("orders after maintenance: %d rows, want %d in order", len(got), len(want["orders"]))
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, "orders"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if txn, ok := snap.Txns["deltabus-test"]; !ok || txn.Version != 1000+229*100 {
		t.Fatalf("the relay's txn after maintenance: %+v %v", txn, ok)
	}
	// Kept: the checkpoint at 200 (the newest before the horizon), its
	// commit and every commit after it, and _last_checkpoint.
	logs, _ := storage.Sub(root, "orders").List(ctx, delta.LogDir, "")
	if o := byTopic["orders"]; o.Earliest != 200 || len(logs) != int(snap.Version-200)+3 {
		t.Fatalf("after clean-up: earliest version %d, %d log entries at version %d", o.Earliest, len(logs), snap.Version)
	}
}

// TestMaintainersAtOnceBesideWriters: what this package decides for a
// table several relays share: every relay's maintenance may run at once
// (no leader). Two sources append to one topic while three maintainers
// compact, clean up and vacuum it concurrently at accelerated retention,
// and a third writer's uploaded files wait uncommitted under its lease:
// every row of every source is there once, in its source's order, the
// lease holder's files survive and commit, and the table reads from its
// newest checkpoint.
func TestMaintainersAtOnceBesideWriters(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(2 * time.Hour) }
	opts := Options{LogRetention: time.Hour, FileRetention: time.Hour, Now: later, Compact: topic.CompactOptions{MinFiles: 2}}
	// The lease holder uploads first and commits last (a bootstrap).
	slow := deltasink.New(root, deltasink.Options{AppID: "deltabus-3-slow", SyncCheckpoints: true})
	lease, err := catalog.HoldLease(ctx, root, "deltabus-3-slow.bootstrap", nil, time.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	var slowIDs []string
	var adds []delta.Add
	{
		for i := range 5 {
			slowIDs = append(slowIDs, fmt.Sprintf("00000000-0000-4000-9000-%012d", i))
		}
		w := topic.NewFileWriter(storage.Sub(root, "orders"), topic.FileOptions{Source: "deltabus-3-slow"})
		for i := range slowIDs {
			_ = w.Append(&outbox.Event{ID: slowIDs[i], Topic: "orders", Key: "k", Type: "t", SchemaVersion: 1, Payload: `{}`,
				OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: 50, Seq: int32(i), CommitTime: time.Now().UTC()})
		}
		if adds, err = w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wants := make([]map[string][]string, 2)
	for s := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wants[s] = writeAs(t, root, fmt.Sprintf("deltabus-%d-s", s+1), s, []string{"orders"}, 60)
		}()
	}
	stop := make(chan struct{})
	var mwg sync.WaitGroup
	for range 3 {
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := Run(ctx, root, opts); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	mwg.Wait()
	if _, err := Run(ctx, root, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.CommitFiles(ctx, "orders", adds, 50); err != nil {
		t.Fatalf("the lease holder's files after three maintainers ran: %v", err)
	}
	lease.Release(ctx, root, "deltabus-3-slow.bootstrap")
	rows, err := verify.ReadTopic(ctx, root, "orders")
	if err != nil {
		t.Fatal(err)
	}
	bySource := map[string][]string{}
	for _, r := range rows {
		bySource[r.Source] = append(bySource[r.Source], r.ID)
	}
	for s := range 2 {
		if got := bySource[fmt.Sprintf("deltabus-%d-s", s+1)]; !slices.Equal(got, wants[s]["orders"]) {
			t.Fatalf("source %d: %d rows, want %d in order", s+1, len(got), len(wants[s]["orders"]))
		}
	}
	if got := bySource["deltabus-3-slow"]; !slices.Equal(got, slowIDs) {
		t.Fatalf("the lease holder's rows %q, want %q", got, slowIDs)
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, "orders"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Version < 120 {
		t.Fatalf("version %d after 120 appends", snap.Version)
	}
}

// writeAs is write for the relay of another source: its own appId, ids
// and positions.
func writeAs(t *testing.T, root storage.Store, appID string, n int, topics []string, batches int) map[string][]string {
	s := deltasink.New(root, deltasink.Options{AppID: appID, SyncCheckpoints: true})
	ctx := context.Background()
	want := map[string][]string{}
	for b := range batches {
		batch := s.NewBatch()
		pos := int64(1000 + b*100)
		for _, tp := range topics {
			for k := range 5 {
				ev := &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8%03d-%012d", n, b*10+k), Topic: tp, Key: "k", Type: "t",
					SchemaVersion: 1, Payload: `{"n":1}`, OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: pos, Seq: int32(k), CommitTime: time.Now().UTC()}
				if err := batch.Append(ev); err != nil {
					t.Error(err)
					return want
				}
				want[tp] = append(want[tp], ev.ID)
			}
		}
		for _, tp := range topics {
			if _, err := batch.Commit(ctx, tp, pos); err != nil {
				t.Error(err)
				return want
			}
		}
	}
	s.Close(ctx)
	return want
}
