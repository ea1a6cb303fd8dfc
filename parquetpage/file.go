package parquetpage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/deltabus/deltabus/coop"
)

// Spec is how one column is written.
type Spec struct {
	// Dictionary asks for dictionary encoding (abandoned for PLAIN in a
	// chunk whose dictionary would pass 1 MiB).
	Dictionary bool
	// Statistics asks for min, max and null count in the footer.
	Statistics bool
}

// colSpec is a column of a Schema as the encoder needs it.
type colSpec struct {
	width      int // 0: BYTE_ARRAY (or BOOLEAN); 4: INT32; 8: INT64
	nullable   bool
	dictionary bool
	stats      bool
	// Nested schemas only (leaves.go).
	boolean        bool
	maxDef, maxRep int16
}

// Schema is a Parquet schema this package writes, flat (NewSchema) or
// nested (NewNestedSchema), with how each column is encoded. It is
// immutable and may be shared.
type Schema struct {
	pq     *schema.Schema
	cols   []colSpec
	props  *parquet.WriterProperties
	nested bool // written by WriteLeaves, not WriteRowGroup
}

// NewSchema checks that pq is flat (no groups, no repeated column) of
// BYTE_ARRAY, INT32 and INT64 columns, required or optional, and returns
// it with specs (one per column, in order) and the footer's created_by.
func NewSchema(pq *schema.Schema, specs []Spec, createdBy string) (*Schema, error) {
	if pq.NumColumns() != len(specs) {
		return nil, fmt.Errorf("parquet schema has %d columns, %d specs given", pq.NumColumns(), len(specs))
	}
	s := &Schema{pq: pq, cols: make([]colSpec, len(specs))}
	for i, sp := range specs {
		col := pq.Column(i)
		if col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 || pq.Root().Field(i) != col.SchemaNode() {
			return nil, fmt.Errorf("column %s: only top-level, non-repeated columns are written", col.Path())
		}
		cs := colSpec{nullable: col.MaxDefinitionLevel() == 1, dictionary: sp.Dictionary, stats: sp.Statistics}
		switch col.PhysicalType() {
		case parquet.Types.ByteArray:
		case parquet.Types.Int32:
			cs.width = 4
		case parquet.Types.Int64:
			cs.width = 8
		default:
			return nil, fmt.Errorf("column %s: physical type %s is not written", col.Path(), col.PhysicalType())
		}
		s.cols[i] = cs
	}
	s.props = parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithCreatedBy(createdBy),
	)
	return s, nil
}

// Column is the values of one column of a row group. A byte array column
// uses Data and Offs (value i is Data[Offs[i]:Offs[i+1]], rows+1
// non-decreasing offsets, as in an Arrow string array);
// INT32 uses I32 and INT64 I64 (one element per row). Valid, when not
// nil, is a validity bitmap (bit i of byte i/8, LSB first, set when row i
// has a value); a NULL row keeps its slot (an empty range, any number).
//
// Repeat, in a byte array column, says that every present row holds Data,
// whole (Offs is not read): a column of one value, such as the source of
// every event a relay writes, is neither copied per row nor compared.
type Column struct {
	Data   []byte
	Offs   []int32
	I32    []int32
	I64    []int64
	Valid  []byte
	Repeat bool
}

// bytesAt is row r's value in a byte array column.
func (c *Column) bytesAt(r int) []byte {
	if c.Repeat {
		return c.Data
	}
	return c.Data[c.Offs[r]:c.Offs[r+1]]
}

// spanBytes is the bytes of the values of rows [from, to) of a byte array
// column.
func (c *Column) spanBytes(from, to int) int {
	if c.Repeat {
		return len(c.Data) * countValid(c.Valid, from, to)
	}
	return int(c.Offs[to] - c.Offs[from])
}

// encoders holds the scratch of chunk encoding for any File.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// maxPooledScratch caps the scratch an encoder may hold to go back to the
// pool (a chunk of huge values should not pin its memory).
const maxPooledScratch = 8 << 20

