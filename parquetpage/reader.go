package parquetpage

import (
	"errors"
	"fmt"
	"math/bits"
)

// Kind is the physical type of a column Reader decodes.
type Kind uint8

const (
	ByteArray Kind = iota
	Int32
	Int64
	Boolean
)

// width is a number's PLAIN width in bytes; 0 for byte arrays and
// booleans.
func (k Kind) width() int {
	switch k {
	case Int32:
		return 4
	case Int64:
		return 8
	}
	return 0
}

// Chunk is one column chunk to read: its bytes from its first page to its
// last, and what the footer says of it.
type Chunk struct {
	Data           []byte
	Codec          Codec
	Kind           Kind
	MaxDef, MaxRep int16
	// MaxPage bounds what one page may decompress to: the chunk's
	// uncompressed size, as its footer says.
	MaxPage int64
	// Levels is the number of levels (values, NULLs included) the footer
	// gives the chunk: pages that hold more are an error.
	Levels int64
}

// maxBatchBytes bounds the byte-array values of one Read: ranges are
// int32, and a page cannot make the reader copy without limit.
const maxBatchBytes = 1 << 30

// Batch is where Read puts the next levels of a column chunk: as many as
// Nulls is long (in a column without repetition, a level is a row).
// Nulls[k] is set when level k holds no value; a NULL is 0, false or an
// empty range. Read sets Text and Direct, and appends to Buf.
type Batch struct {
	Nulls []bool
	// Defs and Reps, when not nil (as long as Nulls), get the definition
	// and repetition levels themselves.
	Defs, Reps []int16
	// Nums gets INT32 and INT64 values, Bools BOOLEAN ones.
	Nums  []int64
	Bools []bool
	// Byte arrays: value k is Buf[Starts[k]:Ends[k]], or, when Direct,
	// Text[Starts[k]:Ends[k]]. A value equal to the previous one by
	// dictionary index shares its range.
	Buf          []byte
	Starts, Ends []int32
	Text         string
	Direct       bool
}

// Reader decodes the levels and values of one column chunk, page by page,
// straight from the pages' bytes into a Batch (no value slices, no
// per-value decode step): data pages v1 and v2, PLAIN or
// dictionary-encoded (RLE booleans too), RLE levels, uncompressed, Snappy
// or zstd: the pages this project writes and most writers write. Anything
// else is ErrUnsupported before any value of that page is read. A Reader
// keeps its buffers from chunk to chunk; it is not safe for concurrent use.
type Reader struct {
	pages  pages
	kind   Kind
	width  int   // PLAIN width of numbers
	maxDef int16 // definition level of a present value
	maxRep int16
	levels int64 // levels read so far
	total  int64 // levels in the chunk (Chunk.Levels)
	paged  int64 // levels in the data pages started
	data   int   // data pages started
	// handOver, when > 0, makes data page handOver ErrUnsupported (tests).
	handOver int

	dict  []byte  // dictionary values: byte arrays concatenated, or numbers of width bytes
	dstr  string  // byte arrays: dict as a string, once a Read needed it (dictText)
	doffs []int32 // byte arrays: value k of the dictionary is dict[doffs[k]:doffs[k+1]]
	dictN int     // values in the dictionary; -1: no dictionary page

	left    int         // levels left in the current page
	defs    rleDecoder  // its definition levels (maxDef > 0)
	reps    rleDecoder  // its repetition levels (maxRep > 0)
	idx     *rleDecoder // its dictionary indices, or booleans; nil: PLAIN values
	idxs    rleDecoder
	plain   []byte  // PLAIN: the values not yet read
	scratch []int32 // levels or indices of one Read
}

// Reset starts reading chunk c, keeping the buffers.
func (r *Reader) Reset(c Chunk) {
	*r = Reader{pages: r.pages, kind: c.Kind, width: c.Kind.width(), maxDef: c.MaxDef, maxRep: c.MaxRep, total: c.Levels,
		dict: r.dict[:0], doffs: r.doffs[:0], dictN: -1, scratch: r.scratch}
	r.pages.reset(c.Data, c.Codec, c.MaxDef, c.MaxRep, c.MaxPage)
}

// HandOverAt makes data page n of the chunk (from 1) ErrUnsupported, as a
// page this package does not decode, so that tests can check a caller's
// hand-over in the middle of a chunk; 0 turns it off. Reset turns it off.
func (r *Reader) HandOverAt(n int) { r.handOver = n }

// Levels is how many levels (rows, without repetition) Read has read.
func (r *Reader) Levels() int64 { return r.levels }

// Read reads the next len(b.Nulls) levels into b. It returns how many it
// read: fewer than asked with an error, io.EOF at the chunk's end, or
// ErrUnsupported at a page it does not decode (the rest is to read
// otherwise, from level Levels()).
func (r *Reader) Read(b *Batch) (int, error) {
	b.Text, b.Direct = "", false
	if cap(r.scratch) < len(b.Nulls) {
		r.scratch = make([]int32, len(b.Nulls))
	}
	idxs := r.scratch[:len(b.Nulls)]
	done := 0
	for done < len(b.Nulls) {
		if r.left == 0 {
			if err := r.nextPage(); err != nil {
				return done, err
			}
		}
		n := min(r.left, len(b.Nulls)-done)
		if err := r.values(b, done, n, idxs[:n]); err != nil {
			return done, err
		}
		if len(b.Buf) > maxBatchBytes {
			return done, fmt.Errorf("more than %d bytes of values in a batch", maxBatchBytes)
		}
		r.left -= n
		r.levels += int64(n)
		done += n
	}
	return done, nil
}

