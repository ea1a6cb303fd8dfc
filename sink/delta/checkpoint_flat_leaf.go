package delta

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/deltabus/deltabus/parquetpage"
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

// flatScratch is what a flat read reuses from leaf to leaf, and through
// flatScratches from read to read: a column chunk's bytes, the page
// reader's buffers and a batch of levels. Nothing the flat reader keeps
// refers to them (strings are copies, or parts of strings made for them).
type flatScratch struct {
	chunk []byte
	pages parquetpage.Reader
	batch parquetpage.Batch
}

var flatScratches = sync.Pool{New: func() any {
	return &flatScratch{batch: parquetpage.Batch{Nulls: make([]bool, flatBatch), Defs: make([]int16, flatBatch),
		Reps: make([]int16, flatBatch), Nums: make([]int64, flatBatch), Bools: make([]bool, flatBatch),
		Starts: make([]int32, flatBatch), Ends: make([]int32, flatBatch)}}
}}

// maxPooledChunk bounds the chunk buffer a flatScratch keeps in the pool.
const maxPooledChunk = 4 << 20

// read appends the levels and values of the leaf's chunk in row group rg
// of the file of size bytes read from src, a row group of rows rows.
func (l *flatLeaf) read(src io.ReaderAt, size int64, rg *metadata.RowGroupMetaData, rows int64, sc *flatScratch) error {
	c, off, n, err := parquetpage.ChunkAt(rg, l.col, size)
	if errors.Is(err, parquetpage.ErrUnsupported) {
		return errFlatUnfit
	}
	if err != nil {
		return err
	}
	if int64(cap(sc.chunk)) < n {
		sc.chunk = make([]byte, n)
	}
	c.Data = sc.chunk[:n]
	if _, err := src.ReadAt(c.Data, off); err != nil {
		return fmt.Errorf("read column chunk [%d,+%d): %w", off, n, err)
	}
	sc.pages.Reset(c)
	limit := rows
	if l.maxRep > 0 {
		limit = rows*maxFlatEntriesPerRow + flatBatch
	}
	before, starts := len(l.def), len(l.rowStart)
	if err := l.readLevels(sc, rows, limit); err != nil {
		return err
	}
	got := int64(len(l.def) - before)
	if l.maxRep == 0 && got != rows {
		return fmt.Errorf("%d values for %d rows", got, rows)
	}
	if l.maxRep > 0 && (int64(len(l.rowStart)-starts) != rows || (got > 0 && l.rowStart[starts] != before)) {
		return fmt.Errorf("%d records in %d levels for %d rows", len(l.rowStart)-starts, got, rows)
	}
	return nil
}

// readLevels reads the chunk to its end (a flat leaf: its rows rows), a
// batch at a time and at most limit levels (errFlatUnfit past that for a
// repeated leaf, an error for a flat one), appending each level and its
// value (or the zero value) to the leaf.
func (l *flatLeaf) readLevels(sc *flatScratch, rows, limit int64) error {
	r, all := &sc.pages, &sc.batch
	for {
		n := int64(flatBatch)
		if l.maxRep == 0 {
			if n = min(n, rows-r.Levels()); n == 0 {
				return nil
			}
		}
		b := parquetpage.Batch{Nulls: all.Nulls[:n], Defs: all.Defs[:n], Reps: all.Reps[:n], Nums: all.Nums[:n],
			Bools: all.Bools[:n], Starts: all.Starts[:n], Ends: all.Ends[:n], Buf: all.Buf[:0]}
		got, err := r.Read(&b)
		all.Buf = b.Buf
		if r.Levels() > limit {
			if l.maxRep > 0 {
				return errFlatUnfit
			}
			return fmt.Errorf("more values than the row group's %d rows", limit)
		}
		l.keep(&b, got)
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, parquetpage.ErrUnsupported):
			return errFlatUnfit
		case err != nil:
			return err
		}
	}
}

// keep appends the first n levels of b to the leaf.
func (l *flatLeaf) keep(b *parquetpage.Batch, n int) {
	for e := range n {
		if l.maxRep > 0 && b.Reps[e] == 0 {
			l.rowStart = append(l.rowStart, len(l.def))
		}
		l.def = append(l.def, b.Defs[e])
		null := b.Nulls[e]
		switch l.kind {
		case flatString:
			v := ""
			switch {
			case null:
			case b.Direct:
				v = b.Text[b.Starts[e]:b.Ends[e]]
			default:
				v = string(b.Buf[b.Starts[e]:b.Ends[e]])
			}
			l.strs = append(l.strs, v)
		case flatBool:
			l.bools = append(l.bools, b.Bools[e])
		default:
			l.ints = append(l.ints, b.Nums[e])
		}
	}
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
