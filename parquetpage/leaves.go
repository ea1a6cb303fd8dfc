package parquetpage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/deltabus/deltabus/coop"
)

// NewNestedSchema returns a schema of any nesting (groups, MAPs, LISTs)
// of BYTE_ARRAY, INT32, INT64 and BOOLEAN leaves, written leaf by leaf
// from their levels (File.WriteLeaves), PLAIN, never with a dictionary.
// specs has one Spec per leaf column, in the schema's order; Statistics
// is allowed on BYTE_ARRAY and number leaves.
func NewNestedSchema(pq *schema.Schema, specs []Spec, createdBy string) (*Schema, error) {
	if pq.NumColumns() != len(specs) {
		return nil, fmt.Errorf("parquet schema has %d columns, %d specs given", pq.NumColumns(), len(specs))
	}
	s := &Schema{pq: pq, cols: make([]colSpec, len(specs)), nested: true}
	for i, sp := range specs {
		col := pq.Column(i)
		if sp.Dictionary {
			return nil, fmt.Errorf("column %s: nested schemas are written without dictionaries", col.Path())
		}
		if col.MaxDefinitionLevel() > math.MaxUint8 {
			return nil, fmt.Errorf("column %s: nested %d levels deep, more than %d", col.Path(), col.MaxDefinitionLevel(), math.MaxUint8)
		}
		cs := colSpec{maxDef: col.MaxDefinitionLevel(), maxRep: col.MaxRepetitionLevel(), stats: sp.Statistics}
		switch col.PhysicalType() {
		case parquet.Types.ByteArray:
		case parquet.Types.Int32:
			cs.width = 4
		case parquet.Types.Int64:
			cs.width = 8
		case parquet.Types.Boolean:
			cs.boolean = true
			if sp.Statistics {
				return nil, fmt.Errorf("column %s: no statistics are written for booleans", col.Path())
			}
		default:
			return nil, fmt.Errorf("column %s: physical type %s is not written", col.Path(), col.PhysicalType())
		}
		s.cols[i] = cs
	}
	s.props = parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithCreatedBy(createdBy))
	return s, nil
}

// Leaf is one leaf column of a row group of a nested schema, shredded:
// one definition level per entry in Def and, for a repeated column, one
// repetition level per entry in Rep (nil otherwise; an entry with
// repetition level 0 starts a row; levels fit a byte, NewNestedSchema
// refuses deeper schemas). The values are those of the entries
// at the column's maximum definition level, in order: byte arrays in
// Str (referred to, not copied: the strings a caller already holds),
// INT32 in I32, INT64 in I64, BOOLEAN in Bool.
type Leaf struct {
	Def, Rep []uint8
	Str      []string
	I32      []int32
	I64      []int64
	Bool     []bool
}

// values is how many values l holds for a column of spec.
func (l *Leaf) values(spec *colSpec) int {
	switch {
	case spec.boolean:
		return len(l.Bool)
	case spec.width == 4:
		return len(l.I32)
	case spec.width == 8:
		return len(l.I64)
	}
	return len(l.Str)
}

// WriteLeaves encodes rows rows, given as their leaves (one per schema
// column), as the next row group of a file of a nested schema. The
// processor is yielded between pages (File.Yield), so a long encoding in
// the background leaves it to other goroutines often. leaves are only
// read, and not kept past the return.
func (f *File) WriteLeaves(rows int, leaves []Leaf) error {
	if f.err != nil {
		return f.err
	}
	if err := f.s.checkLeaves(rows, leaves); err != nil {
		return err // nothing written: the file stays usable
	}
	return f.encodeRowGroup(func(e *encoder) error { return f.writeLeaves(e, rows, leaves) })
}

func (f *File) writeLeaves(e *encoder, rows int, leaves []Leaf) error {
	return f.writeGroup(rows, func(i int, spec *colSpec) (chunk, error) {
		info, err := e.writeLeafChunk(&f.out, spec, &leaves[i], &f.yield)
		return chunk{info: info, values: len(leaves[i].Def)}, err
	}, func(i int, spec *colSpec, _ chunk) metadata.EncodedStatistics {
		return e.leafStats(spec, &leaves[i])
	})
}

// checkLeaves validates the shape of a row group before anything is
// written: levels in range, rows starting where the repetition levels
// say, as many values as entries at the maximum definition level.
func (s *Schema) checkLeaves(rows int, leaves []Leaf) error {
	if !s.nested {
		return errors.New("leaves are written to nested schemas only (NewNestedSchema)")
	}
	return s.checkColumns(len(leaves), rows, func(i int) error { return s.cols[i].checkLeaf(&leaves[i], rows) })
}

