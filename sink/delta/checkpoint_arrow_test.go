package delta

// The checkpoint writer as it was, with arrow-go's pqarrow: the reference
// the leaf writer (checkpoint_rows.go) is checked against.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// arrowFileRows writes n file actions (adds, or removes) as their own row
// groups, built directly with Arrow builders: every column but col is null.
// head, when not nil, is written at the start of the first row group (the
// protocol, metaData and txn rows go with the first adds, so a reader of
// a small checkpoint decodes one row group). Tombstones thus sit in row
// groups of their own, which readers that do not need them skip (see
// rowGroupsWithout). Rows are built and encoded in chunks, yielding the
// processor between them (fileRowsPerChunk).
func arrowFileRows(w *pqarrow.FileWriter, head arrow.RecordBatch, col, n int, appendRow func(*array.StructBuilder, int)) error {
	b := array.NewRecordBuilder(memory.DefaultAllocator, checkpointSchema)
	defer b.Release()
	for start := 0; start < n || head != nil; start += fileRowsPerGroup {
		if err := w.NewBufferedRowGroupChecked(); err != nil {
			return err
		}
		if head != nil {
			if err := w.WriteBuffered(head); err != nil {
				return err
			}
			head = nil
		}
		for c, end := start, min(start+fileRowsPerGroup, n); c < end; c += fileRowsPerChunk {
			rec := arrowFileRecord(b, col, c, min(c+fileRowsPerChunk, end), appendRow)
			err := w.WriteBuffered(rec)
			rec.Release()
			if err != nil {
				return err
			}
			runtime.Gosched()
		}
	}
	return nil
}

// arrowFileRecord builds rows [from, to) of column col with b; the other
// columns are null.
func arrowFileRecord(b *array.RecordBuilder, col, from, to int, appendRow func(*array.StructBuilder, int)) arrow.RecordBatch {
	for i := range b.Fields() {
		if i != col {
			b.Field(i).(*array.StructBuilder).AppendNulls(to - from)
		}
	}
	sb := b.Field(col).(*array.StructBuilder)
	for i := from; i < to; i++ {
		sb.Append(true)
		appendRow(sb, i)
	}
	return b.NewRecordBatch()
}

func arrowAppendAdd(sb *array.StructBuilder, a *Add) {
	sb.FieldBuilder(0).(*array.StringBuilder).Append(a.Path)
	arrowAppendStrMap(sb.FieldBuilder(1).(*array.MapBuilder), a.PartitionValues)
	sb.FieldBuilder(2).(*array.Int64Builder).Append(a.Size)
	sb.FieldBuilder(3).(*array.Int64Builder).Append(a.ModificationTime)
	sb.FieldBuilder(4).(*array.BooleanBuilder).Append(false)
	arrowAppendStrMap(sb.FieldBuilder(5).(*array.MapBuilder), arrowStringPtrs(a.Tags))
	arrowAppendDV(sb.FieldBuilder(6).(*array.StructBuilder), a.DeletionVector)
	arrowAppendOptInt64(sb.FieldBuilder(7).(*array.Int64Builder), a.BaseRowID)
	arrowAppendOptInt64(sb.FieldBuilder(8).(*array.Int64Builder), a.DefaultRowCommitVersion)
	if sb9 := sb.FieldBuilder(9).(*array.StringBuilder); a.Stats == "" {
		sb9.AppendNull()
	} else {
		sb9.Append(a.Stats)
	}
}

// arrowAppendRemove fills the children of one remove row (no stats or tags:
// checkpoints keep tombstones for VACUUM only).
func arrowAppendRemove(sb *array.StructBuilder, r *Remove) {
	sb.FieldBuilder(0).(*array.StringBuilder).Append(r.Path)
	arrowAppendOptInt64(sb.FieldBuilder(1).(*array.Int64Builder), r.DeletionTimestamp)
	sb.FieldBuilder(2).(*array.BooleanBuilder).Append(false)
	if eb := sb.FieldBuilder(3).(*array.BooleanBuilder); r.ExtendedFileMetadata == nil {
		eb.AppendNull()
	} else {
		eb.Append(*r.ExtendedFileMetadata)
	}
	arrowAppendStrMap(sb.FieldBuilder(4).(*array.MapBuilder), r.PartitionValues)
	arrowAppendOptInt64(sb.FieldBuilder(5).(*array.Int64Builder), r.Size)
	arrowAppendDV(sb.FieldBuilder(6).(*array.StructBuilder), r.DeletionVector)
	sb.FieldBuilder(7).(*array.Int64Builder).AppendNull()
	sb.FieldBuilder(8).(*array.Int64Builder).AppendNull()
}

