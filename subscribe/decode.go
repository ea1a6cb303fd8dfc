package subscribe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/deltabus/deltabus/parquetpage"
)

// decodeEvents reads a topic data file the way the relay writes it (the
// event columns as plain parquet types, timestamps INT64 micros) straight
// from its column chunks into events, chunkEvents at a time, with
// parquetpage's readers: the strings of one column of one chunk share one
// allocation, and nothing goes through Arrow. A page parquetpage does not
// decode (another writer's encoding or codec) hands the rest of its column
// chunk over to arrow-go's column reader. errLayout means the file is laid
// out otherwise (another writer's schema): the caller reads it with
// sink/topic instead. A corrupt file is an error, never a panic. reuse,
// when not nil, supplies the readers' buffers and the chunks to refill
// (emit must be done with a chunk before handing it back).
func decodeEvents(ctx context.Context, data []byte, reuse *decodeReuse, emit func(*chunk) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt parquet file: %v", r)
		}
	}()
	if reuse == nil {
		reuse = &decodeReuse{}
	}
	if reuse.dec == nil {
		reuse.dec = newChunkDecoder(reuse.chunks)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	cols, err := eventLayout(pf, int64(len(data)))
	if err != nil {
		return err
	}
	d := reuse.dec
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		if err := d.rowGroup(ctx, data, pf.RowGroup(rg), cols, emit); err != nil {
			return fmt.Errorf("row group %d: %w", rg, err)
		}
	}
	return nil
}

// decodeReuse is what one decode worker recycles from file to file: its
// scratch buffers and page readers, chunks the subscription is done with
// (shared by the workers of a round), and the buffer of its last data
// file. Nil fields: allocate afresh.
type decodeReuse struct {
	chunks chan *chunk
	dec    *chunkDecoder
	file   []byte // the last data file read (readData)
}

// errLayout: the file is not laid out as decodeEvents expects.
var errLayout = errors.New("subscribe: data file layout not the relay's")

// eventColumn is one event column: its name, physical type, and the leaf
// index found in the file.
type eventColumn struct {
	name string
	typ  parquet.Type
	ts   bool // INT64 TIMESTAMP(MICROS)
	// optional: files written before the column existed lack it; it then
	// reads as NULL (leaf -1).
	optional bool
	leaf     int
	def      int16 // max definition level
}

var eventColumns = [...]eventColumn{
	{name: "event_id", typ: parquet.Types.ByteArray}, {name: "topic", typ: parquet.Types.ByteArray},
	{name: "key", typ: parquet.Types.ByteArray}, {name: "type", typ: parquet.Types.ByteArray},
	{name: "schema_version", typ: parquet.Types.Int32}, {name: "payload", typ: parquet.Types.ByteArray},
	{name: "headers", typ: parquet.Types.ByteArray}, {name: "occurred_at", typ: parquet.Types.Int64, ts: true},
	{name: "commit_lsn", typ: parquet.Types.Int64}, {name: "seq", typ: parquet.Types.Int32},
	{name: "xid", typ: parquet.Types.Int64}, {name: "commit_time", typ: parquet.Types.Int64, ts: true},
	{name: "source", typ: parquet.Types.ByteArray, optional: true},
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
	cSource
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
		if c.leaf < 0 && c.optional {
			continue
		}
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
			if c.leaf < 0 {
				continue
			}
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
	cols  [len(eventColumns)]*parquetpage.Reader // kept for their buffers
	buf   []byte
	free  chan *chunk // chunks to refill; nil: allocate each

	arrowOnly bool // read every column with arrow-go's reader (tests)
	fallbacks int  // column chunks handed over to arrow-go
	handOver  int  // tests: parquetpage hands over at this data page of a chunk
}

func newChunkDecoder(free chan *chunk) *chunkDecoder {
	return &chunkDecoder{bytes: make([]parquet.ByteArray, chunkEvents), i32: make([]int32, chunkEvents),
		i64: make([]int64, chunkEvents), defs: make([]int16, chunkEvents), free: free}
}

