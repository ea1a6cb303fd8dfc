package relay

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/sink"
	"github.com/deltabus/deltabus/sink/sinktest"
)

// Batches reach the sink in commit order, each topic commit at the batch's
// last commit LSN, and the acknowledged position follows.
func TestBatchesCommittedInOrderThenAcknowledged(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, nil)
	var end = h.src.lsn
	for range 20 {
		_, end = h.src.tx("orders", "payments")
		_, end = h.src.tx("orders")
	}
	h.waitAck(end)
	for _, topic := range []string{"orders", "payments"} {
		if got := ids(h.mem.Rows(topic)); !slices.Equal(got, h.src.sent[topic]) {
			t.Fatalf("%s: %d rows %q, want %q", topic, len(got), got, h.src.sent[topic])
		}
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// A failing commit ends the session with its error at once; nothing past
// the last durable batch is acknowledged; the relay reports not ready.
func TestCommitFailureEndsTheSession(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, nil)
	_, end := h.src.tx("orders")
	h.waitAck(end)
	boom := errors.New("store unavailable")
	mem.BeforeCommit = func(context.Context, string, int64) error { return boom }
	h.src.tx("orders")
	h.src.tx("payments")
	err := h.ended(3 * time.Second)
	if !errors.Is(err, boom) {
		t.Fatalf("session ended with %v, want the commit error", err)
	}
	if !retryable(err) {
		t.Fatal("a store error must be retried by a new session")
	}
	if got := h.conn.ack(); got != end {
		t.Fatalf("acknowledged %s after the failure, want %s (the last durable batch)", got, end)
	}
	h.r.health.setStreaming(false) // as Run does when the session ends
	if ok, _ := h.r.Ready(); ok {
		t.Fatal("ready after a failed session")
	}
}

// A commit that hangs (a store that never answers) does not block a stop:
// past the shutdown timeout the session ends and nothing is acknowledged.
func TestHungCommitDoesNotBlockStop(t *testing.T) {
	mem := sinktest.NewMemory()
	mem.BeforeCommit = func(ctx context.Context, _ string, _ int64) error {
		<-ctx.Done()
		return ctx.Err()
	}
	h := newHarness(t, mem, 0x1000, func(c *Config) { c.ShutdownTimeout = 300 * time.Millisecond })
	h.src.tx("orders")
	time.Sleep(100 * time.Millisecond) // the batch is in the committer now
	began := time.Now()
	h.stop()
	err := h.ended(3 * time.Second)
	if err == nil {
		t.Fatal("a stop with a hung commit reported success")
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("stop took %s with a 300ms shutdown timeout", took)
	}
	if got := h.conn.ack(); got > 0x1000 {
		t.Fatalf("acknowledged %s, nothing was committed", got)
	}
}

// Readiness turns false when events are pending and no commit succeeds.
func TestNotReadyWhileCommitsStall(t *testing.T) {
	mem, release := blockedCommits()
	h := newHarness(t, mem, 0x1000, func(c *Config) { c.ReadyStall = 200 * time.Millisecond })
	if ok, why := h.r.Ready(); !ok {
		t.Fatalf("not ready while idle: %s", why)
	}
	_, end := h.src.tx("orders")
	deadline := time.Now().Add(3 * time.Second)
	for {
		if ok, _ := h.r.Ready(); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still ready with a commit stalled for seconds")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	h.waitAck(end)
	time.Sleep(50 * time.Millisecond)
	if ok, why := h.r.Ready(); !ok {
		t.Fatalf("not ready after the commit went through: %s", why)
	}
}

// A sink that already holds the batch's position (a zombie wrote it) stops
// the relay: fatal, not retried.
func TestFencedCommitIsFatal(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, nil)
	mem.BeforeCommit = func(context.Context, string, int64) error { return sink.ErrFenced }
	h.src.tx("orders")
	err := h.ended(3 * time.Second)
	if !errors.Is(err, sink.ErrFenced) || retryable(err) {
		t.Fatalf("session ended with %v (retryable=%v), want a fatal ErrFenced", err, retryable(err))
	}
}

