package topic

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// randomString is empty, short, or (rarely) up to maxLong bytes, from a
// few distinct values when distinct > 0.
func randomString(r *rand.Rand, distinct, maxLong int) string {
	if distinct > 0 {
		return "v" + strconv.Itoa(r.IntN(distinct))
	}
	switch k := r.IntN(20); {
	case k < 2:
		return ""
	case k < 19:
		return strings.Repeat("é", r.IntN(30)) + strconv.Itoa(r.IntN(1e6))
	default:
		return strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(maxLong+1))
	}
}

// randomDeadLetters returns n dead letters with every column varied: NULL
// headers and times, empty and long strings, repeated and unique values.
func randomDeadLetters(r *rand.Rand, n, maxLong int, nullTimes bool) []outbox.DeadLetter {
	out := make([]outbox.DeadLetter, n)
	for i := range out {
		e := outbox.Event{
			ID: randomString(r, 0, 64), Topic: randomString(r, 3, 0), Key: randomString(r, 50, 0),
			Type: randomString(r, 4, 0), SchemaVersion: int32(r.IntN(5)) - 2, Payload: randomString(r, 0, maxLong),
			CommitLSN: r.Int64(), Seq: int32(r.Uint32()), Xid: r.Int64N(1<<40) - 1<<39,
			OccurredAt: base.Add(time.Duration(r.Int64N(1<<40)-1<<39) * time.Microsecond),
			CommitTime: base.Add(time.Duration(r.IntN(1e9)) * time.Microsecond),
		}
		if r.IntN(3) > 0 {
			h := randomString(r, 0, maxLong)
			e.Headers = &h
		}
		if nullTimes && r.IntN(4) == 0 {
			e.OccurredAt = time.Time{}
		}
		if nullTimes && r.IntN(9) == 0 {
			e.CommitTime = time.Time{}
		}
		out[i] = outbox.DeadLetter{Event: e, Reason: randomString(r, 5, 0), SourceTable: randomString(r, 2, 0), RawRow: randomString(r, 0, maxLong)}
	}
	return out
}

// encodeCases are FileOptions that make one huge, many small, and mixed
// row groups and files.
var encodeCases = []FileOptions{
	{},
	{RowGroupRows: 1},
	{RowGroupRows: 7, MaxFileRows: 50},
	{RowGroupRows: 333},
	{RowGroupBytes: 64 << 10, MaxFileBytes: 256 << 10},
}

// TestEncoderRandomRoundTrip writes random events and dead letters (NULLs,
// empty and long strings) and reads them back with the package's readers,
// which decode with arrow-go's pqarrow, value by value.
func TestEncoderRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 2026))
	for ci, opts := range encodeCases {
		n := []int{3000, 300, 500, 2500, 2000}[ci]
		dls := randomDeadLetters(r, n, 200_000, true)
		st := newLocalStore(t)
		evs := make([]outbox.Event, n)
		for i := range dls {
			evs[i] = dls[i].Event
			if evs[i].CommitTime.IsZero() { // the event schema has no NULL commit_time
				evs[i].CommitTime = base
			}
		}
		got := readAll(t, st, writeEvents(t, st, opts, evs))
		if len(got) != len(evs) {
			t.Fatalf("case %d: read %d events, want %d", ci, len(got), len(evs))
		}
		for i := range evs {
			if !eventsEqual(got[i], evs[i]) {
				t.Fatalf("case %d, event %d:\n got %+v\nwant %+v", ci, i, got[i], evs[i])
			}
		}
		opts.DeadLetter = true
		checkDeadLetters(t, st, opts, dls)
	}
}

