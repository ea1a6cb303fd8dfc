package relay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pg "github.com/deltabus/deltabus/decoding/pgoutputtest"
	"github.com/deltabus/deltabus/sink/sinktest"
)

func TestStreamTimeoutDerivation(t *testing.T) {
	for _, tc := range []struct {
		cfg       time.Duration
		walSender time.Duration
		want      time.Duration
	}{
		{0, time.Minute, time.Minute}, // 2 × the walsender's keepalive interval
		{0, 5 * time.Minute, 5 * time.Minute},
		{0, 2 * time.Second, 10 * time.Second}, // the floor
		{0, 0, time.Minute},                    // disabled at the server: assumed 60 s
		{3 * time.Second, time.Minute, 3 * time.Second},
	} {
		if got := streamTimeout(Config{StreamTimeout: tc.cfg}, tc.walSender); got != tc.want {
			t.Errorf("StreamTimeout %v, wal_sender_timeout %v: %v, want %v", tc.cfg, tc.walSender, got, tc.want)
		}
	}
	if err := (Config{Source: "postgres://u@h/db", Store: "file:///x", StreamTimeout: -time.Second}).WithDefaults().Validate(); err == nil ||
		!strings.Contains(err.Error(), "--stream-timeout") {
		t.Errorf("a negative stream timeout: %v", err)
	}
}

func liveConfig(limit time.Duration) func(*Config) {
	return func(c *Config) { c.StreamTimeout = limit }
}

// TestSilentStreamEndsTheSession: a server that stops sending, and does
// not answer the session's requests for a reply, ends the session after
// the stream timeout with a StreamTimeoutError that a new session retries;
// /readyz turns false once the silence passes the bound.
func TestSilentStreamEndsTheSession(t *testing.T) {
	const limit = 400 * time.Millisecond
	h := newHarness(t, sinktest.NewMemory(), 0x1000, liveConfig(limit))
	_, end := h.src.tx("orders")
	h.waitAck(end)
	began := time.Now()
	err := h.ended(5 * time.Second)
	took := time.Since(began)
	var st *StreamTimeoutError
	if !errors.As(err, &st) || st.Limit != limit {
		t.Fatalf("session ended with %v, want a StreamTimeoutError of %v", err, limit)
	}
	if took < limit-50*time.Millisecond || took > limit+time.Second {
		t.Fatalf("ended %s after the last message, want about %s", took, limit)
	}
	if !retryable(err) {
		t.Fatal("a dead stream must be retried by a new session")
	}
	h.conn.mu.Lock()
	asked := h.conn.asked
	h.conn.mu.Unlock()
	if asked == 0 {
		t.Fatal("the session declared the stream dead without asking the server for a reply")
	}
	if ok, why := h.r.Ready(); ok || !strings.Contains(why, "no message from PostgreSQL") {
		t.Fatalf("ready=%v (%s) with the stream silent past its timeout", ok, why)
	}
}

// TestIdleStreamThatAnswersStaysUp: an idle server that sends nothing of
// its own but answers every request for a reply keeps the session for
// many stream timeouts, ready all along.
func TestIdleStreamThatAnswersStaysUp(t *testing.T) {
	const limit = 300 * time.Millisecond
	h := newHarness(t, sinktest.NewMemory(), 0x1000, liveConfig(limit))
	h.conn.mu.Lock()
	h.conn.answer = func() { h.conn.frames <- pg.Keepalive(h.src.lsn, false) }
	h.conn.mu.Unlock()
	deadline := time.Now().Add(7 * limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-h.errc:
			t.Fatalf("an idle stream that answers ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if ok, why := h.r.Ready(); !ok {
			t.Fatalf("not ready on an idle, answering stream: %s", why)
		}
	}
	h.conn.mu.Lock()
	asked := h.conn.asked
	h.conn.mu.Unlock()
	if asked < 3 {
		t.Fatalf("asked for a reply %d times in 7 stream timeouts of silence, want one per silence", asked)
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// TestSlowCommitIsNotSilence: while the session waits for a commit longer
// than the stream timeout, the server's messages queue on the connection;
// they are read once the commit ends, and the session is not declared
// dead for the time it did not listen.
func TestSlowCommitIsNotSilence(t *testing.T) {
	const limit = 300 * time.Millisecond
	mem := sinktest.NewMemory()
	var slow atomic.Bool
	mem.BeforeCommit = func(ctx context.Context, _ string, _ int64) error {
		if slow.CompareAndSwap(true, false) { // one commit takes 3 stream timeouts
			select {
			case <-time.After(3 * limit):
			case <-ctx.Done():
			}
		}
		return nil
	}
	h := newHarness(t, mem, 0x1000, func(c *Config) { c.StreamTimeout = limit; c.BatchMaxEvents = 1 })
	_, end := h.src.tx("orders")
	h.waitAck(end)
	slow.Store(true)
	for range 8 { // past 4 × BatchMaxEvents: the session waits for the committer
		_, end = h.src.tx("orders")
	}
	// The server keeps talking while the session waits.
	talk := make(chan struct{})
	go func() {
		defer close(talk)
		for range 12 {
			h.conn.frames <- pg.Keepalive(end, false)
			time.Sleep(limit / 4)
		}
	}()
	h.waitAck(end)
	<-talk
	select {
	case err := <-h.errc:
		t.Fatalf("the session ended: %v", err)
	default:
	}
	if slow.Load() {
		t.Fatal("no commit was slow: the test proves nothing")
	}
	if got := ids(mem.Rows("orders")); !slices.Equal(got, h.src.sent["orders"]) {
		t.Fatalf("orders: %q, want %q", got, h.src.sent["orders"])
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

func TestHealthSilencePastTheBound(t *testing.T) {
	var h health
	h.stall = time.Hour
	now := time.Now()
	h.setStreaming(true)
	h.heardFrom(now.Add(-5*time.Second), 10*time.Second)
	if ok, why := h.ready(now); !ok {
		t.Fatalf("silent for 5s of 10: not ready: %s", why)
	}
	h.heardFrom(now.Add(-11*time.Second), 10*time.Second)
	if ok, why := h.ready(now); ok || !strings.Contains(why, "stream timeout 10s") {
		t.Fatalf("silent for 11s of 10: ready=%v (%s)", ok, why)
	}
}