// File writes one Parquet file, row group by row group, to an io.Writer.
// It is not safe for concurrent use.
type File struct {
	s      *Schema
	out    sink
	md     *metadata.FileMetaDataBuilder
	groups int16
	err    error // sticky
	yield  coop.Yielder
}

// magic starts and ends a Parquet file.
const magic = "PAR1"

// NewFile starts a file on w; nothing is written before the first row
// group (or Close).
func NewFile(s *Schema, w io.Writer) *File {
	return &File{s: s, out: sink{w: w}, md: metadata.NewFileMetadataBuilder(s.pq, s.props, nil)}
}

// Yield gives the processor to other goroutines, parking now and then so
// that those woken by the network run too (package coop). WriteLeaves
// yields between pages; a writer that prepares leaves at length in the
// background calls it between chunks of its own work.
func (f *File) Yield() { f.yield.Yield() }

// Size is the number of bytes written so far.
func (f *File) Size() int64 { return f.out.off }

// WriteRowGroup encodes rows rows of cols (one per schema column) as the
// next row group. cols are only read, and not kept past the return.
func (f *File) WriteRowGroup(rows int, cols []Column) error {
	if f.err != nil {
		return f.err
	}
	if err := f.s.check(rows, cols); err != nil {
		return err // nothing written: the file stays usable
	}
	return f.encodeRowGroup(func(e *encoder) error { return f.writeRowGroup(e, rows, cols) })
}

// encodeRowGroup runs write, which encodes a row group, with an encoder
// from the pool and the sink buffering in its write buffer.
func (f *File) encodeRowGroup(write func(*encoder) error) error {
	if f.err = f.start(); f.err != nil {
		return f.err
	}
	e := encoders.Get().(*encoder)
	f.out.lend(e.wbuf)
	f.err = write(e)
	var err error
	if e.wbuf, err = f.out.reclaim(); f.err == nil && err != nil {
		f.err = fmt.Errorf("row group %d: %w", f.groups-1, err)
	}
	if e.scratchBytes() <= maxPooledScratch {
		encoders.Put(e)
	}
	return f.err
}

func (f *File) start() error {
	if f.out.off > 0 {
		return nil
	}
	if err := f.out.write([]byte(magic)); err != nil {
		return fmt.Errorf("write parquet magic: %w", err)
	}
	return nil
}

func (f *File) writeRowGroup(e *encoder, rows int, cols []Column) error {
	return f.writeGroup(rows, func(i int, spec *colSpec) (chunk, error) {
		info, dict, err := e.writeChunk(&f.out, spec, &cols[i], rows)
		return chunk{info: info, dict: dict, values: rows}, err
	}, func(i int, spec *colSpec, c chunk) metadata.EncodedStatistics {
		return e.stats(spec, &cols[i], rows, c.dict)
	})
}

// chunk is what the footer needs of a column chunk as written.
type chunk struct {
	info   chunkInfo
	dict   bool
	values int // entries: a flat column's rows, a nested leaf's levels
}

// writeGroup writes the next row group, of rows rows: each column chunk
// with encode, then its footer metadata, with statistics from stats where
// the column asks for them.
func (f *File) writeGroup(rows int, encode func(int, *colSpec) (chunk, error), stats func(int, *colSpec, chunk) metadata.EncodedStatistics) error {
	rg := f.md.AppendRowGroup()
	for i := range f.s.cols {
		spec := &f.s.cols[i]
		cc := rg.NextColumnChunk()
		c, err := encode(i, spec)
		if err != nil {
			return fmt.Errorf("row group %d, column %s: %w", f.groups, cc.Descr().Path(), err)
		}
		if spec.stats {
			cc.SetStats(stats(i, spec, c))
		}
		if err := cc.Finish(chunkMeta(c.info, c.values), c.dict, false, encodingStats(c.info, c.dict)); err != nil {
			return fmt.Errorf("row group %d, column %s metadata: %w", f.groups, cc.Descr().Path(), err)
		}
	}
	rg.SetNumRows(rows)
	if err := rg.Finish(0, f.groups); err != nil {
		return fmt.Errorf("row group %d metadata: %w", f.groups, err)
	}
	f.groups++
	return nil
}

