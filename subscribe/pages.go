package subscribe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// colPages decodes one column chunk of byte arrays, INT32 or INT64 page
// by page, from the pages' bytes straight into a chunk (no value slices,
// no per-value decode step): data pages v1 and v2, PLAIN or
// dictionary-encoded, with RLE definition levels, the way the relay and
// most writers write them. Anything else is errPageLayout before any value
// of that page is read: the caller reads the rest of the column chunk with
// arrow-go instead.
type colPages struct {
	pages  file.PageReader
	maxDef int16
	width  int   // 0: byte arrays; 4: INT32; 8: INT64
	rows   int64 // rows read so far
	data   int   // data pages started
	// handOver, when > 0, makes data page handOver errPageLayout (tests).
	handOver int

	dict  []byte  // dictionary values: byte arrays concatenated, or numbers of width bytes
	dstr  string  // byte arrays: dict as a string, once a chunk needed it (dictText)
	doffs []int32 // byte arrays: value k of the dictionary is dict[doffs[k]:doffs[k+1]]
	dictN int     // values in the dictionary; -1: no dictionary page

	left  int         // rows left in the current page
	defs  rleDecoder  // its definition levels (maxDef > 0)
	idx   *rleDecoder // its dictionary indices; nil: PLAIN values
	idxs  rleDecoder
	plain []byte // PLAIN: the values not yet read
}

// errPageLayout: a page colPages does not decode.
var errPageLayout = errors.New("page layout not decoded by colPages")

// colOut is where colPages puts the next rows of a column: byte arrays
// appended to buf (value k is buf[starts[k]:ends[k]]), numbers in nums.
// NULL: nulls[k], an empty range or 0. When one PLAIN page holds every
// row asked (direct), the byte arrays are ranges of text instead, one copy
// of the page's bytes from the first value to the last.
type colOut struct {
	buf          []byte
	starts, ends []int32
	nums         []int64
	nulls        []bool
	text         string
	direct       bool
}

// reset starts reading the column chunk of pages (values width bytes
// wide, 0 for byte arrays), keeping the dictionary's buffers.
func (s *colPages) reset(pages file.PageReader, maxDef int16, width int) {
	*s = colPages{pages: pages, maxDef: maxDef, width: width, dict: s.dict[:0], doffs: s.doffs[:0], dictN: -1}
}

// read reads the next len(o.nulls) rows into o. A byte array equal to the
// previous one by dictionary index shares its range. idxs is scratch of
// at least len(o.nulls). It returns the rows read, fewer than asked with
// an error (errPageLayout: the rest is to read otherwise).
func (s *colPages) read(o *colOut, idxs []int32) (int, error) {
	done := 0
	for done < len(o.nulls) {
		if s.left == 0 {
			if err := s.nextPage(); err != nil {
				return done, err
			}
		}
		n := min(s.left, len(o.nulls)-done)
		if err := s.values(o, done, n, idxs[:n]); err != nil {
			return done, err
		}
		if len(o.buf) > maxChunkBytes {
			return done, fmt.Errorf("more than %d bytes of values in a chunk", maxChunkBytes)
		}
		s.left -= n
		s.rows += int64(n)
		done += n
	}
	return done, nil
}

// values decodes n rows of the current page into o from row from.
func (s *colPages) values(o *colOut, from, n int, idxs []int32) error {
	nulls := o.nulls[from : from+n]
	present, err := s.levels(nulls, idxs[:n])
	if err != nil {
		return err
	}
	if s.idx != nil {
		if err := s.idx.read(idxs[:present]); err != nil {
			return fmt.Errorf("dictionary indices: %w", err)
		}
	}
	switch {
	case s.width > 0:
		err = s.numValues(o.nums[from:from+n], nulls, idxs[:present])
	case s.idx != nil && from == 0 && n == len(o.nulls) && len(o.buf) == 0 && len(s.dict) <= maxDictText:
		err = s.dictText(o, idxs[:present])
	case s.idx != nil:
		o.buf, err = s.dictValues(o.buf, o.starts[from:from+n], o.ends[from:from+n], nulls, idxs[:present])
	case from == 0 && n == len(o.nulls) && len(o.buf) == 0:
		err = s.plainText(o)
	default:
		o.buf, err = s.plainValues(o.buf, o.starts[from:from+n], o.ends[from:from+n], nulls)
	}
	return err
}

// levels sets nulls from the next len(nulls) definition levels (lv is
// scratch of as many) and returns the number of values present. Rows all
// in one run of the maximum level (no NULL) are not read one by one.
func (s *colPages) levels(nulls []bool, lv []int32) (int, error) {
	if s.maxDef == 0 {
		clear(nulls)
		return len(nulls), nil
	}
	if all, err := s.defs.skipRepeat(len(nulls), uint32(s.maxDef)); err != nil || all {
		clear(nulls)
		return len(nulls), wrapErr("definition levels", err)
	}
	if err := s.defs.read(lv); err != nil {
		return 0, fmt.Errorf("definition levels: %w", err)
	}
	present := 0
	for k, l := range lv {
		if l > int32(s.maxDef) {
			return 0, fmt.Errorf("definition level %d over the maximum %d", l, s.maxDef)
		}
		nulls[k] = l < int32(s.maxDef)
		if !nulls[k] {
			present++
		}
	}
	return present, nil
}