// On replay, each topic skips the transactions at or below its position.
func TestReplaySkipsWhatTheTopicHolds(t *testing.T) {
	mem := sinktest.NewMemory()
	first := newHarness(t, mem, 0x1000, nil)
	c1, _ := first.src.tx("orders", "payments")
	c2, e2 := first.src.tx("orders")
	first.waitAck(e2)
	first.stop()
	if err := first.ended(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL resends from an older position: both transactions again,
	// then a new one.
	h := newHarness(t, mem, 0x1000, nil)
	h.src.tx("orders", "payments")
	h.src.tx("orders")
	_, e3 := h.src.tx("orders")
	h.waitAck(e3)
	rows := mem.Rows("orders")
	if len(rows) != 3 || rows[0].CommitLSN != int64(c1) || rows[1].CommitLSN != int64(c2) {
		t.Fatalf("orders after replay: %+v, want 3 rows, no duplicate", rows)
	}
	if n := len(mem.Rows("payments")); n != 1 {
		t.Fatalf("payments after replay: %d rows, want 1", n)
	}
}

// A pause watermark nobody asked for (no intent in the store) is ignored:
// the topic keeps streaming and the slot is not held.
func TestForgedWatermarkIsIgnored(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, nil)
	wm := catalog.Watermark{Op: catalog.WatermarkPause, ID: catalog.NewID(), Topic: "orders", AppID: h.r.AppID()}
	h.src.message(catalog.WatermarkPrefix, wm.Encode())
	h.src.message(catalog.WatermarkPrefix, `{"op":"pause","topic":"orders","password":"hunter2"}`)
	_, end := h.src.tx("orders")
	h.waitAck(end)
	if len(h.mem.Rows("orders")) != 1 || len(h.src.sent["orders"]) != 1 {
		t.Fatalf("orders: %d rows after a forged pause, want 1", len(h.mem.Rows("orders")))
	}
	if st, _, _ := catalog.ReadRebuildState(context.Background(), h.store, h.r.AppID(), "orders"); st.Paused != "" {
		t.Fatalf("state after a forged pause: %+v", st)
	}
}

// A pause with its intent holds the topic: its later events are dropped
// and the acknowledged position stays at the watermark, while other topics
// go on.
func TestPauseWithIntentHoldsTheTopic(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, nil)
	_, e1 := h.src.tx("orders")
	h.waitAck(e1)
	id := catalog.NewID()
	in := catalog.Intent{ID: id, Topic: "orders", AppID: h.r.AppID(), Kind: catalog.IntentRebuild}
	if err := catalog.WriteIntent(context.Background(), h.store, in); err != nil {
		t.Fatal(err)
	}
	at := h.src.message(catalog.WatermarkPrefix, catalog.Watermark{Op: catalog.WatermarkPause, ID: id, Topic: "orders", AppID: h.r.AppID()}.Encode())
	h.src.tx("orders", "payments")
	_, end := h.src.tx("payments")
	deadline := time.Now().Add(5 * time.Second)
	for len(h.mem.Rows("payments")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("payments stopped streaming while orders is paused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(h.mem.Rows("orders")); n != 1 {
		t.Fatalf("orders has %d rows while paused, want 1", n)
	}
	if got := h.conn.ack(); got > at || got >= end {
		t.Fatalf("acknowledged %s past the pause at %s", got, at)
	}
	st, _, _ := catalog.ReadRebuildState(context.Background(), h.store, h.r.AppID(), "orders")
	if st.Paused != id || st.PausedAtLSN() != at {
		t.Fatalf("state %+v, want paused %s at %s", st, id, at)
	}
}

// A table deleted under the relay: the commit fails (the sink refuses to
// write a log without its beginning), the session ends, and the next one
// holds the topic while the others stream.
func TestDeletedTableIsHeldNotRecreated(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, nil)
	_, e1 := h.src.tx("orders", "payments")
	h.waitAck(e1)
	mem.Delete("orders")
	h.src.tx("orders")
	if err := h.ended(3 * time.Second); !errors.Is(err, sink.ErrTableGone) || !retryable(err) {
		t.Fatalf("session ended with %v, want a retryable ErrTableGone", err)
	}
	next := newHarness(t, mem, e1, nil)
	next.src.lsn = h.src.lsn
	c2, _ := next.src.tx("orders")
	_, e3 := next.src.tx("payments")
	deadline := time.Now().Add(5 * time.Second)
	for len(mem.Rows("payments")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("payments did not stream while orders is held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if rows := mem.Rows("orders"); len(rows) != 0 {
		t.Fatalf("the deleted table was recreated with %d rows", len(rows))
	}
	if got := next.conn.ack(); got >= e3 || got > c2 {
		t.Fatalf("acknowledged %s past the hold at %s", got, c2)
	}
	st, _, _ := catalog.ReadRebuildState(context.Background(), next.store, next.r.AppID(), "orders")
	if st.Paused != "" {
		// The second harness has its own store; the hold is recorded there.
		t.Logf("state: %+v", st)
	}
}

