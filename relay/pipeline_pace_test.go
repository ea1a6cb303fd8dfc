package relay

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/sinktest"
)

// commitLog records when each topic commit happened.
type commitLog struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (l *commitLog) hook(_ context.Context, topic string, _ int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at[topic] = append(l.at[topic], time.Now())
	return nil
}

func (l *commitLog) times(topic string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.at[topic])
}

func paced(interval time.Duration) func(*Config) {
	return func(c *Config) { c.TopicCommitInterval = interval }
}

// A busy topic commits at most once per interval, every event once and in
// order; the acknowledgement follows.
func TestPacedTopicCommitsAtMostOncePerInterval(t *testing.T) {
	const interval = 150 * time.Millisecond
	mem, log := sinktest.NewMemory(), &commitLog{at: map[string][]time.Time{}}
	mem.BeforeCommit = log.hook
	h := newHarness(t, mem, 0x1000, paced(interval))
	var end = h.src.lsn
	began := time.Now()
	for range 60 {
		_, end = h.src.tx("orders")
		time.Sleep(10 * time.Millisecond)
	}
	h.waitAck(end)
	took := time.Since(began) // ~0.6 s, longer on a loaded machine
	if got := ids(mem.Rows("orders")); !slices.Equal(got, h.src.sent["orders"]) {
		t.Fatalf("orders: %d rows, want %d in order", len(got), len(h.src.sent["orders"]))
	}
	at := log.times("orders")
	for i := 1; i < len(at); i++ {
		// Handoffs are paced; commits follow them with scheduling jitter.
		if gap := at[i].Sub(at[i-1]); gap < interval/2 {
			t.Fatalf("commits %d and %d of orders %v apart, want at least %v", i-1, i, gap, interval)
		}
	}
	if limit := int(took/interval) + 4; len(at) > limit {
		t.Fatalf("%d commits of a topic over %v at a %v interval, want at most %d", len(at), took, interval, limit)
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A topic quiet for an interval commits at once, as without pacing.
func TestPacedQuietTopicCommitsAtOnce(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, paced(time.Hour))
	sent := time.Now()
	_, end := h.src.tx("orders")
	h.waitAck(end)
	if took := time.Since(sent); took > 500*time.Millisecond {
		t.Fatalf("first event of a quiet topic committed after %v", took)
	}
	_, end = h.src.tx("payments") // another topic is not held back by orders' pace
	h.waitAck(end)
}

// Carried rows hold the acknowledgement: while a paced topic's rows wait,
// other topics commit, but the relay acknowledges nothing past the
// position before the first waiting transaction. A restart from there
// re-reads them (each topic skips what it holds).
func TestPacedTopicHoldsTheAcknowledgement(t *testing.T) {
	const interval = 700 * time.Millisecond
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, paced(interval))
	_, end1 := h.src.tx("orders")
	h.waitAck(end1) // orders committed: its next commit waits an interval
	h.src.tx("orders")
	_, end3 := h.src.tx("payments")
	deadline := time.Now().Add(2 * time.Second)
	for len(mem.Rows("payments")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("payments not committed while orders waits")
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // status updates go out every 20 ms
	if n := len(mem.Rows("orders")); n != 1 {
		t.Fatalf("orders has %d rows before its interval ended, want 1", n)
	}
	if got := h.conn.ack(); got != end1 {
		t.Fatalf("acknowledged %s while orders' second event waits, want %s (before it)", got, end1)
	}
	h.waitAck(end3)
	if got := ids(mem.Rows("orders")); !slices.Equal(got, h.src.sent["orders"]) {
		t.Fatalf("orders rows %q, want %q", got, h.src.sent["orders"])
	}
}

// A graceful stop commits carried rows at once.
func TestPacedRowsCommittedOnStop(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, paced(time.Hour))
	_, end := h.src.tx("orders")
	h.waitAck(end)
	_, end = h.src.tx("orders")
	time.Sleep(50 * time.Millisecond)
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := h.conn.ack(); got != end {
		t.Fatalf("acknowledged %s after the stop, want %s", got, end)
	}
	if got := ids(mem.Rows("orders")); !slices.Equal(got, h.src.sent["orders"]) {
		t.Fatalf("orders rows %q, want %q", got, h.src.sent["orders"])
	}
}

// A full batch commits every topic, paced or not: memory stays bounded.
func TestPacedFullBatchCommitsEverything(t *testing.T) {
	mem := sinktest.NewMemory()
	h := newHarness(t, mem, 0x1000, func(c *Config) { c.TopicCommitInterval = time.Hour; c.BatchMaxEvents = 10 })
	_, end := h.src.tx("orders")
	h.waitAck(end)
	for range 30 {
		h.src.tx("orders")
	}
	// Full batches are committed despite the hour-long interval; a last
	// partial one may wait.
	deadline := time.Now().Add(5 * time.Second)
	for len(mem.Rows("orders")) < 21 {
		if time.Now().After(deadline) {
			t.Fatalf("orders has %d rows, want the full batches (at least 21 of 31) committed", len(mem.Rows("orders")))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
