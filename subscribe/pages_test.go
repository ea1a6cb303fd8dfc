package subscribe

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/topic"
)

// pageLayouts are writer settings of the event layout: the page layouts
// parquetpage decodes (dictionary and PLAIN pages, v1 and v2, many small
// pages, a dictionary that overflows into PLAIN pages) and ones
// decodeEvents hands over to arrow-go, from the first page or in the
// middle of a column chunk.
var pageLayouts = []struct {
	name     string
	fallback bool // some byte-array pages are not parquetpage's
	props    []parquet.WriterProperty
	handOver int // parquetpage hands over at this data page of each chunk (test hook)
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

// decodeBoth decodes data with parquetpage (handing over to arrow-go where
// it must) and with arrow-go alone, and fails unless both give the same
// events, or both fail (arrow-go cannot read back some DELTA_BYTE_ARRAY
// pages it writes); it returns the events (nil when both failed) and how
// many column chunks were handed over.
func decodeBoth(t testing.TB, data []byte, handOver int) ([]outbox.Event, int) {
	t.Helper()
	ctx := context.Background()
	var evs [2][]outbox.Event
	var errs [2]error
	fast, slow := newChunkDecoder(nil), newChunkDecoder(nil)
	slow.arrowOnly, fast.handOver = true, handOver
	for pass, dec := range []*chunkDecoder{fast, slow} {
		reuse := &decodeReuse{dec: dec}
		errs[pass] = decodeEvents(ctx, data, reuse, func(c *chunk) error { evs[pass] = c.appendEvents(evs[pass]); return nil })
	}
	if errs[0] != nil || errs[1] != nil {
		if errs[0] == nil || errs[1] == nil {
			t.Fatalf("decodeEvents: parquetpage: %v; arrow-go: %v", errs[0], errs[1])
		}
		return nil, fast.fallbacks
	}
	if len(evs[0]) != len(evs[1]) {
		t.Fatalf("parquetpage: %d events, arrow-go: %d", len(evs[0]), len(evs[1]))
	}
	for i := range evs[0] {
		if !reflect.DeepEqual(evs[0][i], evs[1][i]) {
			t.Fatalf("event %d:\nparquetpage %+v\narrow-go    %+v", i, evs[0][i], evs[1][i])
		}
	}
	return evs[0], fast.fallbacks
}

// TestDecodeEventsMatchesArrow: for every page layout, decodeEvents and
// arrow-go decode the same events; the layouts parquetpage does not decode
// are handed over (and only those), at their first page or mid-chunk.
func TestDecodeEventsMatchesArrow(t *testing.T) {
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

// FuzzDecodeEventsMatchesArrow: random events, layouts and sizes decode
// the same with decodeEvents as with arrow-go.
func FuzzDecodeEventsMatchesArrow(f *testing.F) {
	for i := range pageLayouts {
		f.Add(uint64(i), uint8(i), uint16(1+300*i))
	}
	f.Fuzz(func(t *testing.T, seed uint64, layout uint8, n uint16) {
		rng := rand.New(rand.NewPCG(seed, 1))
		l := pageLayouts[int(layout)%len(pageLayouts)]
		decodeBoth(t, randomEventFile(t, rng, 1+int(n)%4000, l.props), l.handOver)
	})
}
