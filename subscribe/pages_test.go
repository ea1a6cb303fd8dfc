package subscribe

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/topic"
)

// pageLayouts are writer settings of the event layout: the page layouts
// colPages decodes (dictionary and PLAIN pages, v1 and v2, many small
// pages, a dictionary that overflows into PLAIN pages) and ones it hands
// over to arrow-go, from the first page or in the middle of a column chunk.
var pageLayouts = []struct {
	name     string
	fallback bool // some byte-array pages are not colPages'
	props    []parquet.WriterProperty
	handOver int // colPages hands over at this data page of each chunk (test hook)
}{
	{"default", false, nil, 0},
	{"plain-v2-small-pages", false, []parquet.WriterProperty{parquet.WithDictionaryDefault(false),
		parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDataPageSize(700), parquet.WithBatchSize(7)}, 0},
	{"dict-overflow-snappy", false, []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(300),
		parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDataPageSize(2000), parquet.WithBatchSize(50)}, 0},
	{"dict-v2-row-groups", false, []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2),
		parquet.WithMaxRowGroupLength(700), parquet.WithDataPageSize(1500), parquet.WithBatchSize(30)}, 0},
	{"hand-over-mid-chunk", true, []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(300),
		parquet.WithDataPageSize(1000), parquet.WithBatchSize(40)}, 3},
	{"delta-byte-array", true, []parquet.WriterProperty{parquet.WithDictionaryDefault(false),
		parquet.WithEncodingFor("payload", parquet.Encodings.DeltaByteArray),
		parquet.WithEncodingFor("key", parquet.Encodings.DeltaByteArray),
		parquet.WithEncodingFor("commit_lsn", parquet.Encodings.DeltaBinaryPacked), parquet.WithDataPageSize(900), parquet.WithBatchSize(20)}, 0},
}

// randomEventFile writes n random events in the event layout with arrow-go
// (nullable columns sometimes NULL, strings empty, repeated or unique).
func randomEventFile(t testing.TB, rng *rand.Rand, n int, props []parquet.WriterProperty) []byte {
	t.Helper()
	sc := topic.ArrowSchema(false)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	pool := []string{"", "a", "orders", `{"k":"v"}`, strings.Repeat("x", 300)}
	str := func() string {
		if rng.IntN(3) == 0 {
			return pool[rng.IntN(len(pool))]
		}
		return fmt.Sprintf("%x%s", rng.Uint64(), strings.Repeat("é", rng.IntN(40)))
	}
	for range n {
		for c, f := range sc.Fields() {
			if f.Nullable && rng.IntN(5) == 0 {
				b.Field(c).AppendNull()
				continue
			}
			switch bl := b.Field(c).(type) {
			case *array.StringBuilder:
				bl.Append(str())
			case *array.Int32Builder:
				bl.Append(rng.Int32())
			case *array.Int64Builder:
				bl.Append(rng.Int64N(1 << 50))
			case *array.TimestampBuilder:
				bl.Append(arrow.Timestamp(rng.Int64N(1 << 50)))
			default:
				t.Fatalf("column %s: builder %T", f.Name, bl)
			}
		}
	}
	return parquetFile(t, b, props...)
}

// parquetFile encodes the rows built in b as one Parquet file.
func parquetFile(t testing.TB, b *array.RecordBuilder, props ...parquet.WriterProperty) []byte {
	t.Helper()
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
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

// decodeBoth decodes data with colPages and with arrow-go alone, and
// fails unless both give the same events, or both fail (arrow-go cannot
// read back some DELTA_BYTE_ARRAY pages it writes); it returns the events
// (nil when both failed) and how many column chunks colPages handed over.
func decodeBoth(t testing.TB, data []byte, handOver int) ([]outbox.Event, int) {
	t.Helper()
	ctx := context.Background()
	var evs [2][]outbox.Event
	var errs [2]error
	fast, slow := newChunkDecoder(nil), newChunkDecoder(nil)
	slow.arrowOnly, fast.handOver = true, handOver
	for pass, dec := range []*chunkDecoder{fast, slow} {
		reuse := &decodeReuse{pages: newPagePool(), dec: dec}
		errs[pass] = decodeEvents(ctx, data, reuse, func(c *chunk) error { evs[pass] = c.appendEvents(evs[pass]); return nil })
	}
	if errs[0] != nil || errs[1] != nil {
		if errs[0] == nil || errs[1] == nil {
			t.Fatalf("decodeEvents: colPages: %v; arrow-go: %v", errs[0], errs[1])
		}
		return nil, fast.fallbacks
	}
	if len(evs[0]) != len(evs[1]) {
		t.Fatalf("colPages: %d events, arrow-go: %d", len(evs[0]), len(evs[1]))
	}
	for i := range evs[0] {
		if !reflect.DeepEqual(evs[0][i], evs[1][i]) {
			t.Fatalf("event %d:\ncolPages %+v\narrow-go %+v", i, evs[0][i], evs[1][i])
		}
	}
	return evs[0], fast.fallbacks
}

// TestColPagesMatchesArrow: for every page layout, colPages and arrow-go
// decode the same events; the layouts colPages does not decode are handed
// over (and only those).
func TestColPagesMatchesArrow(t *testing.T) {
	for i, l := range pageLayouts {
		t.Run(l.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for _, n := range []int{1, chunkEvents, 2500} {
				evs, fallbacks := decodeBoth(t, randomEventFile(t, rng, n, l.props), l.handOver)
				if len(evs) != n {
					t.Fatalf("%d events, want %d", len(evs), n)
				}
				if n > 1 && (fallbacks > 0) != l.fallback {
					t.Fatalf("%d rows: %d column chunks handed over to arrow-go", n, fallbacks)
				}
			}
		})
	}
}

