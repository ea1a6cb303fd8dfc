package deltasink

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/sinktest"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }

func harness(root storage.Store) sinktest.Harness {
	opts := Options{AppID: "deltabus-test", SyncCheckpoints: true}
	return sinktest.Harness{
		Sink:   New(root, opts),
		Reopen: func() sink.Sink { return New(root, opts) },
		IDs: func(t *testing.T, topic string) []string {
			p, err := catalog.Locate(context.Background(), root, topic)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := delta.LoadSnapshot(context.Background(), storage.Sub(root, p.Table), -1); errors.Is(err, delta.ErrNoTable) {
				return nil
			}
			rows, err := verify.ReadTopic(context.Background(), root, topic)
			if err != nil {
				t.Fatalf("read topic %q: %v", topic, err)
			}
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			return ids
		},
		Source: func(appID string) sink.Sink { return New(root, Options{AppID: appID, SyncCheckpoints: true}) },
		Group: func(t *testing.T, name string, patterns ...string) string {
			if err := catalog.WriteGroup(context.Background(), root, catalog.Group{Name: name, Topics: patterns}); err != nil {
				t.Fatal(err)
			}
			return catalog.GroupTable(name)
		},
		Delete: func(t *testing.T, topic string) {
			ctx, table := context.Background(), storage.Sub(root, topic)
			objs, err := table.List(ctx, "", "")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := table.Delete(ctx, o.Key); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

func TestConformanceLocal(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Harness {
		root, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return harness(root)
	})
}

func TestConformanceS3(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Harness {
		b := s3test.NewBucket(t)
		root, err := storage.Open(context.Background(), b.URL("store"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		return harness(root)
	})
}

// TestCommitFilesAfterPropertyChange: a rebuild's (or bootstrap's) commit
// opens the table as it is; a table whose properties another writer
// changed (relay retention, ALTER TABLE … SET TBLPROPERTIES) used to be
// "a different table" to the commit path, which re-created it.
func TestCommitFilesAfterPropertyChange(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(root, Options{AppID: "deltabus-1-s", SyncCheckpoints: true})
	b := s.NewBatch()
	if err := b.Append(&outbox.Event{ID: "00000000-0000-4000-8000-000000000001", Topic: "orders", Key: "k", Type: "t", SchemaVersion: 1,
		Payload: `{}`, OccurredAt: time.Unix(1700000000, 0).UTC(), CommitLSN: 100, CommitTime: time.Unix(1700000000, 0).UTC()}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx, "orders", 100); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, storage.Sub(root, "orders"), delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := delta.SetProperties(ctx, tbl, map[string]string{delta.PropDeletedFileRetention: "interval 14 days"}); err != nil {
		t.Fatal(err)
	}
	rebuild := New(root, Options{AppID: "deltabus-1-s", SyncCheckpoints: true})
	if _, err := rebuild.CommitFiles(ctx, "orders", nil, 200); err != nil {
		t.Fatalf("commit after a property change: %v", err)
	}
	if tp, err := rebuild.Open(ctx, "orders"); err != nil || tp.Position != 200 || tp.Status != sink.Ready {
		t.Fatalf("after the rebuild commit: %+v %v", tp, err)
	}
}
