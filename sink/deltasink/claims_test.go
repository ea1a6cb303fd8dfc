package deltasink

import (
	"context"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/storage"
)

// TestFirstCommitWritesTheClaim: the commit that puts a source's first
// position of a topic into a table writes the source's claim on it before
// it returns (before the relay may acknowledge it); later commits leave
// the claim to the background refresh and to Close, which writes it.
func TestFirstCommitWritesTheClaim(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(root, Options{AppID: "deltabus-1-s", SyncCheckpoints: true})
	claim := func() catalog.Progress {
		t.Helper()
		c, ok, err := catalog.ReadClaim(ctx, root, "deltabus-1-s", "orders")
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		return c.Topics["orders"]
	}
	if err := commitOne(ctx, t, s, "orders", 100, event("orders", 1)); err != nil {
		t.Fatal(err)
	}
	first := claim()
	if first.Txn != 100 || first.TableID == "" {
		t.Fatalf("claim after the first commit: %+v, want position 100 in the table", first)
	}
	if err := commitOne(ctx, t, s, "orders", 200, event("orders", 2)); err != nil {
		t.Fatal(err)
	}
	if got := claim(); got != first {
		t.Fatalf("a later commit wrote the claim on its path: %+v", got)
	}
	s.Close(ctx)
	if got := claim(); got.Txn != 200 || got.TableID != first.TableID {
		t.Fatalf("claim after Close: %+v, want position 200", got)
	}
	if tp, err := New(root, Options{AppID: "deltabus-1-s"}).Open(ctx, "orders"); err != nil || tp.Status != sink.Ready || tp.Position != 200 {
		t.Fatalf("reopened: %+v %v", tp, err)
	}
}