// FuzzColPagesMatchesArrow: random events, layouts and sizes decode the
// same with colPages as with arrow-go.
func FuzzColPagesMatchesArrow(f *testing.F) {
	for i := range pageLayouts {
		f.Add(uint64(i), uint8(i), uint16(1+300*i))
	}
	f.Fuzz(func(t *testing.T, seed uint64, layout uint8, n uint16) {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := pageLayouts[int(layout)%len(pageLayouts)]
		decodeBoth(t, randomEventFile(t, rng, 1+int(n)%4000, l.props), l.handOver)
	})
}

// TestColPagesOtherWriters: every flat byte-array, INT32 and INT64 column
// of the parquet files other writers made (Spark, delta-rs, kernel
// conformance tables) reads the same with colPages as with arrow-go.
func TestColPagesOtherWriters(t *testing.T) {
	var paths []string
	for _, dir := range []string{"../sink/delta/testdata/conformance", "../sink/topic/testdata"} {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
				paths = append(paths, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	cols := map[parquet.Type]int{}
	// One raw page pool across every file, as a decode worker's: its
	// buffers come back holding other files' bytes, uncleared.
	pool := newPagePool()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		pooled, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(pool)))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		sc := pf.MetaData().Schema
		for leaf := range sc.NumColumns() {
			col := sc.Column(leaf)
			typ := col.PhysicalType()
			i, ok := map[parquet.Type]int{parquet.Types.ByteArray: cID, parquet.Types.Int32: cSeq, parquet.Types.Int64: cXid}[typ]
			if !ok || col.MaxRepetitionLevel() > 0 || col.MaxDefinitionLevel() > 1 {
				continue
			}
			ec := eventColumn{name: col.Name(), typ: typ, leaf: leaf, def: col.MaxDefinitionLevel()}
			fast, slow := readColumn(t, pf, i, ec, false, nil), readColumn(t, pf, i, ec, true, nil)
			if !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s column %s:\ncolPages %q\narrow-go %q", p, ec.name, fast, slow)
			}
			if raw := readColumn(t, pooled, i, ec, false, pool); !reflect.DeepEqual(raw, slow) {
				t.Fatalf("%s column %s:\ncolPages, raw pool %q\narrow-go %q", p, ec.name, raw, slow)
			}
			cols[typ]++
		}
	}
	t.Logf("columns read in %d files: %v", len(paths), cols)
	if cols[parquet.Types.ByteArray] < 20 || cols[parquet.Types.Int32] < 5 || cols[parquet.Types.Int64] < 5 {
		t.Fatalf("columns read: %v: testdata moved?", cols)
	}
}

// readColumn reads a column of every row group as event column i, values
// as text, NULL as "<nil>". pool, when not nil, is pf's allocator: raw
// while colPages reads, as in decodeEvents.
func readColumn(t *testing.T, pf *file.Reader, i int, ec eventColumn, arrowOnly bool, pool *pagePool) []string {
	t.Helper()
	d := newChunkDecoder(nil)
	d.arrowOnly, d.pages = arrowOnly, pool
	pool.setRaw(!arrowOnly)
	var out []string
	for rg := range pf.NumRowGroups() {
		g := pf.RowGroup(rg)
		var r colReader
		if err := r.open(g, i, ec, d); err != nil {
			t.Fatal(err)
		}
		for left := g.NumRows(); left > 0; left -= chunkEvents {
			c := d.chunk(int(min(left, chunkEvents)))
			if err := d.column(c, i, ec, &r); err != nil {
				t.Fatalf("column %s: %v", ec.name, err)
			}
			for k := range c.n {
				switch {
				case c.null[i][k]:
					out = append(out, "<nil>")
				case ec.typ == parquet.Types.ByteArray:
					out = append(out, c.str(i, k))
				default:
					out = append(out, fmt.Sprint(c.nums[i][k]))
				}
			}
		}
		r.close()
	}
	return out
}

