package memberstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/subscribe/members"
)

// Open starts one server of the groups of root (a process serving them)
// and returns a Source for it and a function that stops it. Calling it
// again on the same root is a restart, or a second server.
type Open func(t *testing.T, root storage.Store) (members.Source, func())

// Run runs the suite; newRoot returns an empty store for each subtest.
func Run(t *testing.T, newRoot func(t *testing.T) storage.Store, open Open) {
	for _, c := range []struct {
		name string
		f    func(*testing.T, storage.Store, Open)
	}{
		{"EveryEventOnceInKeyOrder", everyEventOnce},
		{"CrashedMemberIsRedelivered", crashedMember},
		{"NackRetriesLater", nackRetries},
		{"StaleAckIsRefused", staleAck},
		{"ResetReplays", resetReplays},
		{"LongPollWakesOnCommit", longPoll},
		{"StateSurvivesRestart", restart},
		{"TwoServersOneGroup", twoServers},
		{"DuplicatesAreDropped", duplicates},
		{"BadRequestsAreRefused", badRequests},
		{"ConsumeRunsMembers", consumeMembers},
	} {
		t.Run(c.name, func(t *testing.T) { c.f(t, newRoot(t), open) })
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// runMembers runs n members per source until rec counts want events, or
// fails the test after a minute.
func runMembers(t *testing.T, srcs []members.Source, n int, topic string, want int, rec *Recorder, o MemberOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	for s, src := range srcs {
		for i := range n {
			g.Go(func() error { return Member(gctx, src, "g", topic, fmt.Sprintf("m%d-%d", s, i), rec, o) })
		}
	}
	deadline := time.Now().Add(time.Minute)
	for rec.Count() < want && time.Now().Before(deadline) && gctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := rec.Count(); got < want {
		t.Fatalf("%d of %d events acknowledged after a minute", got, want)
	}
}

func everyEventOnce(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	for range 6 {
		tp.CommitKeyed(100, 20)
	}
	src, stop := open(t, root)
	defer stop()
	rec := NewRecorder()
	runMembers(t, []members.Source{src}, 4, "orders", len(tp.Order), rec, MemberOptions{Handle: 2 * time.Millisecond})
	rec.Check(t, tp.Order, tp.Keys, true)
}

func crashedMember(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	tp.CommitKeyed(200, 10)
	src, stop := open(t, root)
	defer stop()
	rec := NewRecorder()
	var mu sync.Mutex
	dropped := map[string]bool{}
	drop := func(m members.Message) bool { // the first delivery of every seventh event is lost
		mu.Lock()
		defer mu.Unlock()
		if m.Delivery == 1 && len(dropped) < 20 && !dropped[m.Event.ID] && m.Event.ID[0]%7 == 0 {
			dropped[m.Event.ID] = true
			return true
		}
		return false
	}
	runMembers(t, []members.Source{src}, 3, "orders", len(tp.Order), rec, MemberOptions{Visibility: 300 * time.Millisecond, Drop: drop})
	rec.Check(t, tp.Order, tp.Keys, false)
	if len(dropped) > 0 && rec.Redeliveries() < len(dropped) {
		t.Fatalf("%d deliveries were never acknowledged, but only %d events were handed out again", len(dropped), rec.Redeliveries())
	}
}

func receive(t *testing.T, ctx context.Context, src members.Source, req members.ReceiveRequest) []members.Message {
	t.Helper()
	msgs, err := src.Receive(ctx, "g", "orders", req)
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return msgs
}

func ack(t *testing.T, ctx context.Context, src members.Source, ids ...string) members.AckResult {
	t.Helper()
	res, err := src.Ack(ctx, "g", "orders", ids)
	if err != nil {
		t.Fatalf("ack: %v", err)
	}
	return res
}

func nackRetries(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	id := uuid.NewString()
	tp.Commit(Event{ID: id, Key: "a"}, Event{ID: uuid.NewString(), Key: "a"})
	src, stop := open(t, root)
	defer stop()
	ctx := ctxFor(t, time.Minute)
	msgs := receive(t, ctx, src, members.ReceiveRequest{Member: "m1", Max: 10, Wait: 5 * time.Second})
	if len(msgs) != 1 || msgs[0].Event.ID != id || msgs[0].Delivery != 1 {
		t.Fatalf("first receive: %+v; want the key's first event alone, delivery 1", msgs)
	}
	res, err := src.Nack(ctx, "g", "orders", []string{msgs[0].AckID}, 400*time.Millisecond)
	if err != nil || res.Done != 1 {
		t.Fatalf("nack: %+v %v", res, err)
	}
	start := time.Now()
	again := receive(t, ctx, src, members.ReceiveRequest{Member: "m2", Max: 10, Wait: 5 * time.Second})
	if len(again) != 1 || again[0].Event.ID != id || again[0].Delivery != 2 {
		t.Fatalf("after the nack: %+v; want the same event, delivery 2", again)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("the nacked event came back after %v, before its retry time (400 ms)", waited)
	}
}

func staleAck(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	tp.CommitKeyed(1, 1)
	src, stop := open(t, root)
	defer stop()
	ctx := ctxFor(t, time.Minute)
	first := receive(t, ctx, src, members.ReceiveRequest{Member: "slow", Wait: 5 * time.Second, Visibility: 200 * time.Millisecond})
	second := receive(t, ctx, src, members.ReceiveRequest{Member: "fast", Wait: 5 * time.Second})
	if len(first) != 1 || len(second) != 1 || second[0].Delivery != 2 {
		t.Fatalf("deliveries %+v then %+v; want the event twice, the second after the lease ran out", first, second)
	}
	res := ack(t, ctx, src, first[0].AckID)
	if res.Done != 0 || len(res.Failed) != 1 || res.Failed[0].AckID != first[0].AckID || res.Failed[0].Reason == "" {
		t.Fatalf("ack of the run-out delivery: %+v; want it refused with a reason", res)
	}
	if res := ack(t, ctx, src, second[0].AckID); res.Done != 1 {
		t.Fatalf("ack of the current delivery: %+v", res)
	}
	if res := ack(t, ctx, src, second[0].AckID); res.Done != 1 || len(res.Failed) != 0 {
		t.Fatalf("the same ack again (a retried request): %+v; want success", res)
	}
	if _, err := src.Ack(ctx, "g", "orders", []string{"not-an-ack-id"}); !isRequestError(err) {
		t.Fatalf("a malformed ack id: %v; want a request error", err)
	}
}

func isRequestError(err error) bool {
	var re *members.RequestError
	return errors.As(err, &re)
}

// drain receives and acks until nothing comes for wait; it returns the
// ids received, in order.
func drain(t *testing.T, ctx context.Context, src members.Source, wait time.Duration) []string {
	t.Helper()
	var ids []string
	for {
		msgs := receive(t, ctx, src, members.ReceiveRequest{Member: "m", Max: 100, Wait: wait})
		if len(msgs) == 0 {
			return ids
		}
		var acks []string
		for _, m := range msgs {
			ids, acks = append(ids, m.Event.ID), append(acks, m.AckID)
		}
		if res := ack(t, ctx, src, acks...); res.Done != len(acks) {
			t.Fatalf("ack: %+v", res)
		}
	}
}

func resetReplays(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	v1 := tp.Commit(Event{ID: uuid.NewString(), Key: "a"})
	tp.CommitKeyed(5, 5)
	src, stop := open(t, root)
	defer stop()
	ctx := ctxFor(t, time.Minute)
	if got := drain(t, ctx, src, time.Second); len(got) != 6 {
		t.Fatalf("the group read %d events; want 6 (it starts at the first version)", len(got))
	}
	pos, err := src.Reset(ctx, "g", "orders", subscribe.FromVersion(v1+1))
	if err != nil || pos.Version != v1+1 {
		t.Fatalf("reset: %v %v", pos, err)
	}
	if got := drain(t, ctx, src, time.Second); len(got) != 5 {
		t.Fatalf("after a reset to version %d the group read %d events; want 5", v1+1, len(got))
	}
	if _, err := src.Reset(ctx, "g", "orders", subscribe.FromLatest()); err != nil {
		t.Fatal(err)
	}
	late := uuid.NewString()
	tp.Commit(Event{ID: late, Key: "b"})
	if got := drain(t, ctx, src, time.Second); len(got) != 1 || got[0] != late {
		t.Fatalf("after a reset to the latest the group read %v; want only %s", got, late)
	}
	if _, err := src.Reset(ctx, "g", "orders", subscribe.FromVersion(1000)); err == nil {
		t.Fatal("a reset past the table's versions was accepted")
	}
}

func longPoll(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	src, stop := open(t, root)
	defer stop()
	ctx := ctxFor(t, time.Minute)
	start := time.Now()
	if msgs := receive(t, ctx, src, members.ReceiveRequest{Member: "m", Wait: 300 * time.Millisecond}); len(msgs) != 0 {
		t.Fatalf("an empty topic handed out %+v", msgs)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("an empty receive with wait 300 ms took %v", waited)
	}
	id := uuid.NewString()
	go func() { time.Sleep(300 * time.Millisecond); tp.Commit(Event{ID: id, Key: "a"}) }()
	start = time.Now()
	msgs := receive(t, ctx, src, members.ReceiveRequest{Member: "m", Wait: 20 * time.Second})
	if len(msgs) != 1 || msgs[0].Event.ID != id {
		t.Fatalf("long poll: %+v", msgs)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the long poll answered %v after the commit", waited)
	}
}

func restart(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	tp.CommitKeyed(10, 10)
	src, stop := open(t, root)
	ctx := ctxFor(t, time.Minute)
	held := receive(t, ctx, src, members.ReceiveRequest{Member: "m1", Max: 4, Wait: 5 * time.Second, Visibility: 3 * time.Second})
	done := receive(t, ctx, src, members.ReceiveRequest{Member: "m2", Max: 3, Wait: 5 * time.Second})
	if len(held) != 4 || len(done) != 3 {
		t.Fatalf("received %d and %d events; want 4 and 3", len(held), len(done))
	}
	var acks []string
	for _, m := range done {
		acks = append(acks, m.AckID)
	}
	ack(t, ctx, src, acks...)
	stop()

	src, stop = open(t, root)
	defer stop()
	rest := receive(t, ctx, src, members.ReceiveRequest{Member: "m3", Max: 100, Wait: time.Second})
	if len(rest) != 3 {
		t.Fatalf("after a restart the group handed out %d events; want the 3 never handed out (4 are leased, 3 acknowledged)", len(rest))
	}
	if res := ack(t, ctx, src, held[0].AckID); res.Done != 1 {
		t.Fatalf("ack of a lease taken before the restart: %+v", res)
	}
	again := receive(t, ctx, src, members.ReceiveRequest{Member: "m3", Max: 100, Wait: 10 * time.Second})
	if len(again) != 3 {
		t.Fatalf("once the leases ran out the group handed out %d events; want the 3 leased and never acknowledged", len(again))
	}
	for _, m := range again {
		if m.Delivery != 2 {
			t.Fatalf("redelivery %+v: delivery %d, want 2", m.Event.ID, m.Delivery)
		}
	}
}

func twoServers(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	a, stopA := open(t, root)
	defer stopA()
	b, stopB := open(t, root)
	defer stopB()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 8 {
			tp.CommitKeyed(50, 15)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	rec := NewRecorder()
	<-done
	runMembers(t, []members.Source{a, b}, 3, "orders", 400, rec, MemberOptions{Handle: time.Millisecond})
	rec.Check(t, tp.Order, tp.Keys, true)
}

func duplicates(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	id := uuid.NewString()
	tp.Commit(Event{ID: id, Key: "a"}, Event{ID: uuid.NewString(), Key: "b"})
	tp.Commit(Event{ID: id, Key: "a"}) // the same event written twice
	src, stop := open(t, root)
	defer stop()
	ctx := ctxFor(t, time.Minute)
	got := drain(t, ctx, src, time.Second)
	n := 0
	for _, g := range got {
		if g == id {
			n++
		}
	}
	if len(got) != 2 || n != 1 {
		t.Fatalf("handed out %v; want each event once, the duplicate dropped", got)
	}
}

func badRequests(t *testing.T, root storage.Store, open Open) {
	NewTopic(t, root, "orders")
	src, stop := open(t, root)
	defer stop()
	ctx := ctxFor(t, time.Minute)
	for name, req := range map[string]members.ReceiveRequest{
		"no member":       {Wait: time.Millisecond},
		"max too large":   {Member: "m", Max: members.MaxMax + 1},
		"wait too long":   {Member: "m", Wait: members.MaxWait + time.Second},
		"visibility tiny": {Member: "m", Visibility: time.Millisecond},
	} {
		if _, err := src.Receive(ctx, "g", "orders", req); !isRequestError(err) {
			t.Errorf("%s: %v; want a request error", name, err)
		}
	}
	if _, err := src.Receive(ctx, "Bad Group", "orders", members.ReceiveRequest{Member: "m"}); !isRequestError(err) {
		t.Errorf("an invalid group name: %v; want a request error", err)
	}
	if _, err := src.Receive(ctx, "g", "../x", members.ReceiveRequest{Member: "m"}); !isRequestError(err) {
		t.Errorf("an invalid topic name: %v; want a request error", err)
	}
}

// consumeMembers: three members.Consume members whose handler fails the
// first delivery of some events handle every event, each key's events in
// commit order, the failed ones again after their retry.
func consumeMembers(t *testing.T, root storage.Store, open Open) {
	tp := NewTopic(t, root, "orders")
	for range 3 {
		tp.CommitKeyed(100, 12)
	}
	src, stop := open(t, root)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	handled := map[string][]string{} // key -> event ids handled successfully, in order
	count, failed := 0, 0
	h := func(_ context.Context, m *members.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Delivery == 1 && m.Event.ID[len(m.Event.ID)-1] == '7' {
			failed++
			return errors.New("injected failure")
		}
		handled[m.Event.Key] = append(handled[m.Event.Key], m.Event.ID)
		if count++; count == len(tp.Order) {
			cancel()
		}
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range 3 {
		g.Go(func() error {
			return members.Consume(gctx, src, "g", "orders", h, members.ConsumeOptions{Member: fmt.Sprintf("m%d", i),
				Max: 7, Wait: 200 * time.Millisecond, RetryAfter: 50 * time.Millisecond})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if count != len(tp.Order) || failed == 0 {
		t.Fatalf("handled %d of %d events (%d failures injected)", count, len(tp.Order), failed)
	}
	next := map[string]int{}
	for _, id := range tp.Order {
		k := tp.Keys[id]
		if got := handled[k]; next[k] >= len(got) || got[next[k]] != id {
			t.Fatalf("key %s: handled %v; want its events once each in commit order", k, got)
		}
		next[k]++
	}
}
