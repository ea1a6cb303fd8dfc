package topic

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/deltabus/deltabus/outbox"
)

// TestBoundedMemory streams one large batch (60,000 events, ~65 MB of
// barely compressible payload, as one source transaction) through one
// FileWriter. The memory it retains (live heap after a GC, sampled while
// appending) must stay at a few row groups, independent of the batch size;
// files must be cut at MaxFileBytes; every row must come back in order.
func TestBoundedMemory(t *testing.T) {
	const (
		n         = 60_000
		liveCap   = 12 << 20
		rowGroup  = 2 << 20
		fileBytes = 4 << 20
	)
	st := newLocalStore(t)
	emptyRowBufferPool(t)
	w := NewFileWriter(st, FileOptions{RowGroupBytes: rowGroup, MaxFileBytes: fileBytes, MemoryBuffer: 512 << 10})
	rnd := rand.NewChaCha8([32]byte{1})
	raw := make([]byte, 512)
	ev := outbox.Event{Topic: "big", Key: "k", Type: "T", SchemaVersion: 1, Xid: 1, CommitLSN: 42, CommitTime: base}
	var ms runtime.MemStats
	var peak uint64
	for i := range n {
		_, _ = rnd.Read(raw)
		ev.ID = hex.EncodeToString(raw[:16])
		ev.Payload = `{"blob":"` + hex.EncodeToString(raw) + `"}`
		ev.Seq = int32(i)
		ev.OccurredAt = base.Add(time.Duration(i) * time.Microsecond)
		if err := w.Append(&ev); err != nil {
			t.Fatal(err)
		}
		if i%4999 == 0 {
			// Two GCs: the first only moves arrow-go's pooled zstd
			// encoders (a sync.Pool, bounded by concurrency, not by
			// data) to the victim cache.
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	rawBytes := w.Bytes()
	adds, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows, %d MiB raw, %d files, peak live heap %d MiB", n, rawBytes>>20, len(adds), peak>>20)
	if rawBytes < n*1000 {
		t.Fatalf("Bytes() = %d, want > %d", rawBytes, n*1000)
	}
	if peak > liveCap {
		t.Errorf("peak live heap %d MiB while appending %d MiB, want < %d MiB", peak>>20, rawBytes>>20, liveCap>>20)
	}
	if len(adds) < 5 {
		t.Errorf("%d files, want the batch split into files of ~%d MiB", len(adds), fileBytes>>20)
	}
	next := int32(0)
	for i, a := range adds {
		// A file is cut after the row group that reaches MaxFileBytes, so
		// it is at least that large (but the last) and at most one row group more.
		if (i < len(adds)-1 && a.Size < fileBytes) || a.Size > fileBytes+rowGroup {
			t.Errorf("file %d of %d is %d bytes, want [%d, %d]", i, len(adds), a.Size, fileBytes, fileBytes+rowGroup)
		}
		err := ReadEventIDs(context.Background(), st, a, func(r EventRef) error {
			if r.Seq != next {
				t.Fatalf("row seq %d, want %d", r.Seq, next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if next != n {
		t.Errorf("read back %d rows, want %d", next, n)
	}
}

// TestCompactBoundedMemory compacts 80 files (~120 MB of barely
// compressible 1 KB rows) into files of 16 MiB. The live heap, sampled
// while it runs, must stay at an input file, a decoded batch, a row group
// and the parquet writer's buffers (about 30 MiB for these rows, measured
// 26-29 MiB for 20 files and 31-37 MiB for 80), not grow with the table.
func TestCompactBoundedMemory(t *testing.T) {
	const files, liveCap = 80, 48 << 20
	st, tbl := openTopic(t, newLocalStore(t), "big")
	rnd := rand.NewChaCha8([32]byte{2})
	raw := make([]byte, 512)
	var total int64
	for f := range files {
		evs := make([]outbox.Event, 1500)
		for i := range evs {
			_, _ = rnd.Read(raw)
			evs[i] = outbox.Event{ID: hex.EncodeToString(raw[:16]), Topic: "big", Key: "k", Type: "T", SchemaVersion: 1,
				Payload: `{"blob":"` + hex.EncodeToString(raw) + `"}`, CommitLSN: int64(100 + f), Seq: int32(i), Xid: 1, CommitTime: base}
		}
		if err := relayCommit(t, st, tbl, FileOptions{}, evs); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range tbl.Files() {
		total += a.Size
	}
	emptyRowBufferPool(t)
	done := make(chan struct{})
	peakCh := make(chan uint64)
	go func() {
		// The live heap the last GC marked: garbage allocated while a
		// concurrent GC runs does not count.
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		for {
			select {
			case <-done:
				peakCh <- peak
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.GC()
			metrics.Read(live)
			peak = max(peak, live[0].Value.Uint64())
		}
	}()
	res, err := Compact(t.Context(), st, CompactOptions{TargetFileBytes: 16 << 20, RowGroupRows: 2000})
	close(done)
	peak := <-peakCh
	if err != nil || res.FilesRemoved != files || res.Rows != files*1500 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	t.Logf("compacted %d MiB in %d files into %d files, peak live heap %d MiB", total>>20, res.FilesRemoved, res.FilesAdded, peak>>20)
	if peak > liveCap {
		t.Errorf("peak live heap %d MiB while compacting %d MiB, want < %d MiB", peak>>20, total>>20, liveCap>>20)
	}
}

// TestBoundPendingSpillsEncodedFiles: encoded files held in memory count
// against the budget like pending rows; BoundPending writes the largest to
// the store, and every row still comes back in order after Close.
func TestBoundPendingSpillsEncodedFiles(t *testing.T) {
	const writers, rows, budget = 40, 300, 1 << 20
	st := newLocalStore(t)
	rnd := rand.NewChaCha8([32]byte{4})
	raw := make([]byte, 256)
	ws := make([]*FileWriter, writers)
	for i := range ws {
		ws[i] = NewFileWriter(st, FileOptions{})
		for j := range rows {
			_, _ = rnd.Read(raw)
			ev := outbox.Event{ID: hex.EncodeToString(raw[:16]), Topic: "t", Key: "k", Type: "T", SchemaVersion: 1,
				Payload: `{"blob":"` + hex.EncodeToString(raw) + `"}`, Seq: int32(j), CommitLSN: 1, CommitTime: base, OccurredAt: base}
			if err := ws[i].Append(&ev); err != nil {
				t.Fatal(err)
			}
		}
		if err := ws[i].FlushRowGroup(); err != nil { // encoded, in memory
			t.Fatal(err)
		}
	}
	total := func() (n int64) {
		for _, w := range ws {
			n += w.MemoryBytes()
		}
		return n
	}
	before := total()
	if before <= budget {
		t.Fatalf("the writers hold %d bytes, want more than the %d budget for the test to mean anything", before, budget)
	}
	if err := BoundPending(budget, slices.Values(ws)); err != nil {
		t.Fatal(err)
	}
	if after := total(); after > budget {
		t.Fatalf("writers hold %d bytes after BoundPending(%d) (before: %d)", after, budget, before)
	}
	for i, w := range ws {
		adds, err := w.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var next int32
		for _, a := range adds {
			if err := ReadEventIDs(context.Background(), st, a, func(r EventRef) error {
				if r.Seq != next {
					t.Fatalf("writer %d: seq %d, want %d", i, r.Seq, next)
				}
				next++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if next != rows {
			t.Fatalf("writer %d: %d rows read back, want %d", i, next, rows)
		}
	}
}

// TestBoundPendingStagesSmallRows: with many writers each holding a few
// rows, BoundPending stages them in temporary files rather than encode
// tiny row groups; every row comes back exactly, in order, in one row
// group per file, with the statistics of what was appended.
func TestBoundPendingStagesSmallRows(t *testing.T) {
	const writers, rounds, perRound, budget = 12, 8, 25, 16 << 10
	st := newLocalStore(t)
	ws := make([]*FileWriter, writers)
	want := make([][]outbox.Event, writers)
	for i := range ws {
		ws[i] = NewFileWriter(st, FileOptions{DeadLetter: i == 0})
	}
	hdr := `{"trace":"x"}`
	n := 0
	for round := range rounds + 1 {
		for i, w := range ws {
			for range perRound {
				n++
				ev := outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Topic: "t", Key: fmt.Sprint("k", n%7),
					Type: "T", SchemaVersion: int32(n % 3), Payload: fmt.Sprintf(`{"n":%d}`, n), Seq: int32(n), CommitLSN: int64(n),
					Xid: 9, CommitTime: base, OccurredAt: base.Add(time.Duration(n) * time.Millisecond)}
				if n%60 != 0 { // some staged chunks have a NULL, others none
					ev.Headers = &hdr
				}
				var err error
				if i == 0 {
					if n%70 == 0 {
						ev.OccurredAt = time.Time{} // NULL
					}
					err = w.AppendDeadLetter(&outbox.DeadLetter{Event: ev, Reason: "bad", SourceTable: "public.outbox", RawRow: "{}"})
				} else {
					err = w.Append(&ev)
				}
				if err != nil {
					t.Fatal(err)
				}
				want[i] = append(want[i], ev)
			}
		}
		if round == rounds {
			break // the last rows stay pending: Close encodes them after the staged ones
		}
		if err := BoundPending(budget, slices.Values(ws)); err != nil {
			t.Fatal(err)
		}
		for i, w := range ws {
			if w.PendingBytes() > budget {
				t.Fatalf("writer %d holds %d pending bytes after BoundPending(%d)", i, w.PendingBytes(), budget)
			}
		}
	}
	if ws[1].stage == nil {
		t.Fatal("no rows were staged: the test does not test staging")
	}
	for i, w := range ws {
		adds, err := w.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(adds) != 1 {
			t.Fatalf("writer %d: %d files, want 1", i, len(adds))
		}
		data, err := st.Get(context.Background(), adds[0].Path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if g := pf.NumRowGroups(); g != 1 {
			t.Errorf("writer %d: %d row groups, want the staged rows in one", i, g)
		}
		pf.Close()
		var got []outbox.Event
		read := func(e outbox.Event) error { got = append(got, e); return nil }
		if i == 0 {
			err = ReadDeadLetters(context.Background(), st, adds[0], func(d outbox.DeadLetter) error { return read(d.Event) })
		} else {
			err = ReadEvents(context.Background(), st, adds[0], read)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want[i]) {
			t.Fatalf("writer %d: %d rows, want %d", i, len(got), len(want[i]))
		}
		nullHeaders := 0
		for j := range got {
			g, w := got[j], want[i][j]
			if g.ID != w.ID || g.Key != w.Key || g.Payload != w.Payload || g.SchemaVersion != w.SchemaVersion ||
				g.Seq != w.Seq || !g.OccurredAt.Equal(w.OccurredAt) || (g.Headers == nil) != (w.Headers == nil) {
				t.Fatalf("writer %d row %d: got %+v, want %+v", i, j, g, w)
			}
			if w.Headers == nil {
				nullHeaders++
			}
		}
		stats := adds[0].Stats
		if !strings.Contains(stats, fmt.Sprintf(`"numRecords":%d`, len(got))) || !strings.Contains(stats, fmt.Sprintf(`"headers":%d`, nullHeaders)) {
			t.Errorf("writer %d: stats %s, want numRecords %d and %d null headers", i, stats, len(got), nullHeaders)
		}
	}
}

// emptyRowBufferPool drops the buffers earlier tests left in the process's
// free list, so a test measures what its own writers retain, the free list
// included.
func emptyRowBufferPool(t *testing.T) {
	t.Helper()
	rowBufferPool.mu.Lock()
	defer rowBufferPool.mu.Unlock()
	clear(rowBufferPool.free)
	rowBufferPool.free, rowBufferPool.bytes = nil, 0
}

// TestRowBufferPoolBounded: released buffers are reused, and the free list
// holds at most keptBufferBytes of capacity, whatever is released; a
// writer asking for small buffers does not get a large set.
func TestRowBufferPoolBounded(t *testing.T) {
	f := &rowBufferFree{}
	big := func() *rowBuffers {
		b := f.Get(0)
		b.cols[colPayload].data = make([]byte, 0, 10<<20)
		return b
	}
	sets := []*rowBuffers{big(), big(), big(), big(), big()}
	for _, b := range sets {
		f.Put(b)
	}
	if f.bytes > keptBufferBytes || len(f.free) != keptBufferBytes/(10<<20) {
		t.Fatalf("free list holds %d sets, %d bytes; want at most %d bytes", len(f.free), f.bytes, keptBufferBytes)
	}
	if got := f.Get(10 << 20); got != sets[len(f.free)] || cap(got.cols[colPayload].data) != 10<<20 {
		t.Fatal("Get did not reuse the last set released")
	}
	if got := f.Get(freshSetBytes); cap(got.cols[colPayload].data) != 0 {
		t.Fatalf("Get(%d) returned a set of %d bytes", freshSetBytes, got.capBytes())
	}
}

// TestBufferHintReusesTopicBuffers: a topic's next writer, given the
// capacity its last writer released (BufferCap as BufferHint), takes those
// buffers back from the pool instead of growing new ones from nothing;
// a writer without a hint does not take them.
func TestBufferHintReusesTopicBuffers(t *testing.T) {
	emptyRowBufferPool(t)
	t.Cleanup(func() { emptyRowBufferPool(t) })
	st := newLocalStore(t)
	ev := func(n int) *outbox.Event {
		return &outbox.Event{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n), Topic: "t", Key: "k", Type: "T", SchemaVersion: 1,
			Payload: `{"order":` + fmt.Sprint(n) + `,"note":"` + strings.Repeat("x", 300) + `"}`, CommitLSN: 1, CommitTime: base, OccurredAt: base}
	}
	first := NewFileWriter(st, FileOptions{})
	for n := range 5000 {
		if err := first.Append(ev(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	hint := first.BufferCap()
	if hint < 1<<20 {
		t.Fatalf("the first writer released %d bytes of buffers, want at least 1 MiB for the test to mean anything", hint)
	}
	other := NewFileWriter(st, FileOptions{})
	if err := other.Append(ev(0)); err != nil {
		t.Fatal(err)
	}
	if held := other.rows.heldBytes(); held >= int64(hint) {
		t.Fatalf("a writer without a hint holds %d bytes of buffers: it took the %d-byte set", held, hint)
	}
	next := NewFileWriter(st, FileOptions{BufferHint: hint})
	if err := next.Append(ev(0)); err != nil {
		t.Fatal(err)
	}
	if held := next.rows.heldBytes(); held != int64(hint) {
		t.Fatalf("the topic's next writer holds %d bytes of buffers, want the %d its last writer released", held, hint)
	}
	other.Abort()
	next.Abort()
}
