package delta

import (
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

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
