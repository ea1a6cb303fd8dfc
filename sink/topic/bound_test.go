package topic

import (
	"fmt"
	"testing"

	"github.com/deltabus/deltabus/outbox"
)

// BoundPending walks the writers once per call, however many rounds it
// takes: a batch over 10,000 topics, each round a walk of every writer,
// spent 61% of the relay's CPU in those walks, so long that the walsender
// timed out (relay bench --only memory, issue 30). Every writer over the
// budget is still shrunk, the largest first.
func TestBoundPendingWalksWritersOnce(t *testing.T) {
	const topics = 2000
	st := newLocalStore(t)
	emptyRowBufferPool(t)
	ws := make([]*FileWriter, topics)
	for i := range ws {
		ws[i] = NewFileWriter(st, FileOptions{})
		for n := range 1 + i%3 { // writers of 1, 2 and 3 rows
			e := outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i*10+n), Topic: "t", Key: "k",
				Type: "Created", SchemaVersion: 1, Payload: `{"a":1}`, Seq: int32(n), CommitLSN: 1, Xid: 1, CommitTime: base}
			if err := ws[i].Append(&e); err != nil {
				t.Fatal(err)
			}
		}
	}
	walks := 0
	err := BoundPending(0, func(yield func(*FileWriter) bool) {
		walks++
		for _, w := range ws {
			if !yield(w) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if walks != 1 {
		t.Errorf("BoundPending walked the writers %d times, want once", walks)
	}
	for i, w := range ws {
		if got := w.MemoryBytes(); got != 0 {
			t.Fatalf("writer %d holds %d bytes after BoundPending with a budget of 0, want its rows staged", i, got)
		}
	}
	for _, w := range ws {
		w.Abort()
	}
}