// values decodes n levels of the current page into b from level from.
func (r *Reader) values(b *Batch, from, n int, idxs []int32) error {
	nulls := b.Nulls[from : from+n]
	if err := r.repLevels(b, from, n, idxs); err != nil {
		return err
	}
	present, err := r.defLevels(b, from, n, idxs)
	if err != nil {
		return err
	}
	if r.idx != nil {
		if err := r.idx.read(idxs[:present]); err != nil {
			if r.kind == Boolean {
				return fmt.Errorf("booleans: %w", err)
			}
			return fmt.Errorf("dictionary indices: %w", err)
		}
	}
	whole := from == 0 && n == len(b.Nulls) && len(b.Buf) == 0
	switch {
	case r.kind == Boolean:
		err = boolValues(b.Bools[from:from+n], nulls, idxs[:present])
	case r.width > 0:
		err = r.numValues(b.Nums[from:from+n], nulls, idxs[:present])
	case r.idx != nil && whole && len(r.dict) <= maxDictText:
		err = r.dictText(b, idxs[:present])
	case r.idx != nil:
		b.Buf, err = r.dictValues(b.Buf, b.Starts[from:from+n], b.Ends[from:from+n], nulls, idxs[:present])
	case whole:
		err = r.plainText(b)
	default:
		b.Buf, err = r.plainValues(b.Buf, b.Starts[from:from+n], b.Ends[from:from+n], nulls)
	}
	return err
}

// repLevels sets b.Reps (when asked) from the next n repetition levels.
func (r *Reader) repLevels(b *Batch, from, n int, lv []int32) error {
	if b.Reps == nil {
		if r.maxRep > 0 {
			return r.reps.read(lv) // not kept
		}
		return nil
	}
	reps := b.Reps[from : from+n]
	if r.maxRep == 0 {
		clear(reps)
		return nil
	}
	if err := r.reps.read(lv); err != nil {
		return fmt.Errorf("repetition levels: %w", err)
	}
	for k, l := range lv {
		if l > int32(r.maxRep) {
			return fmt.Errorf("repetition level %d over the maximum %d", l, r.maxRep)
		}
		reps[k] = int16(l)
	}
	return nil
}

// defLevels sets b.Nulls (and b.Defs when asked) from the next n
// definition levels (lv is scratch of as many) and returns the number of
// values present. Levels all in one run of the maximum (no NULL) are not
// read one by one.
func (r *Reader) defLevels(b *Batch, from, n int, lv []int32) (int, error) {
	nulls := b.Nulls[from : from+n]
	var defs []int16
	if b.Defs != nil {
		defs = b.Defs[from : from+n]
	}
	all := r.maxDef == 0
	if !all {
		var err error
		if all, err = r.defs.skipRepeat(n, uint32(r.maxDef)); err != nil {
			return 0, fmt.Errorf("definition levels: %w", err)
		}
	}
	if all {
		clear(nulls)
		for k := range defs {
			defs[k] = r.maxDef
		}
		return n, nil
	}
	if err := r.defs.read(lv); err != nil {
		return 0, fmt.Errorf("definition levels: %w", err)
	}
	present := 0
	for k, l := range lv {
		if l > int32(r.maxDef) {
			return 0, fmt.Errorf("definition level %d over the maximum %d", l, r.maxDef)
		}
		nulls[k] = l < int32(r.maxDef)
		if !nulls[k] {
			present++
		}
	}
	for k, l := range lv[:len(defs)] {
		defs[k] = int16(l)
	}
	return present, nil
}

// nextPage moves to the next data page, reading a dictionary page on the
// way.
func (r *Reader) nextPage() error {
	for {
		p, err := r.pages.next()
		if err != nil {
			return err
		}
		if p.typ == pageDictionary {
			if err := r.dictionary(p); err != nil {
				return err
			}
			continue
		}
		if r.data++; p.numValues <= 0 || r.data == r.handOver {
			return ErrUnsupported
		}
		if r.paged += int64(p.numValues); r.paged > r.total {
			return fmt.Errorf("data pages of more than the chunk's %d levels", r.total)
		}
		width := uint(bits.Len16(uint16(r.maxDef)))
		r.defs = newRLE(p.def, width)
		r.reps = newRLE(p.rep, uint(bits.Len16(uint16(r.maxRep))))
		if err := r.startValues(p.encoding, p.values); err != nil {
			return err
		}
		r.left = p.numValues
		return nil
	}
}

// startValues sets up the values of a data page.
func (r *Reader) startValues(enc int32, data []byte) error {
	switch {
	case r.kind == Boolean && enc == encPlain:
		r.idxs = newBitPacked(data, 8*len(data))
		r.idx, r.plain = &r.idxs, nil
	case r.kind == Boolean && enc == encRLE:
		run, _, err := lengthPrefixed(data)
		if err != nil {
			return fmt.Errorf("RLE booleans: %w", err)
		}
		r.idxs = newRLE(run, 1)
		r.idx, r.plain = &r.idxs, nil
	case r.kind == Boolean:
		return ErrUnsupported
	case enc == encPlain:
		r.idx, r.plain = nil, data
	case enc == encRLEDict, enc == encPlainDict:
		if r.dictN < 0 {
			return errors.New("dictionary-encoded page without a dictionary page")
		}
		if len(data) < 1 || data[0] > 32 {
			return errors.New("bad dictionary index bit width")
		}
		r.idxs = newRLE(data[1:], uint(data[0]))
		r.idx, r.plain = &r.idxs, nil
	default:
		return ErrUnsupported
	}
	return nil
}

// boolValues sets the booleans of the levels from vals, the present ones'.
func boolValues(out []bool, nulls []bool, vals []int32) error {
	v := 0
	for k := range out {
		if nulls[k] {
			out[k] = false
			continue
		}
		out[k] = vals[v] != 0
		v++
	}
	return nil
}
