package delta

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

const (
	// maxFlatRows bounds the rows the flat reader decodes, and so what a
	// footer claiming more rows than the file holds can make it allocate;
	// a larger checkpoint is left to pqarrow.
	maxFlatRows = 1 << 20
	// maxFlatEntriesPerRow bounds the MAP or LIST entries per row, on
	// average, the flat reader decodes before leaving the file to pqarrow.
	maxFlatEntriesPerRow = 64
	flatBatch            = 1024
)

// flatLeaf holds one leaf column's definition levels and values, one
// entry per level (a value is meaningful where def == maxDef), over the
// row groups read.
type flatLeaf struct {
	col            int
	kind           flatKind
	maxDef, maxRep int16
	def            []int16
	rowStart       []int // repeated leaves: the first entry of each row
	strs           []string
	ints           []int64 // int64 and int32 leaves
	bools          []bool
}

// read appends the levels and values of the leaf's chunk in rg, which
// holds rows rows.
func (l *flatLeaf) read(rg *file.RowGroupReader, rows int64) error {
	cr, err := rg.Column(l.col)
	if err != nil {
		return err
	}
	limit, batch := rows, rows
	if l.maxRep > 0 {
		limit, batch = rows*maxFlatEntriesPerRow+flatBatch, 2*rows+8
	}
	batch = max(min(batch, flatBatch), 1)
	before, starts := len(l.def), len(l.rowStart)
	switch r := cr.(type) {
	case *file.ByteArrayColumnChunkReader:
		err = readLevels(l, r, limit, batch, func(v parquet.ByteArray) { l.strs = append(l.strs, string(v)) },
			func() { l.strs = append(l.strs, "") })
	case *file.Int64ColumnChunkReader:
		err = readLevels(l, r, limit, batch, func(v int64) { l.ints = append(l.ints, v) }, func() { l.ints = append(l.ints, 0) })
	case *file.Int32ColumnChunkReader:
		err = readLevels(l, r, limit, batch, func(v int32) { l.ints = append(l.ints, int64(v)) }, func() { l.ints = append(l.ints, 0) })
	case *file.BooleanColumnChunkReader:
		err = readLevels(l, r, limit, batch, func(v bool) { l.bools = append(l.bools, v) }, func() { l.bools = append(l.bools, false) })
	default:
		return errFlatUnfit
	}
	if err != nil {
		return err
	}
	n := int64(len(l.def) - before)
	if l.maxRep == 0 && n != rows {
		return fmt.Errorf("%d values for %d rows", n, rows)
	}
	if l.maxRep > 0 && (int64(len(l.rowStart)-starts) != rows || (n > 0 && l.rowStart[starts] != before)) {
		return fmt.Errorf("%d records in %d levels for %d rows", len(l.rowStart)-starts, n, rows)
	}
	return nil
}

// levelReader is a typed parquet column chunk reader.
type levelReader[T any] interface {
	HasNext() bool
	ReadBatch(batch int64, values []T, def, rep []int16) (levels int64, valuesRead int, err error)
}

// readLevels reads a column chunk to its end, batch levels at a time and
// at most limit levels (errFlatUnfit past that for a repeated leaf, an
// error for a flat one), calling keep for each value and null for each
// level without one.
func readLevels[T any](l *flatLeaf, r levelReader[T], limit, batch int64, keep func(T), null func()) error {
	vals, def, rep := make([]T, batch), make([]int16, batch), make([]int16, batch)
	var total int64
	for r.HasNext() {
		n, k, err := r.ReadBatch(batch, vals, def, rep)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if total += n; total > limit {
			if l.maxRep > 0 {
				return errFlatUnfit
			}
			return fmt.Errorf("more values than the row group's %d rows", limit)
		}
		j := 0
		for e := range n {
			d := l.maxDef
			if d > 0 {
				d = def[e]
			}
			if l.maxRep > 0 && rep[e] == 0 {
				l.rowStart = append(l.rowStart, len(l.def))
			}
			l.def = append(l.def, d)
			if d != l.maxDef {
				null()
				continue
			}
			if j >= k {
				return errors.New("definition levels promise more values than the page holds")
			}
			keep(vals[j])
			j++
		}
		if j != k {
			return fmt.Errorf("%d values for %d defined levels", k, j)
		}
	}
	return nil
}