// A message outside any transaction (the heartbeat) moves the acknowledged
// position when nothing is pending, so an idle database's slot advances.
func TestHeartbeatAdvancesAnIdleSlot(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, nil)
	_, end := h.src.tx("orders")
	h.waitAck(end)
	h.src.lsn += 0x10000 // other databases wrote WAL meanwhile
	at := h.src.send(pg.Message(false, h.src.lsn+0x100, HeartbeatPrefix, nil))
	h.waitAck(at)
}

// A commit is acknowledged as soon as it is durable, not at the next
// status interval: the server frees its WAL, and sees the slot caught up,
// within milliseconds of the commit.
func TestAcknowledgedOnceDurable(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, func(c *Config) { c.StatusInterval = time.Minute })
	for range 3 {
		_, end := h.src.tx("orders")
		start := time.Now()
		h.waitAck(end)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("acknowledged %s after the commit, with a 1 min status interval", d)
		}
	}
}

// Reading a backlog (transactions committed long ago), the relay makes
// large batches while the stream flows and commits the last one once the
// stream goes quiet, not a second after the batch opened.
func TestBacklogBatchedThenCommittedOnceQuiet(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, func(c *Config) { c.StatusInterval = time.Minute })
	h.src.committedAt = time.Now().Add(-time.Minute)
	var end pglogrepl.LSN
	for range 40 { // 200 ms of a flowing backlog, a transaction every 5 ms (the batch delay)
		_, end = h.src.tx("orders")
		time.Sleep(5 * time.Millisecond)
	}
	quiet := time.Now()
	h.waitAck(end)
	if d := time.Since(quiet); d > catchUpDelay/2 {
		t.Errorf("the backlog's last batch was acknowledged %s after the stream went quiet", d)
	}
	if n := mem.Commits(); n > 4 {
		t.Errorf("%d commits for 40 transactions of a flowing backlog; want a few large batches", n)
	}
	if got := len(mem.Rows("orders")); got != 40 {
		t.Errorf("orders holds %d events, want 40", got)
	}
}

// A keepalive says the walsender has caught up: a backlog's batch is
// committed at once, and once everything is durable the slot moves to the
// keepalive's WAL end even though the keepalive came while the batch was
// still open.
func TestKeepaliveEndsABacklogBatch(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, func(c *Config) { c.StatusInterval = time.Minute })
	h.src.committedAt = time.Now().Add(-time.Minute)
	_, end := h.src.tx("orders")
	walEnd := end + 0x1000 // WAL of other databases after the last transaction
	sent := time.Now()
	h.conn.frames <- pg.Keepalive(walEnd, false)
	h.waitAck(walEnd)
	if d := time.Since(sent); d > quietAfter {
		t.Errorf("acknowledged %s after a keepalive that found the walsender caught up; want at once", d)
	}
}

// A graceful stop wakes the receive loop: an idle session ends at once,
// not at its next wake-up (here a minute away).
func TestStopDoesNotWaitForTheWakeUp(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x1000, func(c *Config) { c.StatusInterval = time.Minute })
	_, end := h.src.tx("orders")
	h.waitAck(end)
	time.Sleep(10 * time.Millisecond) // the loop is waiting
	h.stop()
	if err := h.ended(time.Second); err != nil {
		t.Fatal(err)
	}
}

