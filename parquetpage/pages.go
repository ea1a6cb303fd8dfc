package parquetpage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codec is a column chunk's compression, as parquet.thrift numbers it
// (arrow-go's compress.Compression has the same values).
type Codec int32

// The codecs whose pages this package decompresses; a chunk of another
// (GZIP, BROTLI, LZ4, LZ4_RAW, LZO) is ErrUnsupported.
const (
	Uncompressed Codec = 0
	Snappy       Codec = 1
	Zstd         Codec = 6
)

// ErrUnsupported is a page this package does not decode: another codec,
// an encoding other than PLAIN, dictionary and RLE, deprecated BIT_PACKED
// levels. Nothing of that page has been read; the caller reads the rest
// of the column chunk with a general Parquet reader.
var ErrUnsupported = errors.New("parquetpage: page layout not decoded")

// maxPageBytes bounds what one page may decompress to whatever its
// chunk's footer says.
const maxPageBytes = 1 << 30

// page is one page of a column chunk, decompressed: its levels (the
// hybrid RLE runs, without v1's length prefixes; nil when the column has
// none) and values.
type page struct {
	typ       int32 // pageData (v1 and v2 alike) or pageDictionary
	numValues int   // levels (data page) or values (dictionary page)
	encoding  int32
	rep, def  []byte
	values    []byte
}

// pages reads the pages of one column chunk from its bytes. A page
// stored uncompressed is read where it lies; a compressed one is
// decompressed into a buffer reused from page to page (the previous
// page's bytes are gone once next returns).
type pages struct {
	data           []byte // the pages not read yet
	codec          Codec
	maxDef, maxRep int16
	limit          int // the most a page may decompress to
	buf            []byte
}

// reset starts reading the chunk of data.
func (p *pages) reset(data []byte, codec Codec, maxDef, maxRep int16, limit int64) {
	*p = pages{data: data, codec: codec, maxDef: maxDef, maxRep: maxRep, limit: int(min(limit, maxPageBytes)), buf: p.buf}
}

// next returns the next data or dictionary page (index pages are passed
// over); io.EOF at the chunk's end.
func (p *pages) next() (page, error) {
	for len(p.data) > 0 {
		h, n, err := readPageHeader(p.data)
		if err != nil {
			return page{}, err
		}
		body := p.data[n:]
		if int(h.compressed) > len(body) {
			return page{}, fmt.Errorf("page of %d bytes past the chunk's end (%d left)", h.compressed, len(body))
		}
		if int(h.uncompressed) > p.limit {
			return page{}, fmt.Errorf("page of %d bytes past the chunk's %d", h.uncompressed, p.limit)
		}
		body, p.data = body[:h.compressed], body[h.compressed:]
		switch h.typ {
		case pageIndex:
			continue
		case pageDictionary:
			v, err := p.decompress(body, int(h.uncompressed))
			return page{typ: pageDictionary, numValues: int(h.numValues), encoding: h.encoding, values: v}, err
		case pageData:
			return p.dataV1(h, body)
		case pageDataV2:
			return p.dataV2(h, body)
		}
	}
	return page{}, io.EOF
}

// dataV1 splits a data page v1: repetition levels, definition levels
// (each after its 4-byte length) and values, all compressed together.
func (p *pages) dataV1(h pageHeader, body []byte) (page, error) {
	if (p.maxRep > 0 && h.repEncoding != encRLE) || (p.maxDef > 0 && h.defEncoding != encRLE) {
		return page{}, ErrUnsupported
	}
	data, err := p.decompress(body, int(h.uncompressed))
	if err != nil {
		return page{}, err
	}
	pg := page{typ: pageData, numValues: int(h.numValues), encoding: h.encoding}
	if p.maxRep > 0 {
		if pg.rep, data, err = lengthPrefixed(data); err != nil {
			return page{}, fmt.Errorf("repetition levels: %w", err)
		}
	}
	if p.maxDef > 0 {
		if pg.def, data, err = lengthPrefixed(data); err != nil {
			return page{}, fmt.Errorf("definition levels: %w", err)
		}
	}
	pg.values = data
	return pg, nil
}

// lengthPrefixed splits b after the length its first 4 bytes give.
func lengthPrefixed(b []byte) (head, rest []byte, err error) {
	if len(b) < 4 || uint64(binary.LittleEndian.Uint32(b)) > uint64(len(b)-4) {
		return nil, nil, errors.New("past the page's end")
	}
	l := binary.LittleEndian.Uint32(b)
	return b[4 : 4+l], b[4+l:], nil
}

// dataV2 splits a data page v2: the levels (never compressed) before the
// values (compressed unless the header says not).
func (p *pages) dataV2(h pageHeader, body []byte) (page, error) {
	lv := int64(h.repBytes) + int64(h.defBytes)
	if h.repBytes < 0 || h.defBytes < 0 || lv > int64(len(body)) || lv > int64(h.uncompressed) {
		return page{}, errors.New("levels past the page's end")
	}
	pg := page{typ: pageData, numValues: int(h.numValues), encoding: h.encoding}
	if p.maxRep > 0 {
		pg.rep = body[:h.repBytes]
	}
	if p.maxDef > 0 {
		pg.def = body[h.repBytes:lv]
	}
	values, size := body[lv:], int(int64(h.uncompressed)-lv)
	if !h.valuesCompressed {
		if len(values) != size {
			return page{}, fmt.Errorf("uncompressed values of %d bytes, header says %d", len(values), size)
		}
		pg.values = values
		return pg, nil
	}
	var err error
	pg.values, err = p.decompress(values, size)
	return pg, err
}

// decompress returns src decompressed, which must be size bytes.
func (p *pages) decompress(src []byte, size int) ([]byte, error) {
	if p.codec == Uncompressed {
		if len(src) != size {
			return nil, fmt.Errorf("uncompressed page of %d bytes, header says %d", len(src), size)
		}
		return src, nil
	}
	if cap(p.buf) < size {
		p.buf = make([]byte, size, 1<<bits.Len(uint(size)))
	}
	dst := p.buf[:size]
	var out []byte
	var err error
	switch p.codec {
	case Snappy:
		if n, e := s2.DecodedLen(src); e != nil || n != size {
			return nil, fmt.Errorf("snappy page of %d bytes, header says %d (%v)", n, size, e)
		}
		out, err = s2.Decode(dst, src)
	case Zstd:
		out, err = zstdDecoder().DecodeAll(src, dst[:0])
	default:
		return nil, ErrUnsupported
	}
	if err != nil {
		return nil, fmt.Errorf("decompress page: %w", err)
	}
	if len(out) != size || (size > 0 && &out[0] != &dst[0]) {
		return nil, fmt.Errorf("page decompressed to %d bytes, header says %d", len(out), size)
	}
	return out, nil
}

// zstdDecoder is the process's zstd decoder, made at its first use (its
// DecodeAll is safe for concurrent use).
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxPageBytes))
	if err != nil {
		panic(fmt.Sprintf("zstd decoder: %v", err))
	}
	return d
})