func checkDeadLetters(t *testing.T, st storage.Store, opts FileOptions, dls []outbox.DeadLetter) []delta.Add {
	t.Helper()
	w := NewFileWriter(st, opts)
	for i := range dls {
		if err := w.AppendDeadLetter(&dls[i]); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []outbox.DeadLetter
	for _, a := range adds {
		if err := ReadDeadLetters(context.Background(), st, a, func(d outbox.DeadLetter) error { got = append(got, d); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(dls) {
		t.Fatalf("read %d dead letters, want %d", len(got), len(dls))
	}
	for i := range dls {
		if !eventsEqual(got[i].Event, dls[i].Event) || got[i].Reason != dls[i].Reason ||
			got[i].SourceTable != dls[i].SourceTable || got[i].RawRow != dls[i].RawRow {
			t.Fatalf("dead letter %d:\n got %+v\nwant %+v", i, got[i], dls[i])
		}
	}
	return adds
}

// pqarrowProps are the writer properties data files were written with
// through pqarrow.FileWriter, before parquetpage.
func pqarrowProps(rowGroupRows int) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(int64(rowGroupRows)),
		parquet.WithCreatedBy("deltabus"),
	}
	for n := range noDictionary {
		opts = append(opts, parquet.WithDictionaryFor(n, false))
	}
	for n := range noStatistics {
		opts = append(opts, parquet.WithStatsFor(n, false))
	}
	return parquet.NewWriterProperties(opts...)
}

// TestFooterMatchesPqarrow writes the same dead letters with FileWriter and
// with pqarrow.FileWriter as data files were written before, and compares
// the footers: schema, row groups, and per column chunk the codec, value
// count, dictionary or not, and statistics (min, max, null count).
func TestFooterMatchesPqarrow(t *testing.T) {
	dls := randomDeadLetters(rand.New(rand.NewPCG(3, 4)), 2500, 1000, true)
	st := newLocalStore(t)
	adds := checkDeadLetters(t, st, FileOptions{DeadLetter: true, RowGroupRows: 1000, Source: "deltabus-1-test"}, dls)
	if len(adds) != 1 {
		t.Fatalf("%d files", len(adds))
	}
	data, err := st.Get(context.Background(), adds[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	var ref bytes.Buffer
	pw, err := pqarrow.NewFileWriter(deadLetterSchema, &ref, pqarrowProps(1000), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	rows := new(pendingRows)
	var fs fileStats
	for i := range dls {
		rows.appendDeadLetter(&dls[i], "deltabus-1-test", true, &fs)
	}
	rec := recordOf(deadLetterSchema, rows)
	if err := pw.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	rows.release()
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	compareFooters(t, data, ref.Bytes())
}

func compareFooters(t *testing.T, got, want []byte) {
	t.Helper()
	g, err := file.NewParquetReader(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	w, err := file.NewParquetReader(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	gm, wm := g.MetaData(), w.MetaData()
	if !gm.Schema.Equals(wm.Schema) || gm.NumRows != wm.NumRows || gm.NumRowGroups() != wm.NumRowGroups() ||
		gm.GetCreatedBy() != wm.GetCreatedBy() || gm.Version() != wm.Version() {
		t.Fatalf("footer: schema equal %t, rows %d/%d, row groups %d/%d, created by %q/%q",
			gm.Schema.Equals(wm.Schema), gm.NumRows, wm.NumRows, gm.NumRowGroups(), wm.NumRowGroups(), gm.GetCreatedBy(), wm.GetCreatedBy())
	}
	for rg := range gm.NumRowGroups() {
		for c := range gm.NumColumns() {
			gc, _ := gm.RowGroup(rg).ColumnChunk(c)
			wc, _ := wm.RowGroup(rg).ColumnChunk(c)
			name := gc.PathInSchema().String()
			if gc.Compression() != wc.Compression() || gc.NumValues() != wc.NumValues() || gc.HasDictionaryPage() != wc.HasDictionaryPage() {
				t.Errorf("row group %d column %s: codec %v/%v, values %d/%d, dictionary %t/%t", rg, name,
					gc.Compression(), wc.Compression(), gc.NumValues(), wc.NumValues(), gc.HasDictionaryPage(), wc.HasDictionaryPage())
			}
			if !slices.Equal(gc.Encodings(), wc.Encodings()) {
				t.Errorf("row group %d column %s: encodings %v, pqarrow %v", rg, name, gc.Encodings(), wc.Encodings())
			}
			gs, gerr := gc.StatsSet()
			ws, werr := wc.StatsSet()
			if gs != ws || gerr != nil || werr != nil {
				t.Fatalf("row group %d column %s: stats set %t/%t (%v %v)", rg, name, gs, ws, gerr, werr)
			}
			if !gs {
				continue
			}
			a, _ := gc.Statistics()
			b, _ := wc.Statistics()
			if a.HasMinMax() != b.HasMinMax() || a.NullCount() != b.NullCount() || a.HasNullCount() != b.HasNullCount() ||
				!bytes.Equal(a.EncodeMin(), b.EncodeMin()) || !bytes.Equal(a.EncodeMax(), b.EncodeMax()) {
				t.Errorf("row group %d column %s: stats min %x/%x max %x/%x nulls %d/%d", rg, name,
					a.EncodeMin(), b.EncodeMin(), a.EncodeMax(), b.EncodeMax(), a.NullCount(), b.NullCount())
			}
		}
	}
}

// recordOf wraps the pending rows' buffers, without copying, as an Arrow
// record (as FileWriter did for pqarrow); release the record before the rows.
func recordOf(schema *arrow.Schema, b *pendingRows) arrow.RecordBatch {
	b.settle()
	fields := schema.Fields()
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		c := &b.bufs.cols[i]
		var valid *memory.Buffer
		if c.bitmap {
			valid = memory.NewBufferBytes(c.valid)
		}
		var bufs []*memory.Buffer
		switch f.Type.ID() {
		case arrow.STRING:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.offs)), memory.NewBufferBytes(c.data)}
		case arrow.INT32:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.i32))}
		default:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(c.i64))}
		}
		data := array.NewData(f.Type, b.rows, bufs, nil, c.nulls, 0)
		cols[i] = array.MakeFromData(data)
		data.Release()
	}
	rec := array.NewRecordBatch(schema, cols, int64(b.rows))
	for _, a := range cols {
		a.Release()
	}
	return rec
}