// wrapErr wraps a non-nil err with what was being read.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// numValues sets the numbers of the rows, from the dictionary by idxs or
// from the PLAIN values.
func (s *colPages) numValues(nums []int64, nulls []bool, idxs []int32) error {
	if len(idxs) == len(nums) { // no NULL
		return s.numDense(nums, idxs)
	}
	return s.numSparse(nums, nulls, idxs)
}

// numSparse is numValues row by row, NULLs included.
func (s *colPages) numSparse(nums []int64, nulls []bool, idxs []int32) error {
	src, w := s.plain, s.width
	if s.idx != nil {
		src = s.dict
	} else if len(idxs)*w > len(src) {
		return errors.New("PLAIN values cut short")
	}
	v := 0
	for k := range nums {
		if nulls[k] {
			nums[k] = 0
			continue
		}
		at := v * w
		if s.idx != nil {
			if uint(idxs[v]) >= uint(s.dictN) {
				return fmt.Errorf("dictionary index %d out of %d values", idxs[v], s.dictN)
			}
			at = int(idxs[v]) * w
		}
		v++
		if w == 4 {
			nums[k] = int64(int32(binary.LittleEndian.Uint32(src[at:])))
		} else {
			nums[k] = int64(binary.LittleEndian.Uint64(src[at:]))
		}
	}
	if s.idx == nil {
		s.plain = src[v*w:]
	}
	return nil
}

// numDense is numValues for rows without a NULL: one loop per width and
// source, no per-row branch but the dictionary's bound.
func (s *colPages) numDense(nums []int64, idxs []int32) error {
	w := s.width
	if s.idx == nil {
		src := s.plain
		if len(nums)*w > len(src) {
			return errors.New("PLAIN values cut short")
		}
		if w == 4 {
			for k := range nums {
				nums[k] = int64(int32(binary.LittleEndian.Uint32(src[4*k:])))
			}
		} else {
			for k := range nums {
				nums[k] = int64(binary.LittleEndian.Uint64(src[8*k:]))
			}
		}
		s.plain = src[len(nums)*w:]
		return nil
	}
	dict, n := s.dict, uint(s.dictN)
	for k, i := range idxs {
		if uint(i) >= n {
			return fmt.Errorf("dictionary index %d out of %d values", i, s.dictN)
		}
		if w == 4 {
			nums[k] = int64(int32(binary.LittleEndian.Uint32(dict[4*int(i):])))
		} else {
			nums[k] = int64(binary.LittleEndian.Uint64(dict[8*int(i):]))
		}
	}
	return nil
}

func (s *colPages) dictValues(buf []byte, starts, ends []int32, nulls []bool, idxs []int32) ([]byte, error) {
	dict, doffs := s.dict, s.doffs
	prev, v := int32(-1), 0
	var from, to int32
	for k := range starts {
		if nulls[k] {
			starts[k], ends[k] = 0, 0
			continue
		}
		i := idxs[v]
		v++
		if i != prev {
			if uint(i) >= uint(len(doffs)-1) {
				return buf, fmt.Errorf("dictionary index %d out of %d values", i, len(doffs)-1)
			}
			from, prev = int32(len(buf)), i
			buf = append(buf, dict[doffs[i]:doffs[i+1]]...)
			to = int32(len(buf))
		}
		starts[k], ends[k] = from, to
	}
	return buf, nil
}

func (s *colPages) plainValues(buf []byte, starts, ends []int32, nulls []bool) ([]byte, error) {
	p := s.plain
	for k := range starts {
		if nulls[k] {
			starts[k], ends[k] = 0, 0
			continue
		}
		if len(p) < 4 {
			return buf, errors.New("PLAIN values cut short")
		}
		l := binary.LittleEndian.Uint32(p)
		if uint64(l) > uint64(len(p)-4) {
			return buf, fmt.Errorf("PLAIN value of %d bytes past the page's end", l)
		}
		starts[k] = int32(len(buf))
		buf = append(buf, p[4:4+l]...)
		ends[k] = int32(len(buf))
		p = p[4+l:]
	}
	s.plain = p
	return buf, nil
}

// maxDictText bounds the dictionaries whose rows are ranges of the
// dictionary itself (dictText): keeping one value keeps its dictionary, so
// a handler that keeps one key per file (a map of the last event per key)
// keeps at most this much per file, about what a chunk's own column of
// keys would keep. The relay's topic, type and key dictionaries are far
// smaller; a larger one (headers unique per event) is copied row by row.
const maxDictText = 64 << 10

// dictText sets every row of o from the dictionary without a copy: o.text
// is the dictionary's values (one string per dictionary page, made once,
// never reused), each row a range of it.
func (s *colPages) dictText(o *colOut, idxs []int32) error {
	if s.dstr == "" {
		s.dstr = string(s.dict)
	}
	doffs, v := s.doffs, 0
	for k, null := range o.nulls {
		if null {
			o.starts[k], o.ends[k] = 0, 0
			continue
		}
		i := idxs[v]
		v++
		if uint(i) >= uint(len(doffs)-1) {
			return fmt.Errorf("dictionary index %d out of %d values", i, len(doffs)-1)
		}
		o.starts[k], o.ends[k] = doffs[i], doffs[i+1]
	}
	o.text, o.direct = s.dstr, true
	return nil
}

