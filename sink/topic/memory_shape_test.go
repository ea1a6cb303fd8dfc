package topic

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/outbox"
)

// TestBoundPendingCountsPooledCapacity is the relay's shape in small: one
// batch of many topics (1,000 rows of 1.1 KB each, staged by BoundPending)
// is committed topic by topic while the next batch, over many more topics,
// appends. Each commit restores a topic's rows into buffers of about a
// megabyte and releases them to the free list, from which the next batch's
// writers take them for their first row. The live heap must stay at the
// budget, the free list and a commit's buffers, not grow by a released
// set of buffers per committed topic (the relay held 170 of them, 300 MiB).
func TestBoundPendingCountsPooledCapacity(t *testing.T) {
	const (
		topicsA, rowsA = 100, 1000
		topicsB        = 1000
		budget         = 16 << 20
		liveCap        = budget + 8<<20
	)
	st := newLocalStore(t)
	emptyRowBufferPool(t)
	payload := `{"data":"` + strings.Repeat("x", 1050) + `"}`
	ev := func(topic string, n int) outbox.Event {
		return outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Topic: topic, Key: fmt.Sprint("k", n),
			Type: "Created", SchemaVersion: 1, Payload: payload, Seq: int32(n), CommitLSN: 1, Xid: 1, CommitTime: base}
	}
	bound := func(ws map[string]*FileWriter) {
		t.Helper()
		err := BoundPending(budget, func(yield func(*FileWriter) bool) {
			for _, w := range ws {
				if !yield(w) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	a := map[string]*FileWriter{}
	for n := range topicsA * rowsA {
		name := fmt.Sprint("t", n%topicsA)
		w := a[name]
		if w == nil {
			w = NewFileWriter(st, FileOptions{})
			a[name] = w
		}
		e := ev(name, n)
		if err := w.Append(&e); err != nil {
			t.Fatal(err)
		}
		if n%1024 == 1023 {
			bound(a)
		}
	}
	// The batch's rows are out of memory (staged, or encoded in files the
	// store holds), as the relay's committer finds them at worst, so the
	// live heap measures the next batch and the commits.
	if err := BoundPending(0, maps.Values(a)); err != nil {
		t.Fatal(err)
	}
	b := map[string]*FileWriter{}
	var peak uint64
	var ms runtime.MemStats
	n := 0
	for i := range topicsA {
		if _, err := a[fmt.Sprint("t", i)].Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range topicsB / topicsA { // the next batch goes on meanwhile
			name := fmt.Sprint("u", n%topicsB)
			w := b[name]
			if w == nil {
				w = NewFileWriter(st, FileOptions{})
				b[name] = w
			}
			e := ev(name, n)
			if err := w.Append(&e); err != nil {
				t.Fatal(err)
			}
			if n++; n%1024 == 1023 {
				bound(b)
			}
		}
		if i%10 == 9 {
			runtime.GC()
			peak = max(peak, liveOutsidePool(&ms))
		}
	}
	bound(b)
	runtime.GC()
	peak = max(peak, liveOutsidePool(&ms))
	var held, capHeld int64
	for _, w := range b {
		held += w.PendingBytes()
		if w.rows.bufs != nil {
			capHeld += int64(w.rows.bufs.capBytes())
		}
	}
	t.Logf("committed %d topics of %d rows while %d more took %d rows: peak live heap outside the free list %d MiB (budget %d MiB); the next batch's writers hold buffers of %d MiB for %d MiB pending",
		topicsA, rowsA, topicsB, n, peak>>20, budget>>20, capHeld>>20, held>>20)
	if peak > liveCap {
		t.Errorf("peak live heap outside the free list %d MiB, want at most %d MiB", peak>>20, liveCap>>20)
	}
	for _, w := range b {
		w.Abort()
	}
}

// liveOutsidePool reads the live heap (after a GC) less what the free list
// of row buffers holds, which keptBufferBytes bounds on its own.
func liveOutsidePool(ms *runtime.MemStats) uint64 {
	runtime.ReadMemStats(ms)
	rowBufferPool.mu.Lock()
	defer rowBufferPool.mu.Unlock()
	return ms.HeapAlloc - uint64(rowBufferPool.bytes)
}
