package statuspage

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
)

// TestPageShowsMembersGroups: a group served to parallel members has its
// row, with its events in flight, the oldest event's key and its
// protection against retention.
func TestPageShowsMembersGroups(t *testing.T) {
	ctx := context.Background()
	root, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tp := memberstest.NewTopic(t, root, "orders")
	tp.Commit(memberstest.Event{ID: "e1", Key: "hot-key"}, memberstest.Event{ID: "e2", Key: "other"})
	gs := members.New(root, members.Options{SnapshotEvery: 1, PollInterval: 10 * time.Millisecond})
	msgs, err := gs.Receive(ctx, "billing", "orders", members.ReceiveRequest{Member: "m1", Max: 1, Wait: 5 * time.Second})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if _, err := gs.Receive(ctx, "billing", "orders", members.ReceiveRequest{Member: "m2", Max: 1, Wait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the snapshot is written in the background
	gs.Close()
	if err := members.Protect(ctx, root, "billing", "orders", 168*time.Hour); err != nil {
		t.Fatal(err)
	}
	c := New(Config{Store: root, AppID: func() string { return "deltabus-main" }, Slot: "main", Version: "test"})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	page, _ := get(t, srv.URL+"/")
	for _, want := range []string{`<tr data-group="billing" data-topic="orders"`, "2 in flight to 2 members", "oldest: key <code>hot-key</code>",
		"retention: up to 168h0m0s"} {
		if !strings.Contains(page, want) {
			i := strings.Index(page, `id="consumers"`)
			t.Fatalf("the page lacks %q:\n%s", want, page[i:min(len(page), i+2000)])
		}
	}
}
