package subscribe_test

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/checkpointtest"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestStoreCheckpointsLocal(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) subscribe.Checkpoints {
		st, err := storage.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return subscribe.NewStoreCheckpoints(st)
	}, checkpointtest.Options{})
}

func TestStoreCheckpointsS3(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) subscribe.Checkpoints {
		b := s3test.NewBucket(t)
		st, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		return subscribe.NewStoreCheckpoints(st)
	}, checkpointtest.Options{})
}

func TestCheckpointKey(t *testing.T) {
	key, err := subscribe.CheckpointKey("billing.v2", "orders")
	if err != nil || key != "_deltabus/consumers/billing.v2/orders.json" {
		t.Fatalf("CheckpointKey = %q, %v", key, err)
	}
	for _, g := range []string{"", "Billing", "a/b", "..", "_internal", "a..b", "ü"} {
		if _, err := subscribe.CheckpointKey(g, "orders"); err == nil {
			t.Errorf("group %q accepted", g)
		}
	}
	if err := subscribe.ValidGroup("Billing"); err == nil || err.Error() != `invalid consumer group name "Billing": uppercase letter 'B' at offset 0; group names are lowercase` {
		t.Errorf("ValidGroup(Billing) = %v", err)
	}
}