func (d *chunkDecoder) rowGroup(ctx context.Context, data []byte, rg *file.RowGroupReader, cols []eventColumn, emit func(*chunk) error) error {
	readers := make([]colReader, len(cols))
	defer func() {
		for i := range readers {
			readers[i].close()
		}
	}()
	for i, c := range cols {
		if c.leaf < 0 {
			continue // an optional column the file lacks: NULL
		}
		if err := readers[i].open(data, rg, i, c, d); err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
	}
	for left := rg.NumRows(); left > 0; left -= chunkEvents {
		c := d.chunk(int(min(left, chunkEvents)))
		for i, col := range cols {
			if err := d.column(c, i, col, &readers[i]); err != nil {
				return fmt.Errorf("column %s: %w", col.name, err)
			}
		}
		if err := emit(c); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// colReader reads one column chunk with parquetpage until a page it does
// not decode, then with arrow-go's column reader.
type colReader struct {
	rg    *file.RowGroupReader
	leaf  int
	pages *parquetpage.Reader
	arrow file.ColumnChunkReader
}

// open starts reading column i (c) of the row group of data.
func (r *colReader) open(data []byte, rg *file.RowGroupReader, i int, c eventColumn, d *chunkDecoder) error {
	r.rg, r.leaf = rg, c.leaf
	ch, off, size, err := parquetpage.ChunkAt(rg.MetaData(), c.leaf, int64(len(data)))
	if d.arrowOnly || errors.Is(err, parquetpage.ErrUnsupported) {
		if !d.arrowOnly {
			d.fallbacks++
		}
		r.arrow, err = rg.Column(c.leaf)
		return err
	}
	if err != nil {
		return err
	}
	if d.cols[i] == nil {
		d.cols[i] = &parquetpage.Reader{}
	}
	ch.Data = data[off : off+size]
	r.pages = d.cols[i]
	r.pages.Reset(ch)
	r.pages.HandOverAt(d.handOver)
	return nil
}

// toArrow switches to arrow-go's reader for the rest of the column chunk.
func (r *colReader) toArrow() error {
	rows := r.pages.Levels()
	r.close()
	var err error
	if r.arrow, err = r.rg.Column(r.leaf); err != nil {
		return err
	}
	if rows == 0 {
		return nil
	}
	sk, ok := r.arrow.(interface{ Skip(int64) (int64, error) })
	if !ok {
		return errLayout
	}
	skipped, err := sk.Skip(rows)
	if err != nil {
		return fmt.Errorf("skip to row %d for arrow-go's reader: %w", rows, err)
	}
	if skipped != rows {
		return fmt.Errorf("skip to row %d for arrow-go's reader: %d skipped", rows, skipped)
	}
	return nil
}

func (r *colReader) close() {
	r.pages = nil
	if c, ok := r.arrow.(interface{ Close() error }); ok {
		c.Close()
	}
	r.arrow = nil
}

// chunk returns a chunk for n events, a recycled one when one is free.
func (d *chunkDecoder) chunk(n int) *chunk {
	var c *chunk
	select {
	case c = <-d.free:
	default:
		c = &chunk{}
	}
	c.n, c.events, c.headers = n, nil, nil
	return c
}

// column reads the next c.n values of column i into the chunk (null: ""
// or 0, and c.null[i] set).
func (d *chunkDecoder) column(c *chunk, i int, col eventColumn, r *colReader) error {
	n := c.n
	c.null[i] = grow(c.null[i], n)
	if col.typ == parquet.Types.ByteArray {
		d.buf, c.starts[i], c.ends[i] = d.buf[:0], grow(c.starts[i], n), grow(c.ends[i], n)
	} else {
		c.nums[i] = grow(c.nums[i], n)
	}
	if col.leaf < 0 {
		for k := range n {
			c.null[i][k] = true
			if col.typ == parquet.Types.ByteArray {
				c.starts[i][k], c.ends[i][k] = 0, 0
			} else {
				c.nums[i][k] = 0
			}
		}
		c.text[i] = ""
		return nil
	}
	got, direct := 0, false
	if r.pages != nil {
		var err error
		if got, direct, err = d.fromPages(c, i, r); err != nil {
			return err
		}
	}
	if err := d.fromArrow(c, i, col, r, got); err != nil {
		return err
	}
	if col.typ == parquet.Types.ByteArray {
		if !direct {
			c.text[i] = string(d.buf) // one allocation per column and chunk, never reused
		}
		if i == cHeaders {
			c.headers = make([]string, n)
			for k := range n {
				c.headers[k] = c.str(i, k)
			}
		}
	}
	return nil
}

// fromPages reads the chunk's rows of column i with parquetpage, until
// it hands the column over to arrow-go (then the rest is to read).
// direct: one PLAIN page held every row, and c.text[i] is set already.
func (d *chunkDecoder) fromPages(c *chunk, i int, r *colReader) (got int, direct bool, err error) {
	b := parquetpage.Batch{Buf: d.buf, Starts: c.starts[i], Ends: c.ends[i], Nums: c.nums[i], Nulls: c.null[i]}
	got, err = r.pages.Read(&b)
	d.buf = b.Buf
	if b.Direct {
		c.text[i] = b.Text
	}
	switch {
	case errors.Is(err, parquetpage.ErrUnsupported):
		d.fallbacks++
		err = r.toArrow()
	case err == io.EOF:
		err = errors.New("column chunk ends before the row group's rows")
	}
	return got, b.Direct, err
}

// fromArrow reads the chunk's rows of column i from row got on with
// arrow-go's reader.
func (d *chunkDecoder) fromArrow(c *chunk, i int, col eventColumn, r *colReader, got int) error {
	for n := c.n; got < n; {
		want := int64(n - got)
		var total int64
		var err error
		switch rr := r.arrow.(type) {
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
		if err := d.place(c, i, col, got, int(total)); err != nil {
			return err
		}
		got += int(total)
	}
	return nil
}

// place copies total values just read (with their definition levels) to
// rows got.. of column i.
func (d *chunkDecoder) place(c *chunk, i int, col eventColumn, got, total int) error {
	if col.typ == parquet.Types.ByteArray {
		return d.placeStrings(c, i, col, got, total)
	}
	nums, nulls := c.nums[i][got:got+total], c.null[i][got:got+total]
	v := 0
	for k := range total {
		nulls[k] = col.def > 0 && d.defs[k] < col.def
		switch {
		case nulls[k]:
			nums[k] = 0
		case col.typ == parquet.Types.Int32:
			nums[k] = int64(d.i32[v])
			v++
		default:
			nums[k] = d.i64[v]
			v++
		}
	}
	return nil
}

// placeStrings appends the byte-array values just read to d.buf. A value
// equal to the previous one of the same read (the same bytes of one page
// or dictionary entry: a repeated topic, type or header) shares its range.
func (d *chunkDecoder) placeStrings(c *chunk, i int, col eventColumn, got, total int) error {
	buf := d.buf // a local: no write barrier per value
	defer func() { d.buf = buf }()
	starts, ends, nulls := c.starts[i][got:got+total], c.ends[i][got:got+total], c.null[i][got:got+total]
	var prev []byte
	var from, to int32
	v := 0
	for k := range total {
		nulls[k] = col.def > 0 && d.defs[k] < col.def
		if nulls[k] {
			starts[k], ends[k] = 0, 0
			continue
		}
		val := d.bytes[v]
		v++
		if len(val) == 0 || len(prev) != len(val) || &prev[0] != &val[0] {
			from, prev = int32(len(buf)), val
			buf = append(buf, val...)
			if len(buf) > maxChunkBytes {
				return fmt.Errorf("more than %d bytes of values in %d rows", maxChunkBytes, c.n)
			}
			to = int32(len(buf))
		}
		starts[k], ends[k] = from, to
	}
	return nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