// arrowAppendStrMap appends a MAP<string,string> value, keys sorted; a nil map
// is null.
func arrowAppendStrMap(mb *array.MapBuilder, m map[string]*string) {
	if m == nil {
		mb.AppendNull()
		return
	}
	mb.Append(true)
	kb, vb := mb.KeyBuilder().(*array.StringBuilder), mb.ItemBuilder().(*array.StringBuilder)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kb.Append(k)
		if v := m[k]; v == nil {
			vb.AppendNull()
		} else {
			vb.Append(*v)
		}
	}
}

func arrowStringPtrs(m map[string]string) map[string]*string {
	if m == nil {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

func arrowAppendOptInt64(b *array.Int64Builder, v *int64) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(*v)
}

// arrowAppendDV appends a deletion vector descriptor, or null.
func arrowAppendDV(sb *array.StructBuilder, raw json.RawMessage) {
	var dv struct {
		StorageType    *string `json:"storageType"`
		PathOrInlineDv *string `json:"pathOrInlineDv"`
		Offset         *int32  `json:"offset"`
		SizeInBytes    *int32  `json:"sizeInBytes"`
		Cardinality    *int64  `json:"cardinality"`
		MaxRowIndex    *int64  `json:"maxRowIndex"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &dv) != nil {
		sb.AppendNull()
		return
	}
	sb.Append(true)
	for i, s := range []*string{dv.StorageType, dv.PathOrInlineDv} {
		if b := sb.FieldBuilder(i).(*array.StringBuilder); s == nil {
			b.AppendNull()
		} else {
			b.Append(*s)
		}
	}
	for i, v := range []*int32{dv.Offset, dv.SizeInBytes} {
		if b := sb.FieldBuilder(2 + i).(*array.Int32Builder); v == nil {
			b.AppendNull()
		} else {
			b.Append(*v)
		}
	}
	arrowAppendOptInt64(sb.FieldBuilder(4).(*array.Int64Builder), dv.Cardinality)
	arrowAppendOptInt64(sb.FieldBuilder(5).(*array.Int64Builder), dv.MaxRowIndex)
}

// kv renders a string map in Arrow's JSON form for MAP columns.
func kv[V string | *string](m map[string]V) []map[string]any {
	out := make([]map[string]any, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, map[string]any{"key": k, "value": m[k]})
	}
	return out
}

// arrowStateRows returns the checkpoint rows of snap other than files, in
// Arrow JSON form: protocol, metaData, txns and domains.
func arrowStateRows(snap *Snapshot) []map[string]any {
	p, m := snap.Protocol, snap.Metadata
	rows := []map[string]any{{"protocol": map[string]any{
		"minReaderVersion": p.MinReaderVersion, "minWriterVersion": p.MinWriterVersion,
		"readerFeatures": p.ReaderFeatures, "writerFeatures": p.WriterFeatures}}}
	rows = append(rows, map[string]any{"metaData": map[string]any{
		"id": m.ID, "name": m.Name, "description": m.Description,
		"format":       map[string]any{"provider": m.Format.Provider, "options": kv(m.Format.Options)},
		"schemaString": m.SchemaString, "partitionColumns": nonNil(m.PartitionColumns),
		"configuration": kv(m.Configuration), "createdTime": m.CreatedTime}})
	for _, id := range slices.Sorted(maps.Keys(snap.Txns)) {
		t := snap.Txns[id]
		rows = append(rows, map[string]any{"txn": map[string]any{"appId": t.AppID, "version": t.Version, "lastUpdated": t.LastUpdated}})
	}
	for _, d := range slices.Sorted(maps.Keys(snap.Domains)) {
		rows = append(rows, map[string]any{"domainMetadata": snap.Domains[d]})
	}
	return rows
}

// encodeCheckpointArrow is EncodeCheckpoint as it was written with
// pqarrow, the oracle of TestCheckpointLeavesMatchArrow.
func encodeCheckpointArrow(snap *Snapshot, now time.Time) (data []byte, rows, numAdds int, err error) {
	state := arrowStateRows(snap)
	js, err := json.Marshal(state)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("encode checkpoint rows: %w", err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, checkpointSchema, bytes.NewReader(js))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("build checkpoint record: %w", err)
	}
	defer rec.Release()
	adds := sortedAdds(snap.Files)
	removes := liveTombstones(snap, now)
	var buf bytes.Buffer
	// Column statistics only where a reader uses them (to skip the row
	// groups of tombstones): min/max of paths and stats strings would only
	// fatten the footer every load parses. No dictionaries: paths and
	// stats are unique, and a dictionary page is one more page (and
	// decoder) per column chunk for every load to read; the month
	// benchmark's checkpoints come out about as big (-4% to +3%).
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy("DeltaBus"), parquet.WithMaxRowGroupLength(1<<20),
		parquet.WithStats(false), parquet.WithStatsFor("remove.path", true),
		parquet.WithDictionaryDefault(false))
	w, err := pqarrow.NewFileWriter(checkpointSchema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, 0, 0, fmt.Errorf("checkpoint writer: %w", err)
	}
	err = arrowFileRows(w, rec, cpAdd, len(adds), func(sb *array.StructBuilder, i int) { arrowAppendAdd(sb, adds[i]) })
	if err == nil {
		err = arrowFileRows(w, nil, cpRemove, len(removes), func(sb *array.StructBuilder, i int) { arrowAppendRemove(sb, &removes[i]) })
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, 0, 0, fmt.Errorf("close checkpoint: %w", err)
	}
	return buf.Bytes(), len(state) + len(adds) + len(removes), len(adds), nil
}

// TestCheckpointLeavesMatchArrow: a checkpoint written from its leaves
// reads, through pqarrow, as the same table as arrow-go's writer's
// checkpoint of the same state, row group by row group, with the same
// schema, row counts and statistics of remove.path, for every shape the
// flat reader decodes and for a table large enough for several row
// groups of adds and of tombstones.
func TestCheckpointLeavesMatchArrow(t *testing.T) {
	snaps := flatSnapshots()
	snaps["many"] = variedSnapshot(fileRowsPerGroup+1500, fileRowsPerGroup+20)
	now := time.UnixMilli(2000)
	for name, snap := range snaps {
		got, gotRows, gotAdds, err := EncodeCheckpoint(snap, now)
		if err != nil {
			t.Fatal(err)
		}
		want, wantRows, wantAdds, err := encodeCheckpointArrow(snap, now)
		if err != nil {
			t.Fatal(err)
		}
		if gotRows != wantRows || gotAdds != wantAdds {
			t.Errorf("%s: %d rows, %d adds; arrow-go's writer %d, %d", name, gotRows, gotAdds, wantRows, wantAdds)
		}
		sameParquet(t, name, got, want)
	}
}

// sameParquet compares two checkpoint files row group by row group.
func sameParquet(t *testing.T, name string, got, want []byte) {
	t.Helper()
	g, err := openParquet(got)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer g.Close()
	w, err := openParquet(want)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !g.MetaData().Schema.Equals(w.MetaData().Schema) {
		t.Fatalf("%s: schemas differ", name)
	}
	if g.NumRowGroups() != w.NumRowGroups() {
		t.Fatalf("%s: %d row groups, want %d", name, g.NumRowGroups(), w.NumRowGroups())
	}
	gr, _ := pqarrow.NewFileReader(g, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	wr, _ := pqarrow.NewFileReader(w, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	col := g.MetaData().Schema.ColumnIndexByName("remove.path")
	leaves := make([]int, g.MetaData().Schema.NumColumns())
	for i := range leaves {
		leaves[i] = i
	}
	for rg := range g.NumRowGroups() {
		if a, b := g.MetaData().RowGroup(rg).NumRows(), w.MetaData().RowGroup(rg).NumRows(); a != b {
			t.Fatalf("%s: row group %d has %d rows, want %d", name, rg, a, b)
		}
		sameStats(t, fmt.Sprintf("%s: row group %d", name, rg), g, w, rg, col)
		gt, err := gr.ReadRowGroups(context.Background(), leaves, []int{rg})
		if err != nil {
			t.Fatalf("%s: row group %d: %v", name, rg, err)
		}
		wt, err := wr.ReadRowGroups(context.Background(), leaves, []int{rg})
		if err != nil {
			t.Fatal(err)
		}
		if gt.NumCols() != int64(len(checkpointSchema.Fields())) || gt.NumRows() != wt.NumRows() {
			t.Fatalf("%s: row group %d reads as %d columns of %d rows, want %d of %d", name, rg, gt.NumCols(), gt.NumRows(), len(checkpointSchema.Fields()), wt.NumRows())
		}
		if !array.TableEqual(gt, wt) {
			t.Errorf("%s: row group %d reads differently from arrow-go's", name, rg)
		}
		gt.Release()
		wt.Release()
	}
}

// sameStats compares the statistics and value counts of column col.
func sameStats(t *testing.T, where string, g, w *file.Reader, rg, col int) {
	t.Helper()
	gc, err1 := g.MetaData().RowGroup(rg).ColumnChunk(col)
	wc, err2 := w.MetaData().RowGroup(rg).ColumnChunk(col)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	gs, _ := gc.Statistics()
	ws, _ := wc.Statistics()
	if gc.NumValues() != wc.NumValues() || (gs == nil) != (ws == nil) {
		t.Fatalf("%s: remove.path has %d values (stats %v), want %d (stats %v)", where, gc.NumValues(), gs != nil, wc.NumValues(), ws != nil)
	}
	if gs == nil {
		return
	}
	ge, err1 := gs.Encode()
	we, err2 := ws.Encode()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if gs.NullCount() != ws.NullCount() || gs.HasMinMax() != ws.HasMinMax() || !bytes.Equal(ge.Min, we.Min) || !bytes.Equal(ge.Max, we.Max) {
		t.Errorf("%s: remove.path statistics: nulls %d, min %q, max %q; want %d, %q, %q",
			where, gs.NullCount(), ge.Min, ge.Max, ws.NullCount(), we.Min, we.Max)
	}
}

// variedSnapshot is a table of adds and live tombstones whose optional
// fields vary from file to file: partition values null, empty, with NULL
// values; stats and tags present or not; deletion vectors, valid or not.
func variedSnapshot(adds, removes int) *Snapshot {
	r := rand.New(rand.NewPCG(1, 2))
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	pv := func() map[string]*string {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return map[string]*string{}
		case 2:
			return map[string]*string{"topic": str(fmt.Sprint("t", r.IntN(9))), "day": nil}
		}
		return map[string]*string{"topic": str("x")}
	}
	dv := func() json.RawMessage {
		switch r.IntN(5) {
		case 0:
			return json.RawMessage(`{"storageType":"u","pathOrInlineDv":"ab","offset":1,"sizeInBytes":40,"cardinality":3}`)
		case 1:
			return json.RawMessage(`not json`)
		}
		return nil
	}
	s := flatSnapshots()["full"]
	s.Files, s.Tombstones = map[string]Add{}, map[string]Remove{}
	for i := range adds {
		a := Add{Path: fmt.Sprintf("part-%06d.parquet", i), PartitionValues: pv(), Size: r.Int64N(1 << 20),
			ModificationTime: r.Int64(), DeletionVector: dv()}
		if r.IntN(3) > 0 {
			a.Stats = fmt.Sprintf(`{"numRecords":%d,"minValues":{"k":"%x"}}`, r.IntN(100), r.Int64())
		}
		if r.IntN(4) == 0 {
			a.Tags = map[string]string{"z": "1", "a": ""}
		}
		if r.IntN(4) == 0 {
			a.BaseRowID, a.DefaultRowCommitVersion = i64(int64(i)), i64(7)
		}
		s.Files[a.Path] = a
	}
	for i := range removes {
		rm := Remove{Path: fmt.Sprintf("old-%06d.parquet", i), DeletionTimestamp: i64(1900), PartitionValues: pv(), DeletionVector: dv()}
		if r.IntN(2) == 0 {
			rm.Size, rm.ExtendedFileMetadata = i64(r.Int64N(100)), new(r.IntN(2) == 0)
		}
		s.Tombstones[rm.Path] = rm
	}
	return s
}
