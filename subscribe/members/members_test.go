package members_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
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

// failingAcks is the in-process source whose first acknowledgements fail
// as over a network: alternately never reaching the server (a server
// restarting) and landing with the answer lost (a server dying after its
// entry landed).
type failingAcks struct {
	members.Source
	mu   sync.Mutex
	fail int
}

func (u *failingAcks) Ack(ctx context.Context, group, topic string, ids []string) (members.AckResult, error) {
	u.mu.Lock()
	fail := u.fail
	if fail > 0 {
		u.fail--
	}
	u.mu.Unlock()
	if fail%2 == 1 {
		return members.AckResult{}, members.Unavailable(errors.New("connection refused"))
	}
	res, err := u.Source.Ack(ctx, group, topic, ids)
	if err == nil && fail > 0 {
		return members.AckResult{}, members.Unavailable(errors.New("connection reset by peer"))
	}
	return res, err
}

// TestConsumeRepeatsAnUnansweredAck: a member whose acknowledgements got
// no answer, whether they landed or not, sends them again while the
// leases hold, and the repeat succeeds: no event is handed out twice.
func TestConsumeRepeatsAnUnansweredAck(t *testing.T) {
	root := localRoot(t)
	tp := memberstest.NewTopic(t, root, "orders")
	tp.CommitKeyed(60, 6)
	gs := members.New(root, members.Options{PollInterval: 10 * time.Millisecond})
	defer gs.Close()
	src := &failingAcks{Source: gs, fail: 6}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]int{}
	err := members.Consume(ctx, src, "g", "orders", func(_ context.Context, m *members.Message) error {
		if seen[m.Event.ID]++; len(seen) == len(tp.Order) {
			go func() { // stop once the last acknowledgement is in
				for ctx.Err() == nil {
					if st := gs.Status(); len(st) == 1 && st[0].Acked == int64(len(tp.Order)) {
						cancel()
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		return nil
	}, members.ConsumeOptions{Member: "m", Max: 5, Wait: 100 * time.Millisecond, Visibility: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if src.fail != 0 {
		t.Fatalf("%d acknowledgements were still to fail: the test did not run as planned", src.fail)
	}
	st := gs.Status()
	if len(st) != 1 || st[0].Acked != int64(len(tp.Order)) || st[0].Redelivered != 0 {
		t.Fatalf("status %+v: want %d events acknowledged, none handed out again", st, len(tp.Order))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s handed to the member %d times", id, n)
		}
	}
}