// With StopAt the session ends by itself once it has received everything
// before it: the transactions are committed, the acknowledgement reaches
// StopAt (through the last commit, or a keepalive's WAL end when the
// walsender caught up before it), and serve returns nil.
func TestStopAtCommitsWhatCameBeforeThenEnds(t *testing.T) {
	const stopAt = pglogrepl.LSN(0x3000)
	for _, tc := range []struct {
		name string
		feed func(*source)
	}{
		{"past it in a transaction", func(s *source) {
			for s.lsn < stopAt {
				s.tx("orders", "payments")
			}
		}},
		{"by a keepalive", func(s *source) {
			s.tx("orders")
			s.c.frames <- pg.Keepalive(stopAt+0x800, false)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, sinktest.NewMemory(), 0x1000, func(c *Config) {
				c.StopAt, c.StatusInterval = stopAt, time.Minute
			})
			tc.feed(h.src)
			if err := h.ended(3 * time.Second); err != nil {
				t.Fatalf("serve: %v", err)
			}
			for topic, want := range h.src.sent {
				if got := ids(h.mem.Rows(topic)); !slices.Equal(got, want) {
					t.Errorf("%s: %d rows %q, want %q", topic, len(got), got, want)
				}
			}
			if got := h.conn.ack(); got < stopAt {
				t.Errorf("acknowledged %s, want at least %s", got, stopAt)
			}
		})
	}
}

// A pgoutput message's XLogData starts at a WAL position, but its length is
// not WAL: a commit whose message would reach past StopAt, while its WAL
// ends before it, does not stop the session; the keepalive that says the
// server sent everything before StopAt does, and the slot confirms it.
func TestStopAtIsNotReachedByAMessagesLength(t *testing.T) {
	const stopAt = pglogrepl.LSN(0x1412) // two bytes past the first transaction's end
	h := newHarness(t, sinktest.NewMemory(), 0x1000, func(c *Config) {
		c.StopAt, c.StatusInterval = stopAt, time.Minute
	})
	if _, end := h.src.tx("orders"); end+2 != stopAt {
		t.Fatalf("the scripted transaction ends at %s: fix stopAt", end)
	}
	select {
	case err := <-h.errc:
		t.Fatalf("the session ended before the server said it sent everything before %s (err %v); acknowledged %s", stopAt, err, h.conn.ack())
	case <-time.After(300 * time.Millisecond):
	}
	h.src.c.frames <- pg.Keepalive(stopAt+0x800, false)
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if got := ids(h.mem.Rows("orders")); len(got) != 1 {
		t.Errorf("orders has %q, want the one event", got)
	}
	if got := h.conn.ack(); got < stopAt {
		t.Errorf("acknowledged %s, want at least %s", got, stopAt)
	}
}

// A StopAt the slot's position has passed already ends the session at once.
func TestStopAtBehindTheStartEndsAtOnce(t *testing.T) {
	h := newHarness(t, sinktest.NewMemory(), 0x5000, func(c *Config) { c.StopAt = 0x4000 })
	if err := h.ended(time.Second); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if got := h.conn.ack(); got != 0x5000 {
		t.Errorf("acknowledged %s, want the start 0/5000", got)
	}
}

// While the last commit before a stop is in progress, the session keeps
// sending status updates: a commit of thousands of new tables outlasted
// wal_sender_timeout, the walsender closed the connection and the final
// acknowledgement was lost (relay bench --only memory, 10,000 topics).
func TestStopAtKeepsAcknowledgingDuringTheLastCommit(t *testing.T) {
	const stopAt = pglogrepl.LSN(0x2000)
	mem, release := blockedCommits()
	h := newHarness(t, mem, 0x1000, func(c *Config) { c.StopAt, c.StatusInterval = stopAt, 20*time.Millisecond })
	for h.src.lsn < stopAt {
		h.src.tx("orders")
	}
	time.Sleep(150 * time.Millisecond) // received to StopAt; the commit waits for release
	h.conn.mu.Lock()
	before := h.conn.acks
	h.conn.mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	h.conn.mu.Lock()
	during := h.conn.acks - before
	h.conn.mu.Unlock()
	close(release)
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if during < 3 {
		t.Errorf("%d status updates in 300ms of a commit in progress (status interval 20ms), want several", during)
	}
	if got := h.conn.ack(); got < stopAt {
		t.Errorf("acknowledged %s, want at least %s", got, stopAt)
	}
}

// blockedCommits returns a memory sink whose commits wait until release is
// closed (or their context ends).
func blockedCommits() (*sinktest.Memory, chan struct{}) {
	mem := sinktest.NewMemory()
	release := make(chan struct{})
	mem.BeforeCommit = func(ctx context.Context, _ string, _ int64) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return mem, release
}
