package delta

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/deltabus/deltabus/parquetpage"
)

// Checkpoints are written by parquetpage from their leaves: each row is
// shredded straight into the definition and repetition levels and the
// values of the 53 leaf columns of checkpointSchema, with no Arrow
// arrays in between (arrow-go's pqarrow allocated about 6 KB per add of
// the relay's, and took twice the CPU: BenchmarkEncodeCheckpoint).

// cpSchema is checkpointSchema as Parquet (MAPs and LISTs laid out as
// pqarrow lays them out, which is delta-spark's layout), with the
// statistics of remove.path only (see EncodeCheckpoint).
var cpSchema = func() *parquetpage.Schema {
	specs := make([]parquetpage.Spec, cpLeaves.pq.NumColumns())
	specs[cpLeaf("remove.path")].Statistics = true
	s, err := parquetpage.NewNestedSchema(cpLeaves.pq, specs, "DeltaBus")
	if err != nil {
		panic(fmt.Sprintf("checkpoint schema: %v", err))
	}
	return s
}()

// cpLeaf is the index of the leaf column at path.
func cpLeaf(path string) int {
	i := cpLeaves.pq.ColumnIndexByName(path)
	if i < 0 {
		panic("checkpoint schema has no column " + path)
	}
	return i
}

// cpLeaves are the checkpoint's leaf columns by name, and the range of
// leaves of each top-level column.
var cpLeaves = func() (l struct {
	pq     *schema.Schema
	top    [6][2]int // [first, end) of txn, add, remove, metaData, protocol, domainMetadata
	maxDef []uint8
}) {
	var err error
	if l.pq, err = pqarrow.ToParquet(checkpointSchema, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps()); err != nil {
		panic(fmt.Sprintf("checkpoint schema: %v", err))
	}
	for i := range l.pq.NumColumns() {
		l.maxDef = append(l.maxDef, uint8(l.pq.Column(i).MaxDefinitionLevel()))
	}
	for t := range l.top {
		first := l.pq.Root().Field(t).Name() + "."
		l.top[t] = [2]int{-1, -1}
		for i := range l.pq.NumColumns() {
			if strings.HasPrefix(l.pq.Column(i).Path(), first) {
				if l.top[t][0] < 0 {
					l.top[t][0] = i
				}
				l.top[t][1] = i + 1
			}
		}
	}
	return l
}()

// cpShred holds one row group being shredded; shreds are pooled, so
// their buffers are reused from checkpoint to checkpoint.
type cpShred struct {
	leaves []parquetpage.Leaf
	rows   int
	keys   []string // a map's keys, sorted (strMap)
}

var cpShreds = sync.Pool{New: func() any {
	s := &cpShred{leaves: make([]parquetpage.Leaf, len(cpLeaves.maxDef))}
	for i := range s.leaves {
		if cpLeaves.pq.Column(i).MaxRepetitionLevel() > 0 {
			s.leaves[i].Rep = []uint8{}
		}
	}
	return s
}}

// reset empties s for a row group of about rows rows, each leaf with room
// for one level per row.
func (s *cpShred) reset(rows int) {
	for i := range s.leaves {
		l := &s.leaves[i]
		clear(l.Str) // no strings of earlier checkpoints stay reachable
		l.Def, l.Str, l.I32, l.I64, l.Bool = slices.Grow(l.Def[:0], rows), l.Str[:0], l.I32[:0], l.I64[:0], l.Bool[:0]
		if l.Rep != nil {
			l.Rep = slices.Grow(l.Rep[:0], rows)
		}
	}
	s.rows = 0
}

// row starts a row holding top-level column top: every other top-level
// column is null in it.
func (s *cpShred) row(top int) {
	s.rows++
	for t, r := range cpLeaves.top {
		if t == top {
			continue
		}
		for i := r[0]; i < r[1]; i++ {
			s.level(i, 0, 0)
		}
	}
}

// level appends an entry with no value at leaf i.
func (s *cpShred) level(i int, def, rep uint8) {
	l := &s.leaves[i]
	l.Def = append(l.Def, def)
	if l.Rep != nil {
		l.Rep = append(l.Rep, rep)
	}
}

// str appends string v at leaf i (at its maximum definition level).
func (s *cpShred) str(i int, v string, rep uint8) {
	s.level(i, cpLeaves.maxDef[i], rep)
	s.leaves[i].Str = append(s.leaves[i].Str, v)
}

