package parquetpage

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/klauspost/compress/s2"
)

// Page bounds: a data page holds at most maxPageRows rows and, past its
// first value, about pageBytes bytes of values before compression; a
// dictionary larger than dictBytes (PLAIN) is abandoned for PLAIN pages,
// as arrow-go does at its default dictionary page limit.
const (
	pageBytes   = 1 << 20
	maxPageRows = 20480 // a multiple of 8: pages start on bitmap bytes
	dictBytes   = 1 << 20
)

// encoder holds the scratch buffers of column chunk encoding, reused from
// chunk to chunk and, through a pool, from file to file.
type encoder struct {
	page []byte  // uncompressed page
	comp []byte  // compressed page
	hdr  []byte  // page header
	idx  []int32 // dictionary indices of the chunk's present values
	wbuf []byte  // write buffer lent to the file's sink (sink.go)
	dict dictionary
	key  [8]byte
}

// scratchBytes is the memory the encoder's buffers hold.
func (e *encoder) scratchBytes() int {
	d := &e.dict
	return cap(e.page) + cap(e.comp) + cap(e.hdr) + cap(e.wbuf) + 4*cap(e.idx) +
		cap(d.data) + 4*cap(d.offs) + 4*cap(d.slots) + 8*cap(d.hash)
}

// chunkInfo is what a written column chunk tells the footer.
type chunkInfo struct {
	dictOffset   int64 // 0: no dictionary page
	dataOffset   int64
	compressed   int64
	uncompressed int64
	dataPages    int32
}

// writeChunk writes column c of rows rows as a column chunk: a dictionary
// page and RLE_DICTIONARY pages when spec asks for a dictionary and it
// stays under dictBytes, else PLAIN pages.
func (e *encoder) writeChunk(out *sink, spec *colSpec, c *Column, rows int) (chunkInfo, bool, error) {
	var info chunkInfo
	start := out.off
	useDict := spec.dictionary && e.buildDict(spec, c, rows)
	if useDict {
		info.dictOffset = out.off
		if err := e.writeDictPage(out, spec, &info); err != nil {
			return info, false, fmt.Errorf("dictionary page: %w", err)
		}
	}
	info.dataOffset = out.off
	vals := 0 // present values before the page
	for from := 0; from < rows; {
		to := e.pageEnd(spec, c, from, rows, useDict)
		present, enc := e.dataPage(spec, c, from, to, vals, useDict)
		if err := e.writePage(out, pageHeader{typ: pageData, numValues: int32(to - from), encoding: enc}, &info); err != nil {
			return info, false, fmt.Errorf("data page of rows %d-%d: %w", from, to, err)
		}
		info.dataPages++
		vals += present
		from = to
	}
	info.compressed = out.off - start
	return info, useDict, nil
}

// dataPage puts in e.page the uncompressed data page of rows [from, to),
// whose first present value is value vals of the chunk: definition levels
// (optional columns), then the values, dictionary indices or PLAIN. It
// returns how many values are present and their encoding.
func (e *encoder) dataPage(spec *colSpec, c *Column, from, to, vals int, dict bool) (int, int32) {
	e.page = e.page[:0]
	present := to - from
	if spec.nullable {
		e.page = append(e.page, 0, 0, 0, 0)
		e.page = appendLevels(e.page, c.Valid, from, to-from)
		binary.LittleEndian.PutUint32(e.page, uint32(len(e.page)-4))
		present = countValid(c.Valid, from, to)
	}
	if !dict {
		e.appendPlain(spec, c, from, to)
		return present, encPlain
	}
	w := bitWidth(e.dict.len())
	e.page = append(e.page, byte(w))
	e.page = appendHybrid(e.page, e.idx[vals:vals+present], w)
	return present, encRLEDict
}

// pageEnd returns the end of the data page starting at row from: a
// multiple of 8 rows (or the last row), at most maxPageRows, and past its
// first 8 rows at most about pageBytes of values.
func (e *encoder) pageEnd(spec *colSpec, c *Column, from, rows int, dict bool) int {
	limit := min(rows, from+maxPageRows)
	switch {
	case dict:
		return limit
	case spec.width > 0:
		return min(limit, from+max(8, pageBytes/spec.width/8*8))
	}
	to := from
	for to < limit {
		next := min(to+8, limit)
		if to > from && c.spanBytes(from, next)+4*(next-from) > pageBytes {
			break
		}
		to = next
	}
	return to
}

// writePage compresses e.page and writes it with its header.
func (e *encoder) writePage(out *sink, h pageHeader, info *chunkInfo) error {
	if s2.MaxEncodedLen(len(e.page)) > math.MaxInt32 || s2.MaxEncodedLen(len(e.page)) < 0 {
		return fmt.Errorf("page of %d bytes: past Parquet's 2 GiB", len(e.page))
	}
	e.comp = s2.EncodeSnappy(e.comp[:cap(e.comp)], e.page)
	h.uncompressed, h.compressed = int32(len(e.page)), int32(len(e.comp))
	e.hdr = appendPageHeader(e.hdr[:0], h)
	info.uncompressed += int64(len(e.hdr) + len(e.page))
	if err := out.write(e.hdr); err != nil {
		return err
	}
	return out.write(e.comp)
}

// writeDictPage writes the dictionary's values as a PLAIN dictionary page.
func (e *encoder) writeDictPage(out *sink, spec *colSpec, info *chunkInfo) error {
	e.page = e.page[:0]
	for k := range int32(e.dict.len()) {
		v := e.dict.value(k)
		if spec.width == 0 {
			e.page = binary.LittleEndian.AppendUint32(e.page, uint32(len(v)))
		}
		e.page = append(e.page, v...)
	}
	return e.writePage(out, pageHeader{typ: pageDictionary, numValues: int32(e.dict.len()), encoding: encPlain}, info)
}

// countValid counts the rows of [from, to) with a value.
func countValid(valid []byte, from, to int) int {
	if valid == nil {
		return to - from
	}
	n := 0
	for r := from; r < to; {
		if r%8 == 0 && to-r >= 8 {
			n += bits.OnesCount8(valid[r/8])
			r += 8
			continue
		}
		n += int(valid[r/8] >> (r % 8) & 1)
		r++
	}
	return n
}

// isValid reports whether row r has a value.
func isValid(valid []byte, r int) bool {
	return valid == nil || valid[r/8]>>(r%8)&1 == 1
}
