package relay

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/sink/sinktest"
)

// pipelined starts a group-commit harness (no batch delay; the stages
// overlapping or not) whose first topic commit blocks until release says
// how it ends, and whose Prepares are reported on prepared.
func pipelined(t *testing.T, overlap bool) (h *harness, first chan struct{}, release chan error, prepared chan pglogrepl.LSN) {
	mem := sinktest.NewMemory()
	first, release = make(chan struct{}), make(chan error, 1)
	prepared = make(chan pglogrepl.LSN, 16)
	calls := 0
	mem.BeforeCommit = func(ctx context.Context, _ string, _ int64) error {
		calls++ // the log stage is one goroutine, and one topic per batch here
		if calls > 1 {
			return nil
		}
		close(first)
		select {
		case err := <-release:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	mem.BeforePrepare = func(context.Context, string) error {
		prepared <- 0
		return nil
	}
	h = newHarness(t, mem, 0x1000, func(c *Config) { c.BatchMaxDelay, c.CommitOverlap = 0, overlap })
	return h, first, release, prepared
}

// waitPrepared waits for n Prepares.
func waitPrepared(t *testing.T, prepared chan pglogrepl.LSN, n int) {
	t.Helper()
	for range n {
		select {
		case <-prepared:
		case <-time.After(5 * time.Second):
			t.Fatal("the next batch's files were not written while the previous batch committed")
		}
	}
}

// Group commit: with no batch delay, the next batch closes while the
// previous one commits and its files are written at once (pipelined), but
// its commit waits until the previous batch is durable: both land in
// order and the acknowledgement follows.
func TestPipelinedBatchCommitsAfterThePrevious(t *testing.T) {
	h, first, release, prepared := pipelined(t, true)
	h.src.tx("orders")
	<-first // batch 1 is in its log stage
	waitPrepared(t, prepared, 1)
	_, end := h.src.tx("orders")
	waitPrepared(t, prepared, 1) // batch 2's files, while batch 1 commits
	if n := len(h.mem.Rows("orders")); n != 0 {
		t.Fatalf("%d rows visible before the first commit returned", n)
	}
	if got := h.conn.ack(); got >= end {
		t.Fatalf("acknowledged %s before batch 1 was durable", got)
	}
	release <- nil
	h.waitAck(end)
	h.inOrderThenStopped()
}

// When the previous batch's commit fails, the pipelined batch whose files
// are already written is never committed and nothing is acknowledged.
func TestPipelinedBatchIsAbortedWhenThePreviousFails(t *testing.T) {
	h, first, release, prepared := pipelined(t, true)
	h.src.tx("orders")
	<-first
	waitPrepared(t, prepared, 1)
	h.src.tx("orders")
	waitPrepared(t, prepared, 1)
	boom := errors.New("store unavailable")
	release <- boom
	if err := h.ended(3 * time.Second); !errors.Is(err, boom) {
		t.Fatalf("session ended with %v, want the commit error", err)
	}
	if n := len(h.mem.Rows("orders")); n != 0 {
		t.Fatalf("%d rows committed after the first batch failed, want 0", n)
	}
	if got := h.conn.ack(); got > 0x1000 {
		t.Fatalf("acknowledged %s, want nothing past the start 0/1000", got)
	}
}

// By default the stages do not overlap: while batch 1's log entries are
// being made durable, batch 2 (already received) has no files written;
// once batch 1 is durable, batch 2 is written and committed after it, in
// order.
func TestSerialStagesWriteTheNextBatchAfterThePrevious(t *testing.T) {
	h, first, release, prepared := pipelined(t, false)
	h.src.tx("orders")
	<-first
	waitPrepared(t, prepared, 1)
	_, end := h.src.tx("orders")
	select {
	case <-prepared:
		t.Fatal("batch 2's files were written while batch 1 committed")
	case <-time.After(300 * time.Millisecond):
	}
	release <- nil
	waitPrepared(t, prepared, 1)
	h.waitAck(end)
	h.inOrderThenStopped()
}

// inOrderThenStopped requires the topic's rows to be what was sent, in
// order, and a graceful stop.
func (h *harness) inOrderThenStopped() {
	h.t.Helper()
	if got := ids(h.mem.Rows("orders")); !slices.Equal(got, h.src.sent["orders"]) {
		h.t.Fatalf("rows %q, want %q", got, h.src.sent["orders"])
	}
	h.stop()
	if err := h.ended(3 * time.Second); err != nil {
		h.t.Fatalf("graceful stop: %v", err)
	}
}
