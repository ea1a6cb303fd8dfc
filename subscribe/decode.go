package subscribe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/deltabus/deltabus/outbox"
)

// decodeEvents reads a topic data file the way the relay writes it (the
// event columns as plain parquet types, timestamps INT64 micros) straight
// from its column chunks into events, chunkEvents at a time: the strings of
// one column of one chunk share one allocation, and nothing goes through
// Arrow. errLayout means the file is laid out otherwise (another writer):
// the caller reads it with sink/topic instead. A corrupt file is an error,
// never a panic.
func decodeEvents(ctx context.Context, data []byte, emit func([]outbox.Event) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt parquet file: %v", r)
		}
	}()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	cols, err := eventLayout(pf, int64(len(data)))
	if err != nil {
		return err
	}
	d := newChunkDecoder()
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		if err := d.rowGroup(ctx, pf.RowGroup(rg), cols, emit); err != nil {
			return fmt.Errorf("row group %d: %w", rg, err)
		}
	}
	return nil
}

// errLayout: the file is not laid out as decodeEvents expects.
var errLayout = errors.New("subscribe: data file layout not the relay's")

// eventColumn is one event column: its name, physical type, and the leaf
// index found in the file.
type eventColumn struct {
	name string
	typ  parquet.Type
	ts   bool // INT64 TIMESTAMP(MICROS)
	leaf int
	def  int16 // max definition level
}

var eventColumns = [...]eventColumn{
	{name: "event_id", typ: parquet.Types.ByteArray}, {name: "topic", typ: parquet.Types.ByteArray},
	{name: "key", typ: parquet.Types.ByteArray}, {name: "type", typ: parquet.Types.ByteArray},
	{name: "schema_version", typ: parquet.Types.Int32}, {name: "payload", typ: parquet.Types.ByteArray},
	{name: "headers", typ: parquet.Types.ByteArray}, {name: "occurred_at", typ: parquet.Types.Int64, ts: true},
	{name: "commit_lsn", typ: parquet.Types.Int64}, {name: "seq", typ: parquet.Types.Int32},
	{name: "xid", typ: parquet.Types.Int64}, {name: "commit_time", typ: parquet.Types.Int64, ts: true},
}

const (
	cID = iota
	cTopic
	cKey
	cType
	cSchemaVersion
	cPayload
	cHeaders
	cOccurredAt
	cCommitLSN
	cSeq
	cXid
	cCommitTime
)

// maxChunkBytes bounds the decoded size of one column chunk: a footer
// cannot make the decoder allocate without limit.
const maxChunkBytes = 1 << 30

func eventLayout(pf *file.Reader, size int64) ([]eventColumn, error) {
	sc := pf.MetaData().Schema
	cols := eventColumns
	for i := range cols {
		c := &cols[i]
		c.leaf = sc.ColumnIndexByName(c.name)
		if c.leaf < 0 {
			return nil, errLayout
		}
		col := sc.Column(c.leaf)
		if col.PhysicalType() != c.typ || col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 {
			return nil, errLayout
		}
		if ts, ok := col.LogicalType().(schema.TimestampLogicalType); c.ts && (!ok || ts.TimeUnit() != schema.TimeUnitMicros) {
			return nil, errLayout
		}
		c.def = col.MaxDefinitionLevel()
	}
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		md := pf.MetaData().RowGroup(rg)
		for _, c := range cols {
			cc, err := md.ColumnChunk(c.leaf)
			if err != nil {
				return nil, err
			}
			if cc.TotalUncompressedSize() > maxChunkBytes || cc.TotalCompressedSize() > size {
				return nil, fmt.Errorf("corrupt parquet footer: column %s chunk of %d bytes", c.name, cc.TotalUncompressedSize())
			}
		}
	}
	return cols[:], nil
}

// chunkDecoder holds the scratch buffers of one file's decoding.
type chunkDecoder struct {
	bytes []parquet.ByteArray
	i32   []int32
	i64   []int64
	defs  []int16
	buf   []byte
	offs  []int
	null  [len(eventColumns)][]bool
	strs  [len(eventColumns)][]string
	ints  [len(eventColumns)][]int64
}

func newChunkDecoder() *chunkDecoder {
	return &chunkDecoder{bytes: make([]parquet.ByteArray, chunkEvents), i32: make([]int32, chunkEvents),
		i64: make([]int64, chunkEvents), defs: make([]int16, chunkEvents)}
}

