package topic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

func TestMain(m *testing.M) {
	code := s3test.Run(m)
	for _, d := range monthDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

const relayApp = "deltabus-test"

// bothStores runs fn on a fresh store root on the local filesystem and on
// a versitygw bucket.
func bothStores(t *testing.T, fn func(t *testing.T, root storage.Store)) {
	t.Run("local", func(t *testing.T) { fn(t, newLocalStore(t)) })
	t.Run("s3", func(t *testing.T) {
		st, err := storage.NewS3(t.Context(), s3test.NewBucket(t).S3Config("root"))
		if err != nil {
			t.Fatal(err)
		}
		fn(t, st)
	})
}

// openTopic creates the table of topic under root and opens a writer
// handle on it, as the relay does.
func openTopic(t testing.TB, root storage.Store, topic string) (storage.Store, *delta.Table) {
	t.Helper()
	st := storage.Sub(root, topic)
	md, proto := NewTableMetadata(topic)
	if err := delta.CreateTable(t.Context(), st, md, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(t.Context(), st, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, tbl
}

// relayCommit writes evs as one relay batch: data files, then one commit
// with the txn of the batch's last commit LSN.
func relayCommit(t testing.TB, st storage.Store, tbl *delta.Table, opts FileOptions, evs []outbox.Event) error {
	adds := writeEvents(t, st, opts, evs)
	_, err := tbl.Commit(context.Background(), delta.CommitActions{Adds: adds,
		Txn: &delta.Txn{AppID: relayApp, Version: evs[len(evs)-1].CommitLSN}})
	return err
}

// snapshotEvents reads every active file of the table, files in the order
// of their lowest (commit_lsn, seq), rows in file order, and checks that
// each file is in order and starts after the previous one ends.
func snapshotEvents(t testing.TB, st storage.Store) ([]outbox.Event, *delta.Snapshot) {
	t.Helper()
	snap, err := delta.LoadSnapshot(t.Context(), st, -1)
	if err != nil {
		t.Fatal(err)
	}
	files := make([]inputFile, 0, len(snap.Files))
	for _, a := range snap.Files {
		files = append(files, fileStatsOf(a))
	}
	slices.SortFunc(files, func(a, b inputFile) int { return a.lo.cmp(b.lo) })
	var all []outbox.Event
	for _, f := range files {
		evs := readAll(t, st, []delta.Add{f.add})
		for i, e := range evs {
			p := pos{e.CommitLSN, int64(e.Seq)}
			if len(all) > 0 && (p.cmp(pos{all[len(all)-1].CommitLSN, int64(all[len(all)-1].Seq)}) <= 0) {
				t.Fatalf("file %s row %d (%d,%d) is not after the previous row", f.add.Path, i, e.CommitLSN, e.Seq)
			}
			all = append(all, e)
		}
	}
	return all, snap
}

func checkSameEvents(t testing.TB, got, want []outbox.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !eventsEqual(got[i], want[i]) {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestCompact: 40 relay batches of up to 3 files are bin-packed into a few
// files; every row is still there once, in commit order within and across
// files; the txn is intact; the change feed sees the batches, not the
// compaction.
func TestCompact(t *testing.T) {
	bothStores(t, func(t *testing.T, root storage.Store) {
		ctx := t.Context()
		st, tbl := openTopic(t, root, "orders")
		evs := testEvents(4000, 7, 0x1000)
		for b := range 40 {
			if err := relayCommit(t, st, tbl, FileOptions{MaxFileRows: 40}, evs[b*100:(b+1)*100]); err != nil {
				t.Fatal(err)
			}
		}
		before := tbl.NumFiles()
		res, err := Compact(ctx, st, CompactOptions{TargetFileBytes: 32 << 10, RowGroupRows: 500})
		if err != nil {
			t.Fatal(err)
		}
		got, snap := snapshotEvents(t, st)
		checkSameEvents(t, got, evs)
		if res.FilesRemoved != before || res.FilesAdded != len(snap.Files) || res.FilesAdded < 2 || res.FilesAdded > 10 ||
			res.Rows != int64(len(evs)) || len(res.Versions) != 1 || res.Versions[0] != 41 {
			t.Fatalf("result %+v, %d files before, %d after", res, before, len(snap.Files))
		}
		if snap.Txns[relayApp].Version != evs[len(evs)-1].CommitLSN || snap.CommitInfo.Operation() != "OPTIMIZE" {
			t.Fatalf("txn %+v, operation %s", snap.Txns, snap.CommitInfo.Operation())
		}
		for _, a := range snap.Files {
			if a.DataChange {
				t.Errorf("compacted add %s has dataChange=true", a.Path)
			}
		}
		var fed int
		err = delta.ReadChanges(ctx, st, 1, -1, func(cf delta.ChangeFile) error {
			if cf.Version > 40 {
				return fmt.Errorf("the compaction (version %d) yielded %s", cf.Version, cf.Path)
			}
			fed++
			return nil
		})
		if err != nil || fed != before {
			t.Fatalf("change feed: %d files, %v", fed, err)
		}
		if res, err := Compact(ctx, st, CompactOptions{TargetFileBytes: 32 << 10, RowGroupRows: 500}); err != nil || len(res.Versions) != 0 {
			t.Fatalf("second compaction: %+v %v", res, err)
		}
		if err := relayCommit(t, st, tbl, FileOptions{}, testEvents(10, 5, 0x900000)); err != nil {
			t.Fatalf("relay append after compaction: %v", err)
		}
	})
}

// TestCompactDeadLetters: the dead-letter table keeps its three columns.
func TestCompactDeadLetters(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), outbox.DeadLetterTopic)
	var want []outbox.DeadLetter
	for b := range 5 {
		w := NewFileWriter(st, FileOptions{DeadLetter: true})
		for i, e := range testEvents(20, 4, int64(0x10000*(b+1))) {
			d := outbox.DeadLetter{Event: e, Reason: fmt.Sprintf("reason %d/%d", b, i), SourceTable: "public.outbox", RawRow: `{"raw":true}`}
			if i%5 == 0 {
				d.OccurredAt = time.Time{}
			}
			want = append(want, d)
			if err := w.AppendDeadLetter(&d); err != nil {
				t.Fatal(err)
			}
		}
		adds, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: relayApp, Version: int64(b + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := Compact(ctx, st, CompactOptions{}); err != nil || res.FilesRemoved != 5 || res.FilesAdded != 1 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	var got []outbox.DeadLetter
	snap, _ := delta.LoadSnapshot(ctx, st, -1)
	for _, a := range snap.Files {
		if err := ReadDeadLetters(ctx, st, a, func(d outbox.DeadLetter) error { got = append(got, d); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(got), len(want))
	}
	for i := range want {
		if !eventsEqual(got[i].Event, want[i].Event) || got[i].Reason != want[i].Reason || got[i].RawRow != want[i].RawRow || got[i].SourceTable != want[i].SourceTable {
			t.Fatalf("dead letter %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestCompactWithLiveAppender: a relay goroutine commits batches with its
// txn while compactions run; afterwards every event is present exactly
// once, in order, and the txn is the last batch's.
func TestCompactWithLiveAppender(t *testing.T) {
	bothStores(t, func(t *testing.T, root storage.Store) {
		ctx := t.Context()
		st, tbl := openTopic(t, root, "orders")
		const batches, per = 120, 25
		evs := testEvents(batches*per, 5, 0x5000)
		var wg sync.WaitGroup
		var relayErr error
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			for b := range batches {
				if relayErr = relayCommit(t, st, tbl, FileOptions{}, evs[b*per:(b+1)*per]); relayErr != nil {
					return
				}
			}
		}()
		var compactions, commits int
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			res, err := Compact(ctx, st, CompactOptions{})
			if err != nil {
				t.Fatalf("compaction %d: %v", compactions, err)
			}
			compactions++
			commits += len(res.Versions)
		}
		wg.Wait()
		if relayErr != nil {
			t.Fatalf("relay: %v", relayErr)
		}
		got, snap := snapshotEvents(t, st)
		checkSameEvents(t, got, evs)
		if snap.Txns[relayApp].Version != evs[len(evs)-1].CommitLSN {
			t.Fatalf("txn %+v, want %d", snap.Txns[relayApp], evs[len(evs)-1].CommitLSN)
		}
		if commits == 0 {
			t.Fatalf("no compaction committed while the relay ran (%d runs)", compactions)
		}
		rebased := rebasedRewrites(t, st, snap.Version)
		t.Logf("%d compaction runs, %d commits (%d rebased over a relay commit that won the race), %d files at the end",
			compactions, commits, rebased, len(snap.Files))
		if rebased == 0 {
			t.Fatalf("no compaction lost a race to the relay: the test did not exercise the rebase")
		}
	})
}

// TestConcurrentCompactions: two compactions of the same files; one wins,
// the other stops with ErrRewriteConflict and removes its output, or finds
// nothing to do; no row is lost or doubled and no orphan is left.
func TestConcurrentCompactions(t *testing.T) {
	ctx := t.Context()
	root := newLocalStore(t)
	st, tbl := openTopic(t, root, "orders")
	evs := testEvents(600, 3, 0x7000)
	for b := range 30 {
		if err := relayCommit(t, st, tbl, FileOptions{}, evs[b*20:(b+1)*20]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Compact(ctx, st, CompactOptions{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, delta.ErrRewriteConflict) {
			t.Fatalf("compaction: %v", err)
		}
	}
	got, snap := snapshotEvents(t, st)
	checkSameEvents(t, got, evs)
	objs, err := st.List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		_, active := snap.Files[o.Key]
		_, removed := snap.Tombstones[o.Key]
		if !active && !removed && !strings.HasPrefix(o.Key, "_delta_log/") {
			t.Errorf("orphan %s left behind (errors %v)", o.Key, errs)
		}
	}
}

// rebasedRewrites counts the OPTIMIZE commits whose readVersion is not the
// version before them: they lost a race and were retried.
func rebasedRewrites(t *testing.T, st storage.Store, latest int64) int {
	n := 0
	for v := int64(1); v <= latest; v++ {
		data, err := st.Get(t.Context(), delta.CommitKey(v))
		if err != nil {
			t.Fatal(err)
		}
		acts, err := delta.ParseCommit(data)
		if err != nil {
			t.Fatal(err)
		}
		ci := acts[0].CommitInfo
		var rv int64
		if ci != nil && ci.Operation() == "OPTIMIZE" && json.Unmarshal(ci.Raw["readVersion"], &rv) == nil && rv != v-1 {
			n++
		}
	}
	return n
}

// TestCompactMergesOverlappingFiles: snapshot-like files that share one
// commit_lsn with interleaved seq (as two bootstrap encoders write them)
// are merged into one (commit_lsn, seq) order.
func TestCompactMergesOverlappingFiles(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), "orders")
	evs := testEvents(300, 300, 0x40) // one source "transaction": one commit_lsn, seq 0..299
	var a, b []outbox.Event
	for i, e := range evs {
		if (i/7)%2 == 0 {
			a = append(a, e)
		} else {
			b = append(b, e)
		}
	}
	adds := append(writeEvents(t, st, FileOptions{}, a), writeEvents(t, st, FileOptions{}, b)...)
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: adds, Txn: &delta.Txn{AppID: relayApp, Version: 0x40}}); err != nil {
		t.Fatal(err)
	}
	later := testEvents(50, 5, 0x1000)
	if err := relayCommit(t, st, tbl, FileOptions{}, later); err != nil {
		t.Fatal(err)
	}
	if res, err := Compact(ctx, st, CompactOptions{}); err != nil || res.FilesRemoved != 3 || res.FilesAdded != 1 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	got, _ := snapshotEvents(t, st)
	checkSameEvents(t, got, append(evs, later...))
}

// TestCompactKeepsNullsAndOldFiles: rows are copied as they are: NULLs in
// any nullable column stay NULL, and a file written before a column was
// added (here without commit_time) gets NULL there.
func TestCompactKeepsNullsAndOldFiles(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), "orders")
	old := writeOldFile(t, st)
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: []delta.Add{old}, Txn: &delta.Txn{AppID: relayApp, Version: 9}}); err != nil {
		t.Fatal(err)
	}
	if err := relayCommit(t, st, tbl, FileOptions{}, testEvents(3, 3, 0x100)); err != nil {
		t.Fatal(err)
	}
	if res, err := Compact(ctx, st, CompactOptions{}); err != nil || res.FilesAdded != 1 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	snap, _ := delta.LoadSnapshot(ctx, st, -1)
	var rows []map[string]any
	for _, a := range snap.Files {
		if err := delta.ReadParquetRows(ctx, st, a.Path, func(r map[string]any) error { rows = append(rows, r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows[:2] {
		for _, c := range []string{"topic", "key", "type", "schema_version", "payload", "headers", "occurred_at", "xid", "commit_time"} {
			if r[c] != nil {
				t.Errorf("row %d column %s = %v, want NULL", i, c, r[c])
			}
		}
		if r["event_id"] != fmt.Sprint("old-", i) || fmt.Sprint(r["commit_lsn"]) != "9" || fmt.Sprint(r["seq"]) != fmt.Sprint(i) {
			t.Errorf("row %d = %v", i, r)
		}
	}
	if rows[2]["commit_time"] == nil || rows[2]["key"] != "order-0" {
		t.Errorf("relay row = %v", rows[2])
	}
}

// writeOldFile writes, as another writer could, a two-row file without
// the commit_time column and with NULL in every nullable column but the
// position, and returns its add.
func writeOldFile(t *testing.T, st storage.Store) delta.Add {
	t.Helper()
	fields := slices.Clone(eventSchema.Fields()[:colCommitTime])
	schema := arrow.NewSchema(fields, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	for i := range 2 {
		for c := range fields {
			fb := bld.Field(c)
			switch {
			case c == colEventID:
				fb.(*array.StringBuilder).Append(fmt.Sprint("old-", i))
			case c == colCommitLSN:
				fb.(*array.Int64Builder).Append(9)
			case c == colSeq:
				fb.(*array.Int32Builder).Append(int32(i))
			default:
				fb.AppendNull()
			}
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := "part-00000-old.c000.snappy.parquet"
	if err := st.Put(t.Context(), path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	stats := `{"numRecords":2,"minValues":{"commit_lsn":9,"seq":0},"maxValues":{"commit_lsn":9,"seq":1},"nullCount":{"commit_lsn":0,"seq":0,"key":2}}`
	return delta.Add{Path: path, Size: int64(buf.Len()), ModificationTime: time.Now().UnixMilli(), Stats: stats}
}

// TestSourceColumnAndStats: every row names the relay that wrote it, a
// file's stats bound its sources exactly (min = max for one source), and
// compaction of two sources' files keeps each row's source and widens the
// bounds to both.
func TestSourceColumnAndStats(t *testing.T) {
	ctx := t.Context()
	st, tbl := openTopic(t, newLocalStore(t), "orders")
	a, b := testEvents(20, 2, 0x1000), testEvents(20, 2, 0x8000)
	for i := range b {
		b[i].ID = "b-" + b[i].ID
	}
	if err := relayCommit(t, st, tbl, FileOptions{Source: "deltabus-1-a"}, a); err != nil {
		t.Fatal(err)
	}
	if err := relayCommit(t, st, tbl, FileOptions{Source: "deltabus-2-b"}, b); err != nil {
		t.Fatal(err)
	}
	bounds := func() (lo, hi []string) {
		snap, err := delta.LoadSnapshot(ctx, st, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range snap.Files {
			var s struct {
				Min map[string]any `json:"minValues"`
				Max map[string]any `json:"maxValues"`
			}
			if err := json.Unmarshal([]byte(f.Stats), &s); err != nil {
				t.Fatal(err)
			}
			lo, hi = append(lo, fmt.Sprint(s.Min["source"])), append(hi, fmt.Sprint(s.Max["source"]))
		}
		slices.Sort(lo)
		slices.Sort(hi)
		return lo, hi
	}
	if lo, hi := bounds(); !slices.Equal(lo, []string{"deltabus-1-a", "deltabus-2-b"}) || !slices.Equal(lo, hi) {
		t.Fatalf("source bounds %q / %q, want one source a file", lo, hi)
	}
	if _, err := Compact(ctx, st, CompactOptions{MinFiles: 1}); err != nil {
		t.Fatal(err)
	}
	if lo, hi := bounds(); !slices.Equal(lo, []string{"deltabus-1-a"}) || !slices.Equal(hi, []string{"deltabus-2-b"}) {
		t.Fatalf("after compaction: source bounds %q / %q, want one file spanning both", lo, hi)
	}
	got, _ := snapshotEvents(t, st)
	for _, e := range got {
		want := "deltabus-1-a"
		if strings.HasPrefix(e.ID, "b-") {
			want = "deltabus-2-b"
		}
		if e.Source != want {
			t.Fatalf("event %s source %q, want %q", e.ID, e.Source, want)
		}
	}
}
