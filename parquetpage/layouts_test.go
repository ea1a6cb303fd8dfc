package parquetpage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// layouts are arrow-go writer settings: the page layouts Reader decodes
// (dictionary and PLAIN pages, v1 and v2, many small pages, a dictionary
// that overflows into PLAIN pages, the codecs it reads), and ones it
// leaves to arrow-go (another codec, DELTA encodings).
var layouts = []struct {
	name        string
	unsupported bool // some chunks are left to arrow-go
	props       []parquet.WriterProperty
}{
	{"default", false, nil},
	{"plain-v2-small-pages", false, []parquet.WriterProperty{parquet.WithDictionaryDefault(false),
		parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDataPageSize(700), parquet.WithBatchSize(7)}},
	{"dict-overflow-snappy", false, []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(300),
		parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDataPageSize(2000), parquet.WithBatchSize(50)}},
	{"dict-v2-zstd-row-groups", false, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithCompression(compress.Codecs.Zstd), parquet.WithMaxRowGroupLength(700), parquet.WithDataPageSize(1500), parquet.WithBatchSize(30)}},
	{"v2-uncompressed-values", false, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDataPageSize(100), parquet.WithBatchSize(3)}},
	{"gzip", true, []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Gzip)}},
	{"delta", true, []parquet.WriterProperty{parquet.WithDictionaryDefault(false),
		parquet.WithEncodingFor("s", parquet.Encodings.DeltaByteArray),
		parquet.WithEncodingFor("i64", parquet.Encodings.DeltaBinaryPacked), parquet.WithDataPageSize(900), parquet.WithBatchSize(20)}},
}

// layoutSchema has every shape Reader reads: required and optional
// byte arrays, numbers and booleans, LISTs and MAPs (repeated leaves),
// a struct holding a LIST (definition levels above 1).
var layoutSchema = arrow.NewSchema([]arrow.Field{
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "s_req", Type: arrow.BinaryTypes.String},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "b_req", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "list", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "map", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String), Nullable: true},
	{Name: "st", Type: arrow.StructOf(
		arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	), Nullable: true},
}, nil)

// layoutFile writes n random rows of layoutSchema with arrow-go.
func layoutFile(t testing.TB, rng *rand.Rand, n int, props []parquet.WriterProperty) []byte {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, layoutSchema)
	defer b.Release()
	pool := []string{"", "a", "orders", `{"k":"v"}`, strings.Repeat("x", 300)}
	str := func() string {
		if rng.IntN(3) == 0 {
			return pool[rng.IntN(len(pool))]
		}
		return fmt.Sprintf("%x%s", rng.Uint64(), strings.Repeat("é", rng.IntN(40)))
	}
	null := func() bool { return rng.IntN(5) == 0 }
	for range n {
		if s := b.Field(0).(*array.StringBuilder); null() {
			s.AppendNull()
		} else {
			s.Append(str())
		}
		b.Field(1).(*array.StringBuilder).Append(str())
		if i := b.Field(2).(*array.Int32Builder); null() {
			i.AppendNull()
		} else {
			i.Append(rng.Int32N(50) - 25)
		}
		b.Field(3).(*array.Int64Builder).Append(rng.Int64())
		if x := b.Field(4).(*array.BooleanBuilder); null() {
			x.AppendNull()
		} else {
			x.Append(rng.IntN(3) == 0)
		}
		b.Field(5).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
		lb := b.Field(6).(*array.ListBuilder)
		if null() {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for range rng.IntN(4) {
				if vb := lb.ValueBuilder().(*array.StringBuilder); null() {
					vb.AppendNull()
				} else {
					vb.Append(str())
				}
			}
		}
		mb := b.Field(7).(*array.MapBuilder)
		if null() {
			mb.AppendNull()
		} else {
			mb.Append(true)
			for k := range rng.IntN(3) {
				mb.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprint("k", k))
				if vb := mb.ItemBuilder().(*array.StringBuilder); null() {
					vb.AppendNull()
				} else {
					vb.Append(str())
				}
			}
		}
		sb := b.Field(8).(*array.StructBuilder)
		if null() {
			sb.AppendNull()
		} else {
			sb.Append(true)
			if ab := sb.FieldBuilder(0).(*array.Int64Builder); null() {
				ab.AppendNull()
			} else {
				ab.Append(rng.Int64N(1 << 40))
			}
			slb := sb.FieldBuilder(1).(*array.ListBuilder)
			if null() {
				slb.AppendNull()
			} else {
				slb.Append(true)
				for range rng.IntN(3) {
					slb.ValueBuilder().(*array.Int32Builder).Append(rng.Int32())
				}
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(layoutSchema, &buf, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReaderArrowLayouts: for every layout, Reader and arrow-go read the
// same levels and values of every column; the layouts Reader does not
// decode are left to arrow-go (and only those).
func TestReaderArrowLayouts(t *testing.T) {
	for i, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for _, n := range []int{1, 1024, 2500} {
				cov := compareFile(t, l.name, layoutFile(t, rng, n, l.props), rng)
				if cov.read == 0 && !l.unsupported || (cov.unsupported > 0) != l.unsupported {
					t.Fatalf("%d rows: %d column chunks read, %d left to arrow-go", n, cov.read, cov.unsupported)
				}
			}
		})
	}
}

// FuzzReader: random rows and layouts read the same with Reader as with
// arrow-go; with some bytes of the file changed, Reader reads each column
// chunk to its end or to an error, never panics, and never reads more
// levels than the chunk claims.
func FuzzReader(f *testing.F) {
	for i := range layouts {
		f.Add(uint64(i), uint8(i), uint16(1+300*i), uint32(0), uint8(0))
		f.Add(uint64(i), uint8(i), uint16(700), uint32(i*977), uint8(i))
	}
	f.Fuzz(func(t *testing.T, seed uint64, layout uint8, n uint16, at uint32, flips uint8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := layouts[int(layout)%len(layouts)]
		data := layoutFile(t, rng, 1+int(n)%3000, l.props)
		if flips == 0 {
			compareFile(t, l.name, data, rng)
			return
		}
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		bad := bytes.Clone(data)
		for k := range int(flips) % 16 {
			bad[(int(at)+k*7919)%(len(bad)-8)] ^= byte(rng.Uint32() | 1)
		}
		for rg := range pf.NumRowGroups() {
			md := pf.MetaData().RowGroup(rg)
			for col := range md.NumColumns() {
				got, err := readOurs(t, bad, md, col, rng.IntN(2) == 0, rng)
				cc, _ := md.ColumnChunk(col)
				if err == nil && int64(len(got)) > cc.NumValues() {
					t.Fatalf("column %d: %d levels read of a chunk of %d", col, len(got), cc.NumValues())
				}
			}
		}
	})
}