// TestPlainTextMatchesPlainValues: the one-copy reading of a whole chunk
// from one PLAIN page gives the values (NULL, empty, long) the value by
// value reading gives, and both refuse a value past the page's end.
func TestPlainTextMatchesPlainValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var page []byte
	nulls := make([]bool, chunkEvents)
	var want []string
	for k := range nulls {
		nulls[k] = rng.IntN(5) == 0
		if nulls[k] {
			want = append(want, "")
			continue
		}
		v := strings.Repeat(string(rune('a'+k%26)), rng.IntN(3)*rng.IntN(200))
		page = binary.LittleEndian.AppendUint32(page, uint32(len(v)))
		page = append(page, v...)
		want = append(want, v)
	}
	read := func(direct bool, page []byte) ([]string, error) {
		s := &colPages{plain: page}
		o := colOut{starts: make([]int32, len(nulls)), ends: make([]int32, len(nulls)), nulls: nulls}
		var err error
		if direct {
			err = s.plainText(&o)
		} else {
			o.buf, err = s.plainValues(o.buf, o.starts, o.ends, nulls)
			o.text = string(o.buf)
		}
		if err != nil || o.direct != direct || len(s.plain) != 0 {
			return nil, cmp.Or(err, fmt.Errorf("direct %t, %d bytes left", o.direct, len(s.plain)))
		}
		var got []string
		for k := range nulls {
			got = append(got, o.text[o.starts[k]:o.ends[k]])
		}
		return got, nil
	}
	for _, direct := range []bool{true, false} {
		got, err := read(direct, page)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("direct %t: %v, values equal %t", direct, err, reflect.DeepEqual(got, want))
		}
		if _, err := read(direct, page[:len(page)-1]); err == nil {
			t.Fatalf("direct %t: a value past the page's end was read", direct)
		}
	}
}

// TestDictTextMatchesDictValues: rows as ranges of the dictionary itself
// equal the rows copied value by value, and an index out of the
// dictionary is refused either way.
func TestDictTextMatchesDictValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := &colPages{dict: []byte("alphabetagamma"), doffs: []int32{0, 5, 9, 9, 14}, dictN: 4}
	nulls := make([]bool, chunkEvents)
	var idxs []int32
	for k := range nulls {
		if nulls[k] = rng.IntN(4) == 0; !nulls[k] {
			idxs = append(idxs, int32(rng.IntN(4)))
		}
	}
	read := func(direct bool, idxs []int32) ([]string, error) {
		o := colOut{starts: make([]int32, len(nulls)), ends: make([]int32, len(nulls)), nulls: nulls}
		var err error
		if direct {
			err = s.dictText(&o, idxs)
		} else {
			o.buf, err = s.dictValues(o.buf, o.starts, o.ends, nulls, idxs)
			o.text = string(o.buf)
		}
		if err != nil {
			return nil, err
		}
		var got []string
		for k := range nulls {
			got = append(got, o.text[o.starts[k]:o.ends[k]])
		}
		return got, nil
	}
	want, err := read(false, idxs)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(true, idxs); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("dictText: %v, rows equal %t", err, reflect.DeepEqual(got, want))
	}
	idxs[len(idxs)/2] = 4
	for _, direct := range []bool{true, false} {
		if _, err := read(direct, idxs); err == nil {
			t.Fatalf("direct %t: index 4 of a 4-value dictionary was read", direct)
		}
	}
}

// TestNumDenseMatchesNumSparse: rows without a NULL read the same numbers
// through the dense loops as row by row, INT32 and INT64, PLAIN and from a
// dictionary, and both refuse values cut short or out of the dictionary.
func TestNumDenseMatchesNumSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, w := range []int{4, 8} {
		for _, dict := range []bool{false, true} {
			var src []byte
			for range chunkEvents {
				src = binary.LittleEndian.AppendUint64(src, rng.Uint64())
			}
			idxs := make([]int32, chunkEvents)
			for k := range idxs {
				idxs[k] = int32(rng.IntN(300))
			}
			read := func(dense bool, src []byte, idxs []int32) ([]int64, error) {
				s := &colPages{width: w, plain: src}
				if dict {
					s.idx, s.dict, s.dictN, s.plain = &rleDecoder{}, src, len(src)/w, nil
				}
				nums := make([]int64, chunkEvents)
				if dense {
					return nums, s.numDense(nums, idxs)
				}
				return nums, s.numSparse(nums, make([]bool, chunkEvents), idxs)
			}
			if !dict {
				src = src[:chunkEvents*w]
			}
			want, err := read(false, src, idxs)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := read(true, src, idxs); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("width %d dictionary %t: %v, equal %t", w, dict, err, reflect.DeepEqual(got, want))
			}
			short, bad := src[:len(src)-1], slices.Clone(idxs)
			if bad[7] = int32(len(src) / w); !dict {
				bad = idxs
			}
			for _, dense := range []bool{true, false} {
				if _, err := read(dense, short, bad); err == nil {
					t.Fatalf("width %d dictionary %t dense %t: read past the values", w, dict, dense)
				}
			}
		}
	}
}