func (cs *colSpec) checkLeaf(l *Leaf, rows int) error {
	if (cs.maxRep == 0) != (l.Rep == nil) || (l.Rep != nil && len(l.Rep) != len(l.Def)) {
		return fmt.Errorf("%d repetition levels for %d entries (maximum level %d)", len(l.Rep), len(l.Def), cs.maxRep)
	}
	starts, present := len(l.Def), 0
	if l.Rep != nil {
		starts = 0
		for k, r := range l.Rep {
			if r > uint8(cs.maxRep) || (k == 0 && r != 0) {
				return fmt.Errorf("repetition level %d at entry %d (maximum %d)", r, k, cs.maxRep)
			}
			if r == 0 {
				starts++
			}
		}
	}
	if starts != rows {
		return fmt.Errorf("%d rows in the levels, %d given", starts, rows)
	}
	for k, d := range l.Def {
		if d > uint8(cs.maxDef) {
			return fmt.Errorf("definition level %d at entry %d (maximum %d)", d, k, cs.maxDef)
		}
		if d == uint8(cs.maxDef) {
			present++
		}
	}
	if n := l.values(cs); n != present {
		return fmt.Errorf("%d values for %d entries at the maximum definition level", n, present)
	}
	return nil
}

// writeLeafChunk writes leaf l as a column chunk of PLAIN data pages v1,
// each ending before an entry that starts a row.
func (e *encoder) writeLeafChunk(out *sink, spec *colSpec, l *Leaf, y *coop.Yielder) (chunkInfo, error) {
	info := chunkInfo{dataOffset: out.off}
	start, vals := out.off, 0
	for from := 0; from < len(l.Def); {
		to, present := leafPageEnd(spec, l, from, vals)
		e.leafPage(spec, l, from, to, vals, present)
		if err := e.writePage(out, pageHeader{typ: pageData, numValues: int32(to - from), encoding: encPlain}, &info); err != nil {
			return info, fmt.Errorf("data page of entries %d-%d: %w", from, to, err)
		}
		info.dataPages++
		from, vals = to, vals+present
		y.Yield()
	}
	info.compressed = out.off - start
	return info, nil
}

// leafPageEnd returns the end of the page starting at entry from, whose
// first value is value vals, and the number of its values: at most
// maxPageRows entries and, past its first row, about pageBytes of values,
// ending before an entry with repetition level 0 (or at the last entry).
func leafPageEnd(spec *colSpec, l *Leaf, from, vals int) (int, int) {
	size, present, to := 0, 0, from
	for to < len(l.Def) {
		if to > from && (l.Rep == nil || l.Rep[to] == 0) && (to-from >= maxPageRows || size > pageBytes) {
			break
		}
		if l.Def[to] == uint8(spec.maxDef) {
			size += spec.plainSize(l, vals+present)
			present++
		}
		to++
	}
	return to, present
}

// plainSize is the PLAIN size of value j of l (booleans count as a byte).
func (cs *colSpec) plainSize(l *Leaf, j int) int {
	switch {
	case cs.boolean:
		return 1
	case cs.width > 0:
		return cs.width
	}
	return 4 + len(l.Str[j])
}

// leafPage puts in e.page the uncompressed page of entries [from, to):
// repetition levels, definition levels (each with its 4-byte length, when
// the column has them), then values [vals, vals+present) PLAIN.
func (e *encoder) leafPage(spec *colSpec, l *Leaf, from, to, vals, present int) {
	e.page = e.page[:0]
	if spec.maxRep > 0 {
		e.page = appendLevelSection(e.page, l.Rep[from:to], spec.maxRep)
	}
	if spec.maxDef > 0 {
		e.page = appendLevelSection(e.page, l.Def[from:to], spec.maxDef)
	}
	end := vals + present
	switch {
	case spec.boolean:
		e.page = appendBools(e.page, l.Bool[vals:end])
	case spec.width == 4:
		e.page = appendInt32s(e.page, l.I32[vals:end], nil, 0)
	case spec.width == 8:
		e.page = appendInt64s(e.page, l.I64[vals:end], nil, 0)
	default:
		for _, v := range l.Str[vals:end] {
			e.page = binary.LittleEndian.AppendUint32(e.page, uint32(len(v)))
			e.page = append(e.page, v...)
		}
	}
}

// appendLevelSection appends levels of a column whose maximum level is
// maxLevel in the hybrid encoding, after their 4-byte length (data page
// v1).
func appendLevelSection(b []byte, levels []uint8, maxLevel int16) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = appendHybrid(b, levels, bits.Len16(uint16(maxLevel)))
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// appendBools appends booleans PLAIN: bit-packed, LSB first, the last
// byte padded with zeros.
func appendBools(b []byte, vals []bool) []byte {
	var acc byte
	for k, v := range vals {
		if v {
			acc |= 1 << (k % 8)
		}
		if k%8 == 7 {
			b, acc = append(b, acc), 0
		}
	}
	if len(vals)%8 != 0 {
		b = append(b, acc)
	}
	return b
}

// leafStats returns the chunk statistics of leaf l: the null count (the
// entries below the maximum definition level) and the bounds of its
// values, as stats does for a flat column.
func (e *encoder) leafStats(spec *colSpec, l *Leaf) metadata.EncodedStatistics {
	n := l.values(spec)
	st := metadata.EncodedStatistics{Signed: spec.width > 0}
	st.SetNullCount(int64(len(l.Def) - n))
	var lo, hi []byte
	found := false
	if spec.width > 0 {
		lo, hi, found = e.numberBounds(spec, &Column{I32: l.I32, I64: l.I64}, n)
	} else if n > 0 {
		los, his := slices.Min(l.Str), slices.Max(l.Str) // Go orders strings as unsigned bytes
		lo, hi, found = []byte(los), []byte(his), true
	}
	setBounds(&st, lo, hi, found)
	return st
}
