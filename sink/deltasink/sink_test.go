package deltasink

import (
	"context"
	"errors"
	"os"
	"testing"

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
			if _, err := delta.LoadSnapshot(context.Background(), storage.Sub(root, topic), -1); errors.Is(err, delta.ErrNoTable) {
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
