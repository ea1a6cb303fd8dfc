package topic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

var partName = regexp.MustCompile(`^part-[0-9]{5}-[0-9a-f-]{36}\.c000\.snappy\.parquet$`)

type parsedStats struct {
	NumRecords int64            `json:"numRecords"`
	MinValues  map[string]any   `json:"minValues"`
	MaxValues  map[string]any   `json:"maxValues"`
	NullCount  map[string]int64 `json:"nullCount"`
}

func parseStats(t *testing.T, s string) parsedStats {
	t.Helper()
	var ps parsedStats
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ps); err != nil {
		t.Fatalf("stats %q: %v", s, err)
	}
	return ps
}

// TestWriterRoundTrip writes 10,000 events across several files and row
// groups and reads them back unchanged and in order; sizes, names and stats
// of every add agree with the stored objects and the rows.
func TestWriterRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newLocalStore(t)
	evs := testEvents(10_000, 7, 0x1000)
	opts := FileOptions{RowGroupRows: 1000, MaxFileRows: 3000}
	adds := writeEvents(t, st, opts, evs)
	if len(adds) != 4 {
		t.Fatalf("%d files, want 4 (3000-row files)", len(adds))
	}
	got := readAll(t, st, adds)
	if len(got) != len(evs) {
		t.Fatalf("read %d rows, want %d", len(got), len(evs))
	}
	for i := range evs {
		if !eventsEqual(got[i], evs[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got[i], evs[i])
		}
	}
	row := 0
	for k, a := range adds {
		if !partName.MatchString(a.Path) || !strings.HasPrefix(a.Path, "part-0000"+string(rune('0'+k))) {
			t.Errorf("add %d path %q", k, a.Path)
		}
		data, err := st.Get(ctx, a.Path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != a.Size || !a.DataChange || a.PartitionValues == nil {
			t.Errorf("add %s: size %d (object %d), dataChange %t, partitionValues %v", a.Path, a.Size, len(data), a.DataChange, a.PartitionValues)
		}
		if d := time.Since(time.UnixMilli(a.ModificationTime)); d < 0 || d > time.Minute {
			t.Errorf("modificationTime %d is not now in ms", a.ModificationTime)
		}
		checkRowGroups(t, data, 3)
		ps := parseStats(t, a.Stats)
		n := int(ps.NumRecords)
		checkStats(t, ps, evs[row:row+n])
		row += n
	}
	if row != len(evs) {
		t.Errorf("numRecords sum %d, want %d", row, len(evs))
	}
	line, _ := json.Marshal(delta.Action{Add: &adds[0]})
	if !bytes.Contains(line, []byte(`"partitionValues":{}`)) || !bytes.Contains(line, []byte(`"stats":"{\"numRecords\":3000,`)) {
		t.Errorf("add line %s", line)
	}
}

// checkRowGroups asserts the parquet file has at most max row groups and
// snappy-compressed columns.
func checkRowGroups(t *testing.T, data []byte, max int) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if n := pf.NumRowGroups(); n < 1 || n > max {
		t.Errorf("%d row groups, want 1..%d", n, max)
	}
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(colPayload)
	if err != nil {
		t.Fatal(err)
	}
	if c := cc.Compression().String(); c != "SNAPPY" {
		t.Errorf("compression %s, want SNAPPY", c)
	}
}

// checkStats compares parsed stats with the rows of the file.
func checkStats(t *testing.T, ps parsedStats, rows []outbox.Event) {
	t.Helper()
	var nullHeaders int64
	minLSN, maxLSN := rows[0].CommitLSN, rows[0].CommitLSN
	minOcc, maxOcc := rows[0].OccurredAt, rows[0].OccurredAt
	for _, e := range rows {
		if e.Headers == nil {
			nullHeaders++
		}
		minLSN, maxLSN = min(minLSN, e.CommitLSN), max(maxLSN, e.CommitLSN)
		if e.OccurredAt.Before(minOcc) {
			minOcc = e.OccurredAt
		}
		if e.OccurredAt.After(maxOcc) {
			maxOcc = e.OccurredAt
		}
	}
	if ps.MinValues["commit_lsn"] != float64(minLSN) || ps.MaxValues["commit_lsn"] != float64(maxLSN) {
		t.Errorf("commit_lsn stats %v..%v, want %d..%d", ps.MinValues["commit_lsn"], ps.MaxValues["commit_lsn"], minLSN, maxLSN)
	}
	lo, err1 := time.Parse(time.RFC3339Nano, ps.MinValues["occurred_at"].(string))
	hi, err2 := time.Parse(time.RFC3339Nano, ps.MaxValues["occurred_at"].(string))
	if err1 != nil || err2 != nil || lo.After(minOcc) || hi.Before(maxOcc) || maxOcc.Sub(hi) < -time.Millisecond || lo.Sub(minOcc) > time.Millisecond {
		t.Errorf("occurred_at stats %v..%v do not tightly enclose %v..%v", lo, hi, minOcc, maxOcc)
	}
	if ps.NullCount["headers"] != nullHeaders || len(ps.NullCount) != numEventCols {
		t.Errorf("nullCount %v, want headers=%d and all %d columns", ps.NullCount, nullHeaders, numEventCols)
	}
}