func (d *chunkDecoder) rowGroup(ctx context.Context, rg *file.RowGroupReader, cols []eventColumn, emit func([]outbox.Event) error) error {
	readers := make([]file.ColumnChunkReader, len(cols))
	for i, c := range cols {
		r, err := rg.Column(c.leaf)
		if err != nil {
			return err
		}
		readers[i] = r
	}
	for left := rg.NumRows(); left > 0; left -= chunkEvents {
		n := int(min(left, chunkEvents))
		for i, c := range cols {
			if err := d.column(i, c, readers[i], n); err != nil {
				return fmt.Errorf("column %s: %w", c.name, err)
			}
		}
		if err := emit(d.events(n)); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// column reads the next n values of column i into d.strs[i] or d.ints[i]
// (null: "" or 0, and d.null[i] set).
func (d *chunkDecoder) column(i int, c eventColumn, r file.ColumnChunkReader, n int) error {
	d.null[i] = grow(d.null[i], n)
	if c.typ == parquet.Types.ByteArray {
		d.buf, d.offs = d.buf[:0], d.offs[:0]
	} else {
		d.ints[i] = grow(d.ints[i], n)
	}
	for got := 0; got < n; {
		want := int64(n - got)
		var total int64
		var err error
		switch rr := r.(type) {
		case *file.ByteArrayColumnChunkReader:
			// Values alias the page: place copies them before the next read.
			total, _, err = rr.ReadBatchInPage(want, d.bytes, d.defs, nil)
		case *file.Int32ColumnChunkReader:
			total, _, err = rr.ReadBatch(want, d.i32, d.defs, nil)
		case *file.Int64ColumnChunkReader:
			total, _, err = rr.ReadBatch(want, d.i64, d.defs, nil)
		default:
			return errLayout
		}
		if err != nil {
			return err
		}
		if total == 0 {
			return fmt.Errorf("%d values short of the row group's rows", n-got)
		}
		d.place(i, c, got, int(total))
		got += int(total)
	}
	if c.typ == parquet.Types.ByteArray {
		d.strs[i] = d.strings(d.strs[i], n, i == cHeaders)
	}
	return nil
}

// place copies total values just read (with their definition levels) to
// rows got.. of column i.
func (d *chunkDecoder) place(i int, c eventColumn, got, total int) {
	v := 0
	for k := range total {
		row := got + k
		null := c.def > 0 && d.defs[k] < c.def
		d.null[i][row] = null
		switch {
		case c.typ == parquet.Types.ByteArray:
			if !null {
				d.buf = append(d.buf, d.bytes[v]...)
				v++
			}
			d.offs = append(d.offs, len(d.buf))
		case null:
			d.ints[i][row] = 0
		case c.typ == parquet.Types.Int32:
			d.ints[i][row] = int64(d.i32[v])
			v++
		default:
			d.ints[i][row] = d.i64[v]
			v++
		}
	}
}

// strings turns the column's bytes into n strings sharing one allocation.
// The slice is reused from chunk to chunk, except when the events point
// into it (keep).
func (d *chunkDecoder) strings(out []string, n int, keep bool) []string {
	if keep {
		out = make([]string, n)
	} else {
		out = grow(out, n)
	}
	if len(d.buf) == 0 {
		clear(out)
		return out
	}
	all := string(d.buf)
	start := 0
	for k := range n {
		out[k] = all[start:d.offs[k]]
		start = d.offs[k]
	}
	return out
}

func (d *chunkDecoder) events(n int) []outbox.Event {
	evs := make([]outbox.Event, n)
	headers := d.strs[cHeaders]
	for k := range evs {
		e := &evs[k]
		e.ID, e.Topic, e.Key, e.Type = d.strs[cID][k], d.strs[cTopic][k], d.strs[cKey][k], d.strs[cType][k]
		e.SchemaVersion, e.Payload = int32(d.ints[cSchemaVersion][k]), d.strs[cPayload][k]
		if !d.null[cHeaders][k] {
			e.Headers = &headers[k]
		}
		e.OccurredAt = micros(d.ints[cOccurredAt][k], d.null[cOccurredAt][k])
		e.CommitLSN, e.Seq, e.Xid = d.ints[cCommitLSN][k], int32(d.ints[cSeq][k]), d.ints[cXid][k]
		e.CommitTime = micros(d.ints[cCommitTime][k], d.null[cCommitTime][k])
	}
	return evs
}

func micros(us int64, null bool) time.Time {
	if null {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
