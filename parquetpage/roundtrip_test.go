package parquetpage

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// testField is one column of the test schema and how it is written.
type testField struct {
	arrow.Field
	Spec
}

var testFields = []testField{
	{arrow.Field{Name: "s_req", Type: arrow.BinaryTypes.String}, Spec{}},
	{arrow.Field{Name: "s_dict", Type: arrow.BinaryTypes.String, Nullable: true}, Spec{Dictionary: true, Statistics: true}},
	{arrow.Field{Name: "s_plain", Type: arrow.BinaryTypes.String, Nullable: true}, Spec{Statistics: true}},
	{arrow.Field{Name: "s_dict_nostats", Type: arrow.BinaryTypes.String, Nullable: true}, Spec{Dictionary: true}},
	{arrow.Field{Name: "i32_dict", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, Spec{Dictionary: true, Statistics: true}},
	{arrow.Field{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, Spec{Statistics: true}},
	{arrow.Field{Name: "i64_req", Type: arrow.PrimitiveTypes.Int64}, Spec{Statistics: true}},
	{arrow.Field{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, Spec{}},
	{arrow.Field{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true}, Spec{Statistics: true}},
}

func testSchema(t testing.TB) (*arrow.Schema, *Schema) {
	t.Helper()
	fields := make([]arrow.Field, len(testFields))
	specs := make([]Spec, len(testFields))
	for i, f := range testFields {
		fields[i], specs[i] = f.Field, f.Spec
	}
	as := arrow.NewSchema(fields, nil)
	pq, err := pqarrow.ToParquet(as, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSchema(pq, specs, "parquetpage test")
	if err != nil {
		t.Fatal(err)
	}
	return as, s
}

// group is one row group of test values: strs[c][r] or nums[c][r], nil
// when NULL.
type group struct {
	rows int
	vals [][]any // [column][row]: string, int32, int64 or nil
}

// shape drives the random rows: how many, how often NULL, how many
// distinct values, how long strings get.
type shape struct {
	rows     int
	nullPct  int // 0..100; 100: every nullable value NULL
	distinct int // distinct values of the dictionary columns
	maxLen   int // longest string
}

func randomGroup(r *rand.Rand, sh shape) group {
	g := group{rows: sh.rows, vals: make([][]any, len(testFields))}
	for c, f := range testFields {
		g.vals[c] = make([]any, sh.rows)
		for i := range sh.rows {
			if f.Nullable && r.IntN(100) < sh.nullPct {
				continue
			}
			g.vals[c][i] = randomValue(r, f, sh)
		}
	}
	return g
}

func randomValue(r *rand.Rand, f testField, sh shape) any {
	d := max(1, sh.distinct)
	switch f.Type.ID() {
	case arrow.INT32:
		if f.Dictionary {
			return int32(r.IntN(d)) - int32(d/2)
		}
		return int32(r.Uint32())
	case arrow.INT64, arrow.TIMESTAMP:
		if r.IntN(4) == 0 {
			return int64(r.IntN(3)) - 1
		}
		return int64(r.Uint64())
	}
	if f.Dictionary {
		return strings.Repeat("k", r.IntN(3)) + string(rune('a'+r.IntN(d)%26)) + string(rune(0x100+r.IntN(d)))
	}
	n := 0
	switch k := r.IntN(10); {
	case k == 0: // empty
	case k < 9:
		n = r.IntN(40)
	default:
		n = r.IntN(sh.maxLen + 1)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

// columns lays g out the way the encoder takes it.
func (g group) columns() []Column {
	cols := make([]Column, len(g.vals))
	for c, vals := range g.vals {
		col := &cols[c]
		nulls := false
		bm := make([]byte, (g.rows+7)/8)
		col.Offs = append(col.Offs, 0)
		for i, v := range vals {
			if v == nil {
				nulls = true
			} else {
				bm[i/8] |= 1 << (i % 8)
			}
			switch testFields[c].Type.ID() {
			case arrow.INT32:
				x, _ := v.(int32)
				col.I32 = append(col.I32, x)
			case arrow.INT64, arrow.TIMESTAMP:
				x, _ := v.(int64)
				col.I64 = append(col.I64, x)
			default:
				s, _ := v.(string)
				col.Data = append(col.Data, s...)
				col.Offs = append(col.Offs, int32(len(col.Data)))
			}
		}
		if nulls {
			col.Valid = bm
		}
	}
	return cols
}

// writeGroups writes groups as one file.
func writeGroups(t testing.TB, s *Schema, groups []group) []byte {
	t.Helper()
	var buf bytes.Buffer
	f := NewFile(s, &buf)
	for i, g := range groups {
		if err := f.WriteRowGroup(g.rows, g.columns()); err != nil {
			t.Fatalf("row group %d: %v", i, err)
		}
		if f.Size() != int64(buf.Len()) {
			t.Fatalf("Size %d, wrote %d", f.Size(), buf.Len())
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// checkFile reads data with pqarrow and compares every value with groups,
// then checks the footer's statistics and encodings and the page sizes.
func checkFile(t testing.TB, as *arrow.Schema, data []byte, groups []group) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer pf.Close()
	if pf.NumRowGroups() != len(groups) {
		t.Fatalf("%d row groups, want %d", pf.NumRowGroups(), len(groups))
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 777}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int, len(testFields))
	for i := range all {
		all[i] = i
	}
	for gi, g := range groups {
		tbl, err := fr.ReadRowGroups(t.Context(), all, []int{gi})
		if err != nil {
			t.Fatalf("read row group %d: %v", gi, err)
		}
		for i, f := range tbl.Schema().Fields() {
			if w := as.Field(i); f.Name != w.Name || !arrow.TypeEqual(f.Type, w.Type) || f.Nullable != w.Nullable {
				t.Fatalf("field %d read back as %v, want %v", i, f, w)
			}
		}
		for c := range testFields {
			checkColumn(t, gi, c, tbl.Column(c).Data().Chunks(), g.vals[c])
		}
		tbl.Release()
		checkFooter(t, pf, gi, g)
	}
	checkOurs(t, data, groups...)
}

// checkOurs reads every column of data with Reader, row group after row
// group, and compares the values with those of groups, in order.
func checkOurs(t testing.TB, data []byte, groups ...group) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer pf.Close()
	rng := rand.New(rand.NewPCG(uint64(len(data)), 5))
	for c, f := range testFields {
		var want []any
		for _, g := range groups {
			for _, v := range g.vals[c] {
				if x, ok := v.(int32); ok {
					v = int64(x)
				}
				want = append(want, v)
			}
		}
		i := 0
		for rg := range pf.NumRowGroups() {
			got, err := readOurs(t, data, pf.MetaData().RowGroup(rg), c, rng.IntN(2) == 0, rng)
			if err != nil {
				t.Fatalf("Reader, row group %d column %s: %v", rg, f.Name, err)
			}
			for _, l := range got {
				if i >= len(want) || l.v != want[i] {
					t.Fatalf("Reader, column %s, row %d: got %.40q, want %.40q", f.Name, i, l.v, at(want, i))
				}
				i++
			}
		}
		if i != len(want) {
			t.Fatalf("Reader, column %s: %d rows, want %d", f.Name, i, len(want))
		}
	}
}

func checkColumn(t testing.TB, gi, c int, chunks []arrow.Array, want []any) {
	t.Helper()
	i := 0
	for _, a := range chunks {
		for k := range a.Len() {
			var got any
			if !a.IsNull(k) {
				switch a := a.(type) {
				case *array.String:
					got = a.Value(k)
				case *array.Int32:
					got = a.Value(k)
				case *array.Int64:
					got = a.Value(k)
				case *array.Timestamp:
					got = int64(a.Value(k))
				}
			}
			if i >= len(want) || got != want[i] {
				t.Fatalf("row group %d, column %s, row %d: got %.40q, want %.40q", gi, testFields[c].Name, i, got, at(want, i))
			}
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("row group %d, column %s: %d rows, want %d", gi, testFields[c].Name, i, len(want))
	}
}

func at(v []any, i int) any {
	if i < len(v) {
		return v[i]
	}
	return "(none)"
}

// checkFooter checks the statistics and encodings of row group gi and that
// no data page of it is much over the page size.
func checkFooter(t testing.TB, pf *file.Reader, gi int, g group) {
	t.Helper()
	rg := pf.RowGroup(gi)
	md := pf.MetaData().RowGroup(gi)
	if md.NumRows() != int64(g.rows) {
		t.Fatalf("row group %d: %d rows in the footer, want %d", gi, md.NumRows(), g.rows)
	}
	for c, f := range testFields {
		cc, err := md.ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Compression().String() != "SNAPPY" || cc.NumValues() != int64(g.rows) {
			t.Errorf("row group %d column %s: codec %s, %d values", gi, f.Name, cc.Compression(), cc.NumValues())
		}
		checkStats(t, gi, f, cc, g.vals[c])
		pr, err := rg.GetColumnPageReader(c)
		if err != nil {
			t.Fatal(err)
		}
		longest := 0
		for _, v := range g.vals[c] {
			if s, ok := v.(string); ok {
				longest = max(longest, len(s))
			}
		}
		for pr.Next() {
			if p := pr.Page(); p.Type() == file.PageTypeDataPage {
				if n := int(p.(*file.DataPageV1).UncompressedSize()); n > pageBytes+8*(longest+4)+64<<10 {
					t.Errorf("row group %d column %s: data page of %d bytes", gi, f.Name, n)
				}
			}
		}
		if err := pr.Err(); err != nil {
			t.Fatalf("row group %d column %s pages: %v", gi, f.Name, err)
		}
	}
}

// checkStats compares the footer's statistics of a column chunk with its
// values: present exactly for the columns that ask for them.
func checkStats(t testing.TB, gi int, f testField, cc *metadata.ColumnChunkMetaData, vals []any) {
	t.Helper()
	set, err := cc.StatsSet()
	if err != nil {
		t.Fatal(err)
	}
	if set != f.Statistics {
		t.Fatalf("row group %d column %s: statistics set %t, want %t", gi, f.Name, set, f.Statistics)
	}
	if !set {
		return
	}
	st, err := cc.Statistics()
	if err != nil {
		t.Fatal(err)
	}
	nulls := 0
	var lo, hi []byte
	for _, v := range vals {
		if v == nil {
			nulls++
			continue
		}
		b := plainBytes(v)
		if lo == nil || less(f, b, lo) {
			lo = b
		}
		if hi == nil || less(f, hi, b) {
			hi = b
		}
	}
	if !st.HasNullCount() || st.NullCount() != int64(nulls) {
		t.Errorf("row group %d column %s: null count %d (set %t), want %d", gi, f.Name, st.NullCount(), st.HasNullCount(), nulls)
	}
	if lo == nil || len(lo) > maxStatBytes || len(hi) > maxStatBytes {
		if st.HasMinMax() && lo == nil {
			t.Errorf("row group %d column %s: min/max without values", gi, f.Name)
		}
		return
	}
	if !st.HasMinMax() || !bytes.Equal(st.EncodeMin(), lo) || !bytes.Equal(st.EncodeMax(), hi) {
		t.Errorf("row group %d column %s: min %x max %x (set %t), want %x %x", gi, f.Name, st.EncodeMin(), st.EncodeMax(), st.HasMinMax(), lo, hi)
	}
}

// plainBytes is a value's statistics encoding.
func plainBytes(v any) []byte {
	switch v := v.(type) {
	case int32:
		return binary.LittleEndian.AppendUint32(nil, uint32(v))
	case int64:
		return binary.LittleEndian.AppendUint64(nil, uint64(v))
	}
	return []byte(v.(string))
}

// less orders values as Parquet does: numbers signed, strings by bytes.
func less(f testField, a, b []byte) bool {
	switch f.Type.ID() {
	case arrow.INT32:
		return int32(binary.LittleEndian.Uint32(a)) < int32(binary.LittleEndian.Uint32(b))
	case arrow.INT64, arrow.TIMESTAMP:
		return int64(binary.LittleEndian.Uint64(a)) < int64(binary.LittleEndian.Uint64(b))
	}
	return bytes.Compare(a, b) < 0
}

// roundTrip writes groups of the given shapes and checks them read back.
func roundTrip(t testing.TB, seed uint64, shapes ...shape) {
	t.Helper()
	as, s := testSchema(t)
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	groups := make([]group, len(shapes))
	for i, sh := range shapes {
		groups[i] = randomGroup(r, sh)
	}
	checkFile(t, as, writeGroups(t, s, groups), groups)
}

func TestRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		shapes []shape
	}{
		{"no row group", nil},
		{"one row", []shape{{rows: 1, nullPct: 50, distinct: 3, maxLen: 10}}},
		{"all null", []shape{{rows: 1000, nullPct: 100, distinct: 3, maxLen: 10}}},
		{"no null", []shape{{rows: 5000, distinct: 5, maxLen: 100}}},
		{"one distinct", []shape{{rows: 3000, nullPct: 10, distinct: 1, maxLen: 100}}},
		{"mixed groups", []shape{
			{rows: 7, nullPct: 30, distinct: 2, maxLen: 5},
			{rows: 70_000, nullPct: 3, distinct: 300, maxLen: 2000},
			{rows: 9, nullPct: 99, distinct: 40, maxLen: 1},
			{rows: 20481, nullPct: 50, distinct: 70_000, maxLen: 64},
		}},
		{"long strings", []shape{{rows: 300, nullPct: 20, distinct: 10, maxLen: 3 << 20}}},
		{"many groups", manyShapes(60)},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { roundTrip(t, uint64(i)+1, c.shapes...) })
	}
}

func manyShapes(n int) []shape {
	out := make([]shape, n)
	for i := range out {
		out[i] = shape{rows: 1 + i*37%500, nullPct: i * 7 % 101, distinct: 1 + i%9, maxLen: 50}
	}
	return out
}

// TestDictionaryFallback: a dictionary column whose values pass 1 MiB is
// written PLAIN, and reads back the same.
func TestDictionaryFallback(t *testing.T) {
	as, s := testSchema(t)
	r := rand.New(rand.NewPCG(7, 7))
	g := randomGroup(r, shape{rows: 40_000, distinct: 3, maxLen: 10})
	for i := range g.vals[1] { // s_dict: 40,000 distinct 40-byte values
		g.vals[1][i] = strings.Repeat("x", 32) + strconv.Itoa(10_000_000+i)
	}
	data := writeGroups(t, s, []group{g})
	checkFile(t, as, data, []group{g})
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	for c, want := range map[int]bool{1: false, 3: true, 4: true} {
		cc, err := pf.MetaData().RowGroup(0).ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		if cc.HasDictionaryPage() != want {
			t.Errorf("column %s: dictionary page %t, want %t (encodings %v)", testFields[c].Name, cc.HasDictionaryPage(), want, cc.Encodings())
		}
	}
}

// FuzzRoundTrip writes random row groups of fuzzed shapes and reads them
// back with pqarrow.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint16(10), uint8(0), uint16(3), uint16(10), uint8(1))
	f.Add(uint64(2), uint16(5000), uint8(50), uint16(1000), uint16(300), uint8(3))
	f.Add(uint64(3), uint16(1), uint8(100), uint16(1), uint16(0), uint8(2))
	f.Fuzz(func(t *testing.T, seed uint64, rows uint16, nullPct uint8, distinct, maxLen uint16, groups uint8) {
		shapes := make([]shape, 1+int(groups)%8)
		for i := range shapes {
			shapes[i] = shape{rows: 1 + (int(rows)+i*131)%20000, nullPct: int(nullPct) % 101, distinct: 1 + int(distinct), maxLen: int(maxLen)}
		}
		roundTrip(t, seed, shapes...)
	})
}

// TestRepeat: byte array columns given as one repeated value
// (Column.Repeat) are written as the very bytes of the same values given
// one per row, dictionary-encoded or PLAIN over several pages, with NULLs
// among them, and read back so.
func TestRepeat(t *testing.T) {
	as, s := testSchema(t)
	r := rand.New(rand.NewPCG(11, 11))
	vals := map[int]string{0: "deltabus-7301234567890123456-deltabus", 1: "x", 2: strings.Repeat("p", 300), 3: ""}
	for _, sh := range []shape{{rows: 1, distinct: 1, maxLen: 10}, {rows: 30_000, nullPct: 20, distinct: 1, maxLen: 10},
		{rows: 25_000, distinct: 1, maxLen: 10}, {rows: 700, nullPct: 100, distinct: 1, maxLen: 10}} {
		g := randomGroup(r, sh)
		for c, v := range vals {
			for i := range g.vals[c] {
				if g.vals[c][i] != nil || !testFields[c].Nullable {
					g.vals[c][i] = v
				}
			}
		}
		want := writeGroups(t, s, []group{g})
		checkFile(t, as, want, []group{g})
		cols := g.columns()
		for c, v := range vals {
			cols[c].Data, cols[c].Offs, cols[c].Repeat = []byte(v), nil, true
		}
		var buf bytes.Buffer
		f := NewFile(s, &buf)
		if err := f.WriteRowGroup(g.rows, cols); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("%d rows: repeated values written as %d bytes, one per row as %d, and they differ", g.rows, buf.Len(), len(want))
		}
	}
	cols := randomGroup(r, shape{rows: 3, distinct: 1}).columns()
	cols[4].Repeat = true
	if err := NewFile(s, &bytes.Buffer{}).WriteRowGroup(3, cols); err == nil || !strings.Contains(err.Error(), "repeated") {
		t.Fatalf("a repeated INT32 column: %v", err)
	}
}