// opt appends *v with set, or a NULL when v is nil, at the optional
// leaf i of a present struct.
func opt[T any](s *cpShred, i int, v *T, set func(int, T)) {
	if v == nil {
		s.level(i, cpLeaves.maxDef[i]-1, 0)
		return
	}
	set(i, *v)
}

// optStr is opt of a string (never repeated).
func (s *cpShred) optStr(i int, v *string) {
	opt(s, i, v, func(i int, v string) { s.str(i, v, 0) })
}

func (s *cpShred) i64(i int, v int64) {
	s.level(i, cpLeaves.maxDef[i], 0)
	s.leaves[i].I64 = append(s.leaves[i].I64, v)
}

func (s *cpShred) i32(i int, v int32) {
	s.level(i, cpLeaves.maxDef[i], 0)
	s.leaves[i].I32 = append(s.leaves[i].I32, v)
}

func (s *cpShred) boolean(i int, v bool) {
	s.level(i, cpLeaves.maxDef[i], 0)
	s.leaves[i].Bool = append(s.leaves[i].Bool, v)
}

// strMap appends a MAP<string,string> of a present struct, keys sorted,
// at its key and value leaves (key_value is repeated, key required,
// value optional); a nil map is NULL, an empty one an empty MAP.
func (s *cpShred) strMap(key, val int, m map[string]*string, null bool) {
	kd := cpLeaves.maxDef[key] // key_value present
	if null || len(m) == 0 {
		d := kd - 1 // an empty map
		if null {
			d = kd - 2
		}
		s.level(key, d, 0)
		s.level(val, d, 0)
		return
	}
	rep := uint8(0)
	for _, k := range s.sortedKeys(maps.Keys(m)) {
		s.str(key, k, rep)
		if v := m[k]; v == nil {
			s.level(val, kd, rep)
		} else {
			s.str(val, *v, rep)
		}
		rep = 1
	}
}

// plainMap is strMap of a map without NULL values.
func (s *cpShred) plainMap(key, val int, m map[string]string, null bool) {
	if null || len(m) == 0 {
		s.strMap(key, val, nil, null)
		return
	}
	rep := uint8(0)
	for _, k := range s.sortedKeys(maps.Keys(m)) {
		s.str(key, k, rep)
		s.str(val, m[k], rep)
		rep = 1
	}
}

// sortedKeys returns keys sorted, in s's scratch.
func (s *cpShred) sortedKeys(keys iter.Seq[string]) []string {
	s.keys = s.keys[:0]
	for k := range keys {
		s.keys = append(s.keys, k)
	}
	slices.Sort(s.keys)
	return s.keys
}

// list appends a LIST<string> of a present struct (list repeated,
// element optional); NULL when null.
func (s *cpShred) list(elem int, items []string, null bool) {
	ed := cpLeaves.maxDef[elem]
	switch {
	case null:
		s.level(elem, ed-3, 0)
	case len(items) == 0:
		s.level(elem, ed-2, 0)
	}
	for k, v := range items {
		s.str(elem, v, uint8(min(k, 1)))
	}
}

// deletionVector appends a deletion vector descriptor, or NULL, at the
// six leaves from first (storageType, pathOrInlineDv, offset,
// sizeInBytes, cardinality, maxRowIndex). A descriptor that is not
// valid JSON is written as NULL, as before.
func (s *cpShred) deletionVector(first int, raw json.RawMessage) {
	var dv struct {
		StorageType    *string `json:"storageType"`
		PathOrInlineDv *string `json:"pathOrInlineDv"`
		Offset         *int32  `json:"offset"`
		SizeInBytes    *int32  `json:"sizeInBytes"`
		Cardinality    *int64  `json:"cardinality"`
		MaxRowIndex    *int64  `json:"maxRowIndex"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &dv) != nil {
		for i := first; i < first+6; i++ {
			s.level(i, cpLeaves.maxDef[i]-2, 0)
		}
		return
	}
	s.optStr(first, dv.StorageType)
	s.optStr(first+1, dv.PathOrInlineDv)
	opt(s, first+2, dv.Offset, s.i32)
	opt(s, first+3, dv.SizeInBytes, s.i32)
	opt(s, first+4, dv.Cardinality, s.i64)
	opt(s, first+5, dv.MaxRowIndex, s.i64)
}
