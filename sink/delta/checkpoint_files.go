package delta

import (
	"encoding/json"
	"maps"
	"runtime"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Top-level columns of checkpointSchema.
const (
	cpTxn = iota
	cpAdd
	cpRemove
)

// fileRowsPerGroup is the number of add or remove rows per row group.
const fileRowsPerGroup = 64 << 10

// fileRowsPerChunk is how many rows are built and encoded between two
// yields of the checkpointer's goroutine: a background checkpoint of a
// large table takes tens of milliseconds of CPU, and with one P (the
// relay's default on two cores) the writer's commit, woken from an fsync,
// would otherwise wait for the scheduler's 10 ms preemption, again and
// again. A chunk is about a millisecond of work.
const fileRowsPerChunk = 1024

// writeFileRows writes n file actions (adds, or removes) as their own row
// groups, built directly with Arrow builders: every column but col is null.
// head, when not nil, is written at the start of the first row group (the
// protocol, metaData and txn rows go with the first adds, so a reader of
// a small checkpoint decodes one row group). Tombstones thus sit in row
// groups of their own, which readers that do not need them skip (see
// rowGroupsWithout). Rows are built and encoded in chunks, yielding the
// processor between them (fileRowsPerChunk).
func writeFileRows(w *pqarrow.FileWriter, head arrow.RecordBatch, col, n int, appendRow func(*array.StructBuilder, int)) error {
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
			rec := fileRecord(b, col, c, min(c+fileRowsPerChunk, end), appendRow)
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

// fileRecord builds rows [from, to) of column col with b; the other
// columns are null.
func fileRecord(b *array.RecordBuilder, col, from, to int, appendRow func(*array.StructBuilder, int)) arrow.RecordBatch {
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

func appendAdd(sb *array.StructBuilder, a *Add) {
	sb.FieldBuilder(0).(*array.StringBuilder).Append(a.Path)
	appendStrMap(sb.FieldBuilder(1).(*array.MapBuilder), a.PartitionValues)
	sb.FieldBuilder(2).(*array.Int64Builder).Append(a.Size)
	sb.FieldBuilder(3).(*array.Int64Builder).Append(a.ModificationTime)
	sb.FieldBuilder(4).(*array.BooleanBuilder).Append(false)
	appendStrMap(sb.FieldBuilder(5).(*array.MapBuilder), stringPtrs(a.Tags))
	appendDV(sb.FieldBuilder(6).(*array.StructBuilder), a.DeletionVector)
	appendOptInt64(sb.FieldBuilder(7).(*array.Int64Builder), a.BaseRowID)
	appendOptInt64(sb.FieldBuilder(8).(*array.Int64Builder), a.DefaultRowCommitVersion)
	if sb9 := sb.FieldBuilder(9).(*array.StringBuilder); a.Stats == "" {
		sb9.AppendNull()
	} else {
		sb9.Append(a.Stats)
	}
}

// appendRemove fills the children of one remove row (no stats or tags:
// checkpoints keep tombstones for VACUUM only).
func appendRemove(sb *array.StructBuilder, r *Remove) {
	sb.FieldBuilder(0).(*array.StringBuilder).Append(r.Path)
	appendOptInt64(sb.FieldBuilder(1).(*array.Int64Builder), r.DeletionTimestamp)
	sb.FieldBuilder(2).(*array.BooleanBuilder).Append(false)
	if eb := sb.FieldBuilder(3).(*array.BooleanBuilder); r.ExtendedFileMetadata == nil {
		eb.AppendNull()
	} else {
		eb.Append(*r.ExtendedFileMetadata)
	}
	appendStrMap(sb.FieldBuilder(4).(*array.MapBuilder), r.PartitionValues)
	appendOptInt64(sb.FieldBuilder(5).(*array.Int64Builder), r.Size)
	appendDV(sb.FieldBuilder(6).(*array.StructBuilder), r.DeletionVector)
	sb.FieldBuilder(7).(*array.Int64Builder).AppendNull()
	sb.FieldBuilder(8).(*array.Int64Builder).AppendNull()
}

// appendStrMap appends a MAP<string,string> value, keys sorted; a nil map
// is null.
func appendStrMap(mb *array.MapBuilder, m map[string]*string) {
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

func stringPtrs(m map[string]string) map[string]*string {
	if m == nil {
		return nil
	}
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

func appendOptInt64(b *array.Int64Builder, v *int64) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(*v)
}

// appendDV appends a deletion vector descriptor, or null.
func appendDV(sb *array.StructBuilder, raw json.RawMessage) {
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
	appendOptInt64(sb.FieldBuilder(4).(*array.Int64Builder), dv.Cardinality)
	appendOptInt64(sb.FieldBuilder(5).(*array.Int64Builder), dv.MaxRowIndex)
}

// fileColumn decodes the add or remove column of checkpoint record batches
// without going through JSON, when its children have the expected Arrow
// types (any missing child reads as null); ok is false otherwise, and the
// generic decoding is used.
type fileColumn struct {
	st                                     *array.Struct
	path, stats                            *array.String
	size, modTime, deletedAt, baseRow, rcv *array.Int64
	dataChange, extended                   *array.Boolean
	partitionValues, tags                  *array.Map
	dv                                     arrow.Array
}

func newFileColumn(arr arrow.Array) (*fileColumn, bool) {
	st, ok := arr.(*array.Struct)
	if !ok {
		return nil, false
	}
	c := &fileColumn{st: st}
	strs := map[string]**array.String{"path": &c.path, "stats": &c.stats}
	longs := map[string]**array.Int64{"size": &c.size, "modificationTime": &c.modTime, "deletionTimestamp": &c.deletedAt,
		"baseRowId": &c.baseRow, "defaultRowCommitVersion": &c.rcv}
	bools := map[string]**array.Boolean{"dataChange": &c.dataChange, "extendedFileMetadata": &c.extended}
	mapCols := map[string]**array.Map{"partitionValues": &c.partitionValues, "tags": &c.tags}
	for i, f := range st.DataType().(*arrow.StructType).Fields() {
		child := st.Field(i)
		if !bind(strs, f.Name, child) || !bind(longs, f.Name, child) || !bind(bools, f.Name, child) || !bind(mapCols, f.Name, child) {
			return nil, false
		}
		if f.Name == "deletionVector" {
			c.dv = child
		}
	}
	if (c.partitionValues != nil && !stringMap(c.partitionValues)) || (c.tags != nil && !stringMap(c.tags)) {
		return nil, false
	}
	return c, c.path != nil
}

// bind stores child in the field named name, if fields has one; false when
// child is not of that field's Arrow type.
func bind[T arrow.Array](fields map[string]*T, name string, child arrow.Array) bool {
	dst, ok := fields[name]
	if !ok {
		return true
	}
	v, ok := child.(T)
	*dst = v
	return ok
}

// stringMap reports whether a MAP has string keys and values.
func stringMap(m *array.Map) bool {
	_, k := m.Keys().(*array.String)
	_, v := m.Items().(*array.String)
	return k && v
}

// action decodes row i as an add or remove action; nil when the row holds
// none (a null struct, or one whose members are all null).
func (c *fileColumn) action(name string, i int) *Action {
	if c.st.IsNull(i) || c.path.IsNull(i) || c.path.Value(i) == "" {
		return nil
	}
	pv := strMapAt(c.partitionValues, i)
	dv := dvAt(c.dv, i)
	if name == "add" {
		a := &Add{Path: c.path.Value(i), PartitionValues: pv, DeletionVector: dv,
			BaseRowID: optInt64At(c.baseRow, i), DefaultRowCommitVersion: optInt64At(c.rcv, i)}
		if v := optInt64At(c.size, i); v != nil {
			a.Size = *v
		}
		if v := optInt64At(c.modTime, i); v != nil {
			a.ModificationTime = *v
		}
		a.DataChange = c.dataChange != nil && c.dataChange.IsValid(i) && c.dataChange.Value(i)
		if c.stats != nil && c.stats.IsValid(i) {
			a.Stats = c.stats.Value(i)
		}
		if tags := strMapAt(c.tags, i); tags != nil {
			a.Tags = make(map[string]string, len(tags))
			for k, v := range tags {
				if v != nil {
					a.Tags[k] = *v
				}
			}
		}
		return &Action{Add: a}
	}
	r := &Remove{Path: c.path.Value(i), PartitionValues: pv, DeletionVector: dv,
		DeletionTimestamp: optInt64At(c.deletedAt, i), Size: optInt64At(c.size, i)}
	r.DataChange = c.dataChange != nil && c.dataChange.IsValid(i) && c.dataChange.Value(i)
	if c.extended != nil && c.extended.IsValid(i) {
		v := c.extended.Value(i)
		r.ExtendedFileMetadata = &v
	}
	return &Action{Remove: r}
}

func optInt64At(a *array.Int64, i int) *int64 {
	if a == nil || a.IsNull(i) {
		return nil
	}
	v := a.Value(i)
	return &v
}

// strMapAt returns a MAP<string,string> value; nil when absent or null.
func strMapAt(m *array.Map, i int) map[string]*string {
	if m == nil || m.IsNull(i) {
		return nil
	}
	keys, items := m.Keys().(*array.String), m.Items().(*array.String)
	start, end := m.ValueOffsets(i)
	out := make(map[string]*string, end-start)
	for j := int(start); j < int(end); j++ {
		if items.IsNull(j) {
			out[keys.Value(j)] = nil
			continue
		}
		v := items.Value(j)
		out[keys.Value(j)] = &v
	}
	return out
}

// dvAt renders a deletion vector descriptor as the JSON a commit holds.
func dvAt(a arrow.Array, i int) json.RawMessage {
	if a == nil || a.IsNull(i) {
		return nil
	}
	m, ok := arrowValue(a, i).(map[string]any)
	if !ok {
		return nil
	}
	dropNulls(m)
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(jsonSafe(m))
	if err != nil {
		return nil
	}
	return b
}
