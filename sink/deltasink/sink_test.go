package deltasink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/sinktest"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
	"github.com/deltabus/deltabus/verify"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }

// harness is the conformance suite's sink on root; readAhead as the relay
// sets it for the store (on S3).
func harness(root storage.Store, readAhead bool) sinktest.Harness {
	opts := Options{AppID: "deltabus-test", SyncCheckpoints: true, ReadAhead: readAhead}
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
			return readIDs(t, root, topic)
		},
		Source: func(appID string) sink.Sink {
			return New(root, Options{AppID: appID, SyncCheckpoints: true, ReadAhead: readAhead})
		},
		Group: func(t *testing.T, name string, patterns ...string) string {
			if err := catalog.WriteGroup(context.Background(), root, catalog.Group{Name: name, Topics: patterns}); err != nil {
				t.Fatal(err)
			}
			return catalog.GroupTable(name)
		},
		RollBack: func(t *testing.T, table string, n int) { rollBack(t, storage.Sub(root, table), n) },
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

// rollBack restores a table to its state before its last n commits, as
// a restore from an older copy does: their commit files go, and so do
// checkpoints of them and the hint that may name one.
func rollBack(t *testing.T, table storage.Store, n int) {
	t.Helper()
	ctx := context.Background()
	objs, err := table.List(ctx, delta.LogDir, "")
	if err != nil {
		t.Fatal(err)
	}
	version := func(key string) (int64, bool) {
		name := strings.TrimPrefix(key, delta.LogDir)
		if len(name) < 21 || name[20] != '.' {
			return 0, false
		}
		v, err := strconv.ParseInt(name[:20], 10, 64)
		return v, err == nil
	}
	var last int64 = -1
	for _, o := range objs {
		if v, ok := version(o.Key); ok && strings.HasSuffix(o.Key, ".json") {
			last = max(last, v)
		}
	}
	for _, o := range objs {
		if v, ok := version(o.Key); ok && v > last-int64(n) || strings.HasSuffix(o.Key, "_last_checkpoint") {
			if err := table.Delete(ctx, o.Key); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// readIDs returns the ids of the topic's rows in the log's order.
func readIDs(t *testing.T, root storage.Store, topic string) []string {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), root, topic)
	if err != nil {
		t.Fatalf("read topic %q: %v", topic, err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestConformanceLocal(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Harness {
		root, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return harness(root, false)
	})
}

func TestConformanceS3(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Harness {
		b := s3test.NewBucket(t)
		root, err := storage.Open(context.Background(), b.URL("store"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		return harness(root, true)
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
	if err := commitOne(ctx, t, s, "orders", 100, event("orders", 100)); err != nil {
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

// TestWarnsOfLargeState: a table whose in-memory state passes the
// threshold is warned about once, then again at each doubling, with its
// counts; a table loaded already past several thresholds warns once.
func TestWarnsOfLargeState(t *testing.T) {
	defer func(n int64) { stateWarnFiles = n }(stateWarnFiles)
	stateWarnFiles = 3
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	commit := func(s *Sink, i int) {
		if err := commitOne(ctx, t, s, "orders", int64(100+i), event("orders", 100+i)); err != nil {
			t.Fatal(err)
		}
	}
	s := New(root, Options{AppID: "deltabus-1-s", SyncCheckpoints: true, Logger: log})
	for i := range 14 {
		commit(s, i)
	}
	want := []string{"files=3 ", "files=6 ", "files=12 "}
	if got := warnedAt(logs.String()); !slices.Equal(got, want) {
		t.Errorf("warnings at %q; want %q\n%s", got, want, logs.String())
	}
	logs.Reset()
	commit(New(root, Options{AppID: "deltabus-1-s", SyncCheckpoints: true, Logger: log}), 14)
	if got := warnedAt(logs.String()); !slices.Equal(got, []string{"files=15 "}) {
		t.Errorf("a sink opening the table with 15 files warned at %q; want once\n%s", got, logs.String())
	}
}

// warnedAt returns the files=N attribute of each large-state warning.
func warnedAt(logs string) []string {
	var at []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "table state large") {
			i := strings.Index(l, "files=")
			at = append(at, l[i:i+strings.IndexByte(l[i:], ' ')+1])
		}
	}
	return at
}