// plainText reads every row of o from the current PLAIN page with one
// copy: o.text is the page's bytes from the first value to the last,
// length prefixes included, each value a range of it.
func (s *colPages) plainText(o *colOut) error {
	p, off := s.plain, 0
	for k, null := range o.nulls {
		if null {
			o.starts[k], o.ends[k] = 0, 0
			continue
		}
		if len(p)-off < 4 {
			return errors.New("PLAIN values cut short")
		}
		l := binary.LittleEndian.Uint32(p[off:])
		if uint64(l) > uint64(len(p)-off-4) || off+4+int(l) > maxChunkBytes {
			return fmt.Errorf("PLAIN value of %d bytes past the page's end", l)
		}
		o.starts[k] = int32(off + 4)
		off += 4 + int(l)
		o.ends[k] = int32(off)
	}
	o.text, o.direct = string(p[:off]), true // one allocation, never reused
	s.plain = p[off:]
	return nil
}

// nextPage moves to the next data page, reading a dictionary page on the
// way.
func (s *colPages) nextPage() error {
	for {
		if !s.pages.Next() {
			if err := s.pages.Err(); err != nil {
				return err
			}
			return errors.New("column chunk ends before the row group's rows")
		}
		switch p := s.pages.Page().(type) {
		case *file.DictionaryPage:
			if err := s.dictionary(p); err != nil {
				return err
			}
		case *file.DataPageV1:
			if p.DefinitionLevelEncoding() != parquet.Encodings.RLE && s.maxDef > 0 {
				return errPageLayout
			}
			data := p.Data()
			if len(data) != int(p.UncompressedSize()) {
				return errPageLayout // values streamed, not in Data
			}
			if s.maxDef > 0 {
				if len(data) < 4 || uint64(binary.LittleEndian.Uint32(data)) > uint64(len(data)-4) {
					return errors.New("definition levels past the page's end")
				}
				l := binary.LittleEndian.Uint32(data)
				s.defs = newRLE(data[4:4+l], uint(bits.Len16(uint16(s.maxDef))))
				data = data[4+l:]
			}
			return s.startValues(parquet.Encoding(p.Encoding()), data, int(p.NumValues()))
		case *file.DataPageV2:
			data := p.Data()
			dl := int(p.DefinitionLevelByteLen())
			if p.RepetitionLevelByteLen() != 0 || len(data) != int(p.UncompressedSize()) {
				return errPageLayout
			}
			if dl < 0 || dl > len(data) {
				return errors.New("definition levels past the page's end")
			}
			s.defs = newRLE(data[:dl], uint(bits.Len16(uint16(s.maxDef))))
			return s.startValues(parquet.Encoding(p.Encoding()), data[dl:], int(p.NumValues()))
		default:
			return errPageLayout
		}
	}
}

// startValues sets up the values of a data page of n rows.
func (s *colPages) startValues(enc parquet.Encoding, data []byte, n int) error {
	if s.data++; n <= 0 || s.data == s.handOver {
		return errPageLayout
	}
	switch enc {
	case parquet.Encodings.Plain:
		s.idx, s.plain = nil, data
	case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
		if s.dictN < 0 {
			return errors.New("dictionary-encoded page without a dictionary page")
		}
		if len(data) < 1 || data[0] > 32 {
			return errors.New("bad dictionary index bit width")
		}
		s.idxs = newRLE(data[1:], uint(data[0]))
		s.idx, s.plain = &s.idxs, nil
	default:
		return errPageLayout
	}
	s.left = n
	return nil
}

// dictionary keeps the values of a dictionary page (its buffer is reused
// by the pages that follow).
func (s *colPages) dictionary(p *file.DictionaryPage) error {
	if e := parquet.Encoding(p.Encoding()); e != parquet.Encodings.Plain && e != parquet.Encodings.PlainDict {
		return errPageLayout
	}
	data, n := p.Data(), int(p.NumValues())
	if n < 0 || n > len(data)/max(s.width, 4) {
		return fmt.Errorf("dictionary page of %d values in %d bytes", n, len(data))
	}
	s.dictN, s.dstr = n, ""
	if s.width > 0 {
		s.dict = append(s.dict[:0], data[:n*s.width]...)
		return nil
	}
	s.dict, s.doffs = slices.Grow(s.dict[:0], len(data)-4*n), append(slices.Grow(s.doffs[:0], n+1), 0)
	for range n {
		if len(data) < 4 || uint64(binary.LittleEndian.Uint32(data)) > uint64(len(data)-4) {
			return errors.New("dictionary value past the page's end")
		}
		l := binary.LittleEndian.Uint32(data)
		s.dict = append(s.dict, data[4:4+l]...)
		s.doffs = append(s.doffs, int32(len(s.dict)))
		data = data[4+l:]
	}
	return nil
}