func chunkMeta(info chunkInfo, values int) metadata.ChunkMetaInfo {
	return metadata.ChunkMetaInfo{
		NumValues:        int64(values),
		DictPageOffset:   info.dictOffset,
		IndexPageOffset:  -1,
		DataPageOffset:   info.dataOffset,
		CompressedSize:   info.compressed,
		UncompressedSize: info.uncompressed,
	}
}

func encodingStats(info chunkInfo, dict bool) metadata.EncodingStats {
	if dict {
		return metadata.EncodingStats{
			DictEncodingStats: map[parquet.Encoding]int32{parquet.Encodings.Plain: 1},
			DataEncodingStats: map[parquet.Encoding]int32{parquet.Encodings.RLEDict: info.dataPages},
		}
	}
	return metadata.EncodingStats{DataEncodingStats: map[parquet.Encoding]int32{parquet.Encodings.Plain: info.dataPages}}
}

// check validates the shape of a row group before anything is written.
func (s *Schema) check(rows int, cols []Column) error {
	if s.nested {
		return errors.New("a nested schema is written by leaves (WriteLeaves)")
	}
	return s.checkColumns(len(cols), rows, func(i int) error { return s.cols[i].check(&cols[i], rows) })
}

// checkColumns checks that a row group of n columns and rows rows fits s,
// then each column with check.
func (s *Schema) checkColumns(n, rows int, check func(i int) error) error {
	if n != len(s.cols) {
		return fmt.Errorf("row group of %d columns, schema has %d", n, len(s.cols))
	}
	if rows <= 0 {
		return fmt.Errorf("row group of %d rows", rows)
	}
	for i := range n {
		if err := check(i); err != nil {
			return fmt.Errorf("column %s: %w", s.pq.Column(i).Path(), err)
		}
	}
	return nil
}

func (cs *colSpec) check(c *Column, rows int) error {
	switch {
	case c.Valid != nil && !cs.nullable:
		return errors.New("NULLs in a required column")
	case c.Valid != nil && len(c.Valid) < (rows+7)/8:
		return fmt.Errorf("validity bitmap of %d bytes for %d rows", len(c.Valid), rows)
	case cs.width == 4 && len(c.I32) < rows, cs.width == 8 && len(c.I64) < rows:
		return fmt.Errorf("fewer values than the %d rows", rows)
	case c.Repeat && cs.width != 0:
		return errors.New("a repeated value in a column of numbers")
	case c.Repeat:
	case cs.width == 0 && len(c.Offs) < rows+1:
		return fmt.Errorf("%d offsets for %d rows", len(c.Offs), rows)
	case cs.width == 0 && (c.Offs[0] < 0 || int(c.Offs[rows]) > len(c.Data)):
		return fmt.Errorf("offsets out of the %d bytes of data", len(c.Data))
	}
	return nil
}

// Close writes the footer (a file with no row group is a valid empty
// file). The File cannot be used afterwards; the io.Writer is not closed.
func (f *File) Close() error {
	if f.err != nil {
		return f.err
	}
	f.err = errors.New("parquet file already closed")
	if err := f.start(); err != nil {
		return err
	}
	md, err := f.md.Finish()
	if err != nil {
		return fmt.Errorf("parquet footer: %w", err)
	}
	before := f.out.off
	if _, err := md.WriteTo(&f.out, nil); err != nil {
		return fmt.Errorf("write parquet footer: %w", err)
	}
	tail := binary.LittleEndian.AppendUint32(nil, uint32(f.out.off-before))
	if err := f.out.write(append(tail, magic...)); err != nil {
		return fmt.Errorf("write parquet footer: %w", err)
	}
	return nil
}
