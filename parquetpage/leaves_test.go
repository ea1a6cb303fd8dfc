package parquetpage

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// nestedSchema has a leaf of every kind the nested writer takes: a
// struct's optional string and required number, a MAP's key and value, a
// LIST's optional elements, an optional boolean, a required number.
func nestedSchema(t testing.TB, specs func(path string) Spec) *Schema {
	t.Helper()
	f := func(name string, dt arrow.DataType, null bool) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: null}
	}
	as := arrow.NewSchema([]arrow.Field{
		f("s", arrow.StructOf(f("name", arrow.BinaryTypes.String, true), f("n", arrow.PrimitiveTypes.Int64, false)), true),
		f("m", arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String), true),
		f("l", arrow.ListOfField(f("element", arrow.PrimitiveTypes.Int32, true)), true),
		f("b", arrow.FixedWidthTypes.Boolean, true),
		f("r", arrow.PrimitiveTypes.Int64, false),
	}, nil)
	pq, err := pqarrow.ToParquet(as, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	sp := make([]Spec, pq.NumColumns())
	for i := range sp {
		sp[i] = specs(pq.Column(i).Path())
	}
	s, err := NewNestedSchema(pq, sp, "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randomLeaves makes rows rows of each leaf of s, independently (each
// column is checked on its own): a repeated leaf gets 0 to 4 entries per
// row (none is one entry below the repeated group's level), the others
// any level; values at the maximum level, strings up to maxLen bytes.
func randomLeaves(r *rand.Rand, s *Schema, rows, maxLen int) ([]Leaf, [][]level) {
	leaves := make([]Leaf, len(s.cols))
	want := make([][]level, len(s.cols))
	for c := range s.cols {
		cs, l := &s.cols[c], &leaves[c]
		repDef := uint8(cs.maxDef) // the level of the repeated group
		if cs.maxRep > 0 {
			l.Rep = []uint8{}
			repDef = 2 // m.key_value and l.list, each under one optional group
		}
		entry := func(def, rep uint8) {
			l.Def = append(l.Def, def)
			if l.Rep != nil {
				l.Rep = append(l.Rep, rep)
			}
			lv := level{def: int16(def), rep: int16(rep)}
			if def == uint8(cs.maxDef) {
				lv.v = l.add(r, cs, maxLen)
			}
			want[c] = append(want[c], lv)
		}
		for range rows {
			if cs.maxRep == 0 {
				entry(uint8(r.IntN(int(cs.maxDef)+1)), 0)
				continue
			}
			n := r.IntN(5)
			if n == 0 {
				entry(uint8(r.IntN(int(repDef))), 0)
			}
			for k := range n {
				entry(repDef+uint8(r.IntN(int(uint8(cs.maxDef)-repDef)+1)), uint8(min(k, 1)))
			}
		}
	}
	return leaves, want
}

// add appends a random value to l and returns it as readArrow gives it.
func (l *Leaf) add(r *rand.Rand, cs *colSpec, maxLen int) any {
	switch {
	case cs.boolean:
		v := r.IntN(2) == 0
		l.Bool = append(l.Bool, v)
		return v
	case cs.width == 4:
		v := r.Int32() - 1<<30
		l.I32 = append(l.I32, v)
		return int64(v)
	case cs.width == 8:
		v := r.Int64() - 1<<62
		l.I64 = append(l.I64, v)
		return v
	}
	v := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(maxLen+1))
	l.Str = append(l.Str, v)
	return v
}

// TestLeavesRoundTrip: every level and value written from leaves reads
// back unchanged with arrow-go's column readers and with Reader, across
// row groups and pages (long strings make pages end at a row's start),
// and the statistics asked for are those of the values.
func TestLeavesRoundTrip(t *testing.T) {
	s := nestedSchema(t, func(p string) Spec {
		return Spec{Statistics: p == "s.name" || p == "m.key_value.key" || p == "r"}
	})
	r := rand.New(rand.NewPCG(7, 11))
	var buf bytes.Buffer
	f := NewFile(s, &buf)
	var wants [][][]level
	for _, g := range []struct{ rows, maxLen int }{{1, 3}, {5000, 20}, {30_000, 1}, {400, 20_000}} {
		leaves, want := randomLeaves(r, s, g.rows, g.maxLen)
		if err := f.WriteLeaves(g.rows, leaves); err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	for rg, want := range wants {
		for c := range want {
			got, err := readArrow(t, pf, rg, c)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[c]) {
				t.Fatalf("row group %d column %s: arrow-go reads %.300v, want %.300v", rg, pf.MetaData().Schema.Column(c).Path(), got, want[c])
			}
			checkLeafStats(t, pf, rg, c, want[c])
		}
	}
	if pages := dataPages(t, pf, 3, 0); pages < 2 {
		t.Errorf("the row group of long strings is %d page(s), want several", pages)
	}
	compareFile(t, "leaves", buf.Bytes(), r)
}

// checkLeafStats compares the footer's statistics of a column, when
// written, with its levels: NULLs below the maximum level, bounds of the
// values.
func checkLeafStats(t *testing.T, pf *file.Reader, rg, c int, levels []level) {
	t.Helper()
	cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(c)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cc.Statistics()
	if err != nil || st == nil {
		return
	}
	descr := pf.MetaData().Schema.Column(c)
	var vals [][]byte
	for _, l := range levels {
		if l.v != nil {
			vals = append(vals, plainBytes(l.v))
		}
	}
	if nulls := int64(len(levels) - len(vals)); st.NullCount() != nulls {
		t.Errorf("row group %d column %s: null count %d, want %d", rg, descr.Path(), st.NullCount(), nulls)
	}
	enc, err := st.Encode()
	if err != nil || len(vals) == 0 || descr.PhysicalType() != parquet.Types.ByteArray {
		return
	}
	lo, hi := slices.MinFunc(vals, bytes.Compare), slices.MaxFunc(vals, bytes.Compare)
	for _, b := range []*[]byte{&lo, &hi} {
		if len(*b) > maxStatBytes {
			*b = nil // left out, as arrow-go does
		}
	}
	if !bytes.Equal(enc.Min, lo) || !bytes.Equal(enc.Max, hi) {
		t.Errorf("row group %d column %s: bounds %.40q..%.40q, want %.40q..%.40q", rg, descr.Path(), enc.Min, enc.Max, lo, hi)
	}
}

// dataPages counts the data pages of a column chunk.
func dataPages(t *testing.T, pf *file.Reader, rg, c int) int {
	t.Helper()
	pr, err := pf.RowGroup(rg).GetColumnPageReader(c)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for pr.Next() {
		n++
	}
	return n
}

// TestLeavesRefused: leaves of the wrong shape are refused with the
// reason before anything is written, and nested schemas are written by
// leaves only.
func TestLeavesRefused(t *testing.T) {
	s := nestedSchema(t, func(string) Spec { return Spec{} })
	r := rand.New(rand.NewPCG(1, 1))
	mapKey := 2 // s.name, s.n, m.key_value.key
	for name, c := range map[string]struct {
		rows   int
		mutate func([]Leaf)
		want   string
	}{
		"rows":             {4, func([]Leaf) {}, "rows in the levels"},
		"level too high":   {3, func(l []Leaf) { l[0].Def[1] = 9 }, "definition level 9"},
		"repetition first": {3, func(l []Leaf) { l[mapKey].Rep[0] = 1 }, "repetition level 1 at entry 0"},
		"no repetition":    {3, func(l []Leaf) { l[mapKey].Rep = nil }, "repetition levels"},
		"a value short":    {3, func(l []Leaf) { l[6].I64 = l[6].I64[1:] }, "values for"},
		"no row":           {0, func([]Leaf) {}, "row group of 0 rows"},
	} {
		leaves, _ := randomLeaves(r, s, 3, 5)
		c.mutate(leaves)
		var buf bytes.Buffer
		f := NewFile(s, &buf)
		err := f.WriteLeaves(c.rows, leaves)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if f.Size() != 0 || buf.Len() != 0 {
			t.Errorf("%s: %d bytes written", name, buf.Len())
		}
	}
	if err := NewFile(s, new(bytes.Buffer)).WriteRowGroup(1, make([]Column, len(s.cols))); err == nil {
		t.Error("a nested schema took a flat row group")
	}
	_, flat := testSchema(t)
	if err := NewFile(flat, new(bytes.Buffer)).WriteLeaves(1, make([]Leaf, len(flat.cols))); err == nil {
		t.Error("a flat schema took leaves")
	}
	if _, err := NewNestedSchema(s.pq, make([]Spec, 3), "x"); err == nil {
		t.Error("a schema took the wrong number of specs")
	}
	dict := func(p string) Spec { return Spec{Dictionary: p == "r"} }
	for _, sp := range []func(string) Spec{dict, func(p string) Spec { return Spec{Statistics: p == "b"} }} {
		specs := make([]Spec, s.pq.NumColumns())
		for i := range specs {
			specs[i] = sp(s.pq.Column(i).Path())
		}
		if _, err := NewNestedSchema(s.pq, specs, "x"); err == nil {
			t.Errorf("specs %v taken", specs)
		}
	}
}

// TestLeafPagesEndAtRows: a page of a repeated column ends before an
// entry that starts a row, however long the row's values, and pages stay
// near pageBytes.
func TestLeafPagesEndAtRows(t *testing.T) {
	s := nestedSchema(t, func(string) Spec { return Spec{} })
	cs := &s.cols[2] // m.key_value.key
	var l Leaf
	for row := range 40 {
		for k := range 1 + row%5 {
			l.Rep = append(l.Rep, uint8(min(k, 1)))
			l.Def = append(l.Def, uint8(cs.maxDef))
			l.Str = append(l.Str, strings.Repeat("x", 100<<10))
		}
	}
	pages := 0
	for from, vals := 0, 0; from < len(l.Def); pages++ {
		to, present := leafPageEnd(cs, &l, from, vals)
		if to < len(l.Def) && l.Rep[to] != 0 {
			t.Fatalf("a page ends at entry %d, inside a row", to)
		}
		if size := 100 << 10 * present; size > pageBytes+5*(100<<10) {
			t.Fatalf("a page of %d bytes of values", size)
		}
		from, vals = to, vals+present
	}
	if pages < 5 {
		t.Fatalf("%d pages for 12 MB of values", pages)
	}
}