// at is the first entry of row r; end is past its last.
func (l *flatLeaf) at(r int) int {
	if l.maxRep == 0 {
		return r
	}
	return l.rowStart[r]
}

func (l *flatLeaf) end(r int) int {
	if l.maxRep == 0 {
		return r + 1
	}
	if r+1 < len(l.rowStart) {
		return l.rowStart[r+1]
	}
	return len(l.def)
}

// scalar is entry e's value: nil, string, int64 or bool.
func (l *flatLeaf) scalar(e int) any {
	if l.def[e] != l.maxDef {
		return nil
	}
	switch l.kind {
	case flatString:
		return l.strs[e]
	case flatBool:
		return l.bools[e]
	}
	return l.ints[e]
}

// check reports MAP keys and values that do not line up.
func (n *flatNode) check() error {
	for _, c := range n.children {
		if err := c.check(); err != nil {
			return err
		}
	}
	if n.kind == flatMap && (len(n.leaf.def) != len(n.val.def) || !slices.Equal(n.leaf.rowStart, n.val.rowStart)) {
		return fmt.Errorf("%s: MAP keys and values do not line up", n.name)
	}
	return nil
}

// null reports whether the field is null (or absent) in row r.
func (n *flatNode) null(r int) bool {
	return n == nil || n.first.def[n.first.at(r)] < n.def
}

// value is the field in row r as arrowValue gives it: nil, string, int64,
// bool, []any (LIST), map[string]any (struct, MAP).
func (n *flatNode) value(r int) any {
	if n.null(r) {
		return nil
	}
	switch n.kind {
	case flatStruct:
		m := make(map[string]any, len(n.children))
		for _, c := range n.children {
			m[c.name] = c.value(r)
		}
		return m
	case flatMap:
		m := map[string]any{}
		n.entries(r, func(e int) { m[n.leaf.strs[e]] = n.val.scalar(e) })
		return m
	case flatList:
		out := []any{}
		n.entries(r, func(e int) { out = append(out, n.leaf.scalar(e)) })
		return out
	}
	return n.leaf.scalar(n.leaf.at(r))
}

// entries calls fn for each MAP or LIST entry of row r (a level below the
// field's own marks an empty one).
func (n *flatNode) entries(r int, fn func(e int)) {
	l := n.leaf
	for e := l.at(r); e < l.end(r); e++ {
		if l.def[e] > n.def {
			fn(e)
		}
	}
}

// strMap is a MAP<string,string> field as Add.PartitionValues holds it.
func (n *flatNode) strMap(r int) map[string]*string {
	if n.null(r) {
		return nil
	}
	m := map[string]*string{}
	n.entries(r, func(e int) {
		var v *string
		if n.val.def[e] == n.val.maxDef {
			s := n.val.strs[e]
			v = &s
		}
		m[n.leaf.strs[e]] = v
	})
	return m
}

// flatAddNodes are the add fields the reader's load decodes.
type flatAddNodes struct {
	st, path, pv, size, modTime, dataChange, stats, tags *flatNode
}

func bindAdd(n *flatNode) *flatAddNodes {
	a := &flatAddNodes{st: n}
	fields := map[string]**flatNode{"path": &a.path, "partitionValues": &a.pv, "size": &a.size,
		"modificationTime": &a.modTime, "dataChange": &a.dataChange, "stats": &a.stats, "tags": &a.tags}
	for _, c := range n.children {
		*fields[c.name] = c
	}
	return a
}

// action decodes row r as fileColumn.action does; nil when it holds no add.
func (a *flatAddNodes) action(r int) *Add {
	if a == nil || a.st.null(r) {
		return nil
	}
	path, _ := a.path.value(r).(string)
	if path == "" {
		return nil
	}
	out := &Add{Path: path, PartitionValues: a.pv.strMap(r)}
	out.Size, _ = a.size.value(r).(int64)
	out.ModificationTime, _ = a.modTime.value(r).(int64)
	out.DataChange, _ = a.dataChange.value(r).(bool)
	out.Stats, _ = a.stats.value(r).(string)
	if tags := a.tags.strMap(r); tags != nil {
		out.Tags = make(map[string]string, len(tags))
		for k, v := range tags {
			if v != nil {
				out.Tags[k] = *v
			}
		}
	}
	return out
}
