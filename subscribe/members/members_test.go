package members_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Run(m)) }

func localRoot(t *testing.T) storage.Store {
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openGroups(t *testing.T, root storage.Store) (members.Source, func()) {
	gs := members.New(root, members.Options{PollInterval: 20 * time.Millisecond, SyncInterval: 50 * time.Millisecond, SnapshotEvery: 50})
	return gs, gs.Close
}

// TestGroupsConform: the in-process groups pass the suite on local disk.
func TestGroupsConform(t *testing.T) {
	memberstest.Run(t, localRoot, openGroups)
}

// TestGroupsConformOnS3: the same suite against a real S3 server.
func TestGroupsConformOnS3(t *testing.T) {
	memberstest.Run(t, func(t *testing.T) storage.Store {
		b := s3test.NewBucket(t)
		root, err := storage.Open(context.Background(), b.URL("bus"), b.Options())
		if err != nil {
			t.Fatal(err)
		}
		return root
	}, openGroups)
}

// TestSmallBufferStillDelivers: a group whose buffer holds only a few
// events (by count and by bytes) still hands every event out, in key
// order, reading on as the oldest are acknowledged.
func TestSmallBufferStillDelivers(t *testing.T) {
	root := localRoot(t)
	tp := memberstest.NewTopic(t, root, "orders")
	big := `{"pad":"` + strings.Repeat("x", 4000) + `"}`
	for c := range 4 {
		evs := make([]memberstest.Event, 50)
		for i := range evs {
			evs[i] = memberstest.Event{ID: fmt.Sprintf("e%d-%d", c, i), Key: fmt.Sprintf("k%d", i%7), Payload: big}
		}
		tp.Commit(evs...)
	}
	gs := members.New(root, members.Options{PollInterval: 10 * time.Millisecond, MaxBuffered: 30, MaxBufferedBytes: 20_000})
	defer gs.Close()
	rec := memberstest.NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- memberstest.Member(ctx, gs, "g", "orders", "m", rec, memberstest.MemberOptions{Max: 100})
	}()
	deadline := time.Now().Add(time.Minute)
	for rec.Count() < len(tp.Order) && time.Now().Before(deadline) {
		if st := gs.Status(); len(st) == 1 && st[0].Buffered > 30 {
			t.Fatalf("the group holds %d events, over its bound of 30", st[0].Buffered)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec.Check(t, tp.Order, tp.Keys, true)
}
