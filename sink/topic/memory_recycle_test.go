package topic

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
)

// The relay fills the next batch's writers while the previous batch's
// topics close, and the row-buffer free list hands the buffers a closing
// topic grew (restoring its staged rows) to the new writers: BoundPending
// must count what they hold by capacity, or 1,000 small topics each keep a
// large buffer for a few rows (issue 30's shape: 226 MB of a 339 MiB peak).
func TestBoundPendingCountsRecycledBuffers(t *testing.T) {
	st, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const closing, filling, budget = 100, 1000, 4 << 20
	pad := strings.Repeat("x", 1000)
	event := func(i int) *outbox.Event {
		return &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), Topic: "t", Key: "k", Type: "Created",
			SchemaVersion: 1, Payload: pad, OccurredAt: time.Unix(1700000000, 0), CommitLSN: 100, Seq: int32(i), Xid: 7,
			CommitTime: time.Unix(1700000000, 0)}
	}
	writers := func(prefix string, n int) []*FileWriter {
		ws := make([]*FileWriter, n)
		for i := range ws {
			ws[i] = NewFileWriter(storage.Sub(st, fmt.Sprintf("%s%d", prefix, i)), FileOptions{})
		}
		return ws
	}
	bound := func(ws []*FileWriter) {
		if err := BoundPending(budget, func(yield func(*FileWriter) bool) {
			for _, w := range ws {
				if !yield(w) {
					return
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The previous batch: its topics' rows staged under the budget.
	prev := writers("p", closing)
	for i := range closing * 1000 {
		if err := prev[i%closing].Append(event(i)); err != nil {
			t.Fatal(err)
		}
		if i&1023 == 1023 {
			bound(prev)
		}
	}
	// The next batch fills while the previous one closes.
	next := writers("n", filling)
	j, worst := 0, int64(0)
	for _, w := range prev {
		if _, err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if err := next[j%filling].Append(event(j)); err != nil {
				t.Fatal(err)
			}
			j++
			if j&1023 == 1023 {
				bound(next)
				var held int64
				for _, n := range next {
					held += max(capacityOf(n), n.PendingBytes())
				}
				worst = max(worst, held)
			}
		}
	}
	for _, w := range next {
		w.Abort()
	}
	// One writer's rows may pass the budget before BoundPending runs.
	if limit := int64(budget + 2<<20); worst > limit {
		t.Fatalf("the filling writers held %d MiB of buffers, want at most %d MiB (budget %d MiB)", worst>>20, limit>>20, budget>>20)
	}
	t.Logf("filling writers held at most %.1f MiB (budget %d MiB)", float64(worst)/(1<<20), budget>>20)
}

// capacityOf is the capacity of the buffers a writer's pending rows are in.
func capacityOf(w *FileWriter) int64 {
	if w.rows.bufs == nil {
		return 0
	}
	return int64(w.rows.bufs.capBytes())
}