func TestStatsTimeRounding(t *testing.T) {
	for _, tc := range []struct {
		micros   int64
		min, max string
	}{
		{0, "1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.000Z"},
		{1, "1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.001Z"},
		{999, "1970-01-01T00:00:00.000Z", "1970-01-01T00:00:00.001Z"},
		{1000, "1970-01-01T00:00:00.001Z", "1970-01-01T00:00:00.001Z"},
		{-1, "1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00.000Z"},
		{-1500, "1969-12-31T23:59:59.998Z", "1969-12-31T23:59:59.999Z"},
		{base.UnixMicro(), "2026-11-30T07:48:59.123Z", "2026-11-30T07:48:59.124Z"},
	} {
		if got := string(appendStatsTime(nil, tc.micros, false)); got != tc.min {
			t.Errorf("min(%d) = %s, want %s", tc.micros, got, tc.min)
		}
		if got := string(appendStatsTime(nil, tc.micros, true)); got != tc.max {
			t.Errorf("max(%d) = %s, want %s", tc.micros, got, tc.max)
		}
	}
}

// TestDeadLetterRoundTrip covers the dead-letter schema: extra columns,
// zero timestamps stored as NULL, and refusing the wrong kind of row.
func TestDeadLetterRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newLocalStore(t)
	w := NewFileWriter(st, FileOptions{DeadLetter: true})
	dls := []outbox.DeadLetter{
		{Event: outbox.Event{ID: "a", Topic: "a/b", CommitLSN: 10, Seq: 0, Xid: 5, CommitTime: base},
			Reason: `invalid topic name "a/b"`, SourceTable: "public.outbox", RawRow: `{"id":"a","topic":"a/b","key":null}`},
		{Event: outbox.Event{ID: "", CommitLSN: 10, Seq: 1, Xid: 5, CommitTime: base},
			Reason: "UPDATE of an outbox row", SourceTable: "public.outbox", RawRow: `{}`},
	}
	for i := range dls {
		if err := w.AppendDeadLetter(&dls[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Append(&dls[0].Event); err == nil {
		t.Error("Append on a dead-letter writer succeeded")
	}
	adds, err := w.Close(ctx)
	if err != nil || len(adds) != 1 {
		t.Fatalf("close: %v, %d adds", err, len(adds))
	}
	ps := parseStats(t, adds[0].Stats)
	if ps.NullCount["occurred_at"] != 2 || ps.NullCount["raw_row"] != 0 || len(ps.NullCount) != numDeadLetterCols {
		t.Errorf("nullCount %v", ps.NullCount)
	}
	if _, ok := ps.MinValues["occurred_at"]; ok {
		t.Errorf("minValues has occurred_at for an all-null column: %v", ps.MinValues)
	}
	var got []outbox.DeadLetter
	err = ReadDeadLetters(ctx, st, adds[0], func(d outbox.DeadLetter) error { got = append(got, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := range dls {
		if len(got) != len(dls) || !eventsEqual(got[i].Event, dls[i].Event) || got[i].Reason != dls[i].Reason ||
			got[i].SourceTable != dls[i].SourceTable || got[i].RawRow != dls[i].RawRow {
			t.Fatalf("dead letters read back %+v, want %+v", got, dls)
		}
	}
	ev := NewFileWriter(st, FileOptions{})
	defer ev.Abort()
	if err := ev.AppendDeadLetter(&dls[0]); err == nil {
		t.Error("AppendDeadLetter on an event writer succeeded")
	}
}

func TestReadEventIDs(t *testing.T) {
	st := newLocalStore(t)
	evs := testEvents(2500, 4, 1)
	adds := writeEvents(t, st, FileOptions{RowGroupRows: 1000}, evs)
	i := 0
	err := ReadEventIDs(context.Background(), st, adds[0], func(r EventRef) error {
		e := evs[i]
		if r.ID != e.ID || r.CommitLSN != e.CommitLSN || r.Seq != e.Seq || !r.OccurredAt.Equal(e.OccurredAt) {
			t.Fatalf("ref %d = %+v, want %s %d %d %v", i, r, e.ID, e.CommitLSN, e.Seq, e.OccurredAt)
		}
		i++
		return nil
	})
	if err != nil || i != len(evs) {
		t.Fatalf("ReadEventIDs: %v after %d rows", err, i)
	}
}

// TestSpillAndAbort: a file larger than the memory buffer goes through a
// temporary file, which is gone after Close; Abort uploads nothing.
func TestSpillAndAbort(t *testing.T) {
	ctx := context.Background()
	st := newLocalStore(t)
	evs := testEvents(20_000, 10, 1)
	opts := FileOptions{MemoryBuffer: 64 << 10, RowGroupRows: 2000}
	w := NewFileWriter(st, opts)
	for i := range evs {
		if err := w.Append(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if files := diskFiles(t, st); len(files) != 1 {
		t.Errorf("files on disk while writing: %q, want one temporary file", files)
	}
	if objs, _ := st.List(ctx, "", ""); len(objs) != 0 {
		t.Errorf("objects visible before Close: %v", objs)
	}
	if w.Rows() != len(evs) || w.Bytes() < int64(len(evs))*100 {
		t.Errorf("Rows %d Bytes %d", w.Rows(), w.Bytes())
	}
	adds, err := w.Close(ctx)
	if err != nil || len(adds) != 1 || adds[0].Size <= opts.MemoryBuffer {
		t.Fatalf("close: %v %+v", err, adds)
	}
	if files := diskFiles(t, st); len(files) != 1 || files[0] != adds[0].Path {
		t.Errorf("files on disk after Close: %q, want only %s", files, adds[0].Path)
	}
	if got := readAll(t, st, adds); len(got) != len(evs) || !eventsEqual(got[len(got)-1], evs[len(evs)-1]) {
		t.Errorf("read back %d rows", len(got))
	}

	st2 := newLocalStore(t)
	w = NewFileWriter(st2, opts)
	for i := range evs {
		if err := w.Append(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	w.Abort()
	if files := diskFiles(t, st2); len(files) != 0 {
		t.Errorf("files on disk after Abort: %q", files)
	}
	if err := w.Append(&evs[0]); err == nil {
		t.Error("Append after Abort succeeded")
	}
	if adds, err := NewFileWriter(st2, opts).Close(ctx); err != nil || len(adds) != 0 {
		t.Errorf("empty writer Close = %v, %v", adds, err)
	}
}

// TestCloseUploadFailure: when the upload of the third file fails after the
// bytes landed (an ambiguous outcome), Close returns the error and no adds,
// deletes all three files and leaves no temp files; a cancelled context
// fails Close.
func TestCloseUploadFailure(t *testing.T) {
	ctx := context.Background()
	local := newLocalStore(t)
	st := storage.NewFaulty(local)
	st.Inject(storage.Fault{Op: storage.OpPut, Call: 3, After: true})
	w := NewFileWriter(st, FileOptions{MaxFileRows: 100, MemoryBuffer: 1 << 10})
	evs := testEvents(450, 5, 1)
	for i := range evs {
		if err := w.Append(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(ctx)
	if !errors.Is(err, storage.ErrInjected) || adds != nil {
		t.Fatalf("Close = %v, %v; want the injected error and no adds", adds, err)
	}
	if objs, err := local.List(ctx, "", ""); err != nil || len(objs) != 0 {
		t.Errorf("objects left after a failed Close: %v (%v)", objs, err)
	}
	if files := diskFiles(t, local); len(files) != 0 {
		t.Errorf("files left after a failed Close: %q", files)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	w = NewFileWriter(local, FileOptions{})
	if err := w.Append(&evs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a cancelled context = %v", err)
	}
}

// TestNullPatternsRoundTrip writes columns whose first null falls at every
// bit position of a bitmap byte, all-null and no-null row groups, and
// dead letters with unknown timestamps, through row groups that reuse the
// pooled buffers of the previous ones, and reads every value back.
func TestNullPatternsRoundTrip(t *testing.T) {
	st := newLocalStore(t)
	hdr := `{"h":1}`
	for first := range 17 {
		evs := testEvents(100, 3, 0x2000)
		for i := range evs {
			evs[i].Headers = &hdr
			if i >= first && (i-first)%5 == 0 {
				evs[i].Headers = nil
			}
		}
		if first == 16 {
			for i := range evs {
				evs[i].Headers = nil
			}
		}
		adds := writeEvents(t, st, FileOptions{RowGroupRows: 10 + first}, evs)
		got := readAll(t, st, adds)
		if len(got) != len(evs) {
			t.Fatalf("first null at %d: read %d rows, want %d", first, len(got), len(evs))
		}
		for i := range evs {
			if !eventsEqual(got[i], evs[i]) {
				t.Fatalf("first null at %d, row %d:\n got %+v\nwant %+v", first, i, got[i], evs[i])
			}
		}
	}
	var dls []outbox.DeadLetter
	for i := range 30 {
		d := outbox.DeadLetter{Event: testEvents(1, 1, int64(i))[0], Reason: "r", SourceTable: "public.outbox", RawRow: strconv.Itoa(i)}
		if i%4 == 3 {
			d.OccurredAt = time.Time{}
		}
		dls = append(dls, d)
	}
	checkDeadLetters(t, st, FileOptions{DeadLetter: true, RowGroupRows: 7}, dls)
}

// diskFiles lists every file under a local store's root, temporary files
// included, as slash-separated paths.
func diskFiles(t *testing.T, st storage.Store) []string {
	t.Helper()
	root := st.(*storage.Local).Root()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
