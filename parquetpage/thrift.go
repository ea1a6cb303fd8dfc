package parquetpage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file holds the only Thrift this package writes and reads itself:
// the page headers (PageHeader, DataPageHeader, DictionaryPageHeader,
// DataPageHeaderV2 of parquet.thrift) in the Thrift compact protocol.
// arrow-go's Thrift code is internal; the footer is written and read with
// its public metadata builders and readers instead.
//
// Compact protocol: a struct is a sequence of fields, each a header byte
// (field id delta << 4 | type, or type alone followed by the id as a
// zigzag varint) followed by its value, ended by a 0 byte. An i16, i32 or
// i64 is a zigzag varint; a bool field is its type (1 true, 2 false); a
// binary is a varint length and the bytes; a list or set is a header
// (size << 4 | element type, size 15: the size follows as a varint) and
// the elements; a map is a varint size, then (when not empty) a byte of
// key and value types, then the pairs. The writer always uses the short
// field header; the reader takes both, and skips the fields it does not
// know (crc, statistics, index pages, fields of later formats).

// Compact protocol type ids.
const (
	ctStop   = 0
	ctTrue   = 1
	ctFalse  = 2
	ctByte   = 3
	ctI16    = 4
	ctI32    = 5
	ctI64    = 6
	ctDouble = 7
	ctBinary = 8
	ctList   = 9
	ctSet    = 10
	ctMap    = 11
	ctStruct = 12
)

// Parquet PageType values.
const (
	pageData       = 0
	pageIndex      = 1
	pageDictionary = 2
	pageDataV2     = 3
)

// Parquet Encoding values.
const (
	encPlain     = 0
	encPlainDict = 2
	encRLE       = 3
	encRLEDict   = 8
)

// pageHeader is a PageHeader: the writer sets typ, the sizes, numValues
// and encoding (a data page v1 or a dictionary page); the reader fills
// what the page's type has.
type pageHeader struct {
	typ          int32
	uncompressed int32
	compressed   int32
	numValues    int32
	encoding     int32 // of the values (data pages) or of the dictionary
	// Data page v1: the levels' encodings.
	defEncoding, repEncoding int32
	// Data page v2: NULLs, rows, the levels' byte lengths (before the
	// values, never compressed) and whether the values are compressed.
	numNulls, numRows  int32
	defBytes, repBytes int32
	valuesCompressed   bool
}

// appendPageHeader appends h (a data page v1 or a dictionary page) in the
// compact protocol:
//
//	PageHeader{1: type, 2: uncompressed_page_size, 3: compressed_page_size,
//	  5: data_page_header{1: num_values, 2: encoding,
//	     3: definition_level_encoding = RLE, 4: repetition_level_encoding = RLE}
//	  | 7: dictionary_page_header{1: num_values, 2: encoding}}
func appendPageHeader(b []byte, h pageHeader) []byte {
	b = appendI32Field(b, 1, h.typ)
	b = appendI32Field(b, 1, h.uncompressed)
	b = appendI32Field(b, 1, h.compressed)
	if h.typ == pageDictionary {
		b = append(b, 4<<4|ctStruct) // field 7 (after 3)
		b = appendI32Field(b, 1, h.numValues)
		b = appendI32Field(b, 1, h.encoding)
	} else {
		b = append(b, 2<<4|ctStruct) // field 5 (after 3)
		b = appendI32Field(b, 1, h.numValues)
		b = appendI32Field(b, 1, h.encoding)
		b = appendI32Field(b, 1, encRLE)
		b = appendI32Field(b, 1, encRLE)
	}
	return append(b, 0, 0) // end of the nested struct, end of PageHeader
}

// appendI32Field appends an i32 field whose id is delta more than the
// previous field's.
func appendI32Field(b []byte, delta byte, v int32) []byte {
	b = append(b, delta<<4|ctI32)
	return binary.AppendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31)))
}

// errHeader: a page header that is not valid compact-protocol Thrift.
var errHeader = errors.New("corrupt page header")

// maxThriftDepth bounds the nesting the reader follows in fields it skips.
const maxThriftDepth = 16

// thriftReader reads the compact protocol from b.
type thriftReader struct {
	b   []byte
	off int
	err error
}

func (r *thriftReader) fail() {
	if r.err == nil {
		r.err = errHeader
	}
	r.off = len(r.b)
}

func (r *thriftReader) byte() byte {
	if r.off >= len(r.b) {
		r.fail()
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *thriftReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.off += n
	return v
}

func (r *thriftReader) zigzag() int64 {
	v := r.uvarint()
	return int64(v>>1) ^ -int64(v&1)
}

// i32 reads an i32 value; one out of range is an error.
func (r *thriftReader) i32() int32 {
	v := r.zigzag()
	if v != int64(int32(v)) {
		r.fail()
	}
	return int32(v)
}

// field reads a field header after the field prev: its type (ctStop at
// the struct's end) and id.
func (r *thriftReader) field(prev int16) (typ byte, id int16) {
	h := r.byte()
	typ = h & 0x0f
	if typ == ctStop || r.err != nil {
		return ctStop, 0
	}
	if d := h >> 4; d != 0 {
		return typ, prev + int16(d)
	}
	v := r.zigzag()
	if v != int64(int16(v)) {
		r.fail()
	}
	return typ, int16(v)
}

// skip skips a value of type typ.
func (r *thriftReader) skip(typ byte, depth int) {
	if depth > maxThriftDepth {
		r.fail()
		return
	}
	switch typ {
	case ctTrue, ctFalse: // a bool field's value is its type
	case ctByte:
		r.byte()
	case ctI16, ctI32, ctI64:
		r.uvarint()
	case ctDouble:
		r.bytes(8)
	case ctBinary:
		r.bytes(r.uvarint())
	case ctList, ctSet:
		h := r.byte()
		n := uint64(h >> 4)
		if n == 15 {
			n = r.uvarint()
		}
		r.elements(n, h&0x0f, depth)
	case ctMap:
		n := r.uvarint()
		if n > 0 {
			kv := r.byte()
			r.pairs(n, kv>>4, kv&0x0f, depth)
		}
	case ctStruct:
		r.skipStruct(depth + 1)
	default:
		r.fail()
	}
}

// elements skips n list elements of type typ (a bool element is a byte).
func (r *thriftReader) elements(n uint64, typ byte, depth int) {
	if n > uint64(len(r.b)-r.off) { // every element takes a byte at least
		r.fail()
		return
	}
	for range n {
		if typ == ctTrue || typ == ctFalse {
			typ = ctByte
		}
		if r.skip(typ, depth+1); r.err != nil {
			return
		}
	}
}

func (r *thriftReader) pairs(n uint64, k, v byte, depth int) {
	if n > uint64(len(r.b)-r.off) {
		r.fail()
		return
	}
	for range n {
		r.elements(1, k, depth)
		r.elements(1, v, depth)
		if r.err != nil {
			return
		}
	}
}

func (r *thriftReader) bytes(n uint64) {
	if n > uint64(len(r.b)-r.off) {
		r.fail()
		return
	}
	r.off += int(n)
}

func (r *thriftReader) skipStruct(depth int) {
	var id int16
	for r.err == nil {
		typ, next := r.field(id)
		if typ == ctStop {
			return
		}
		r.skip(typ, depth)
		id = next
	}
}

// i32Fields reads a struct whose known fields are all i32 (or bool,
// given as 1 or 0), setting *set[id-1] for field id; other fields are
// skipped.
func (r *thriftReader) i32Fields(set ...*int32) {
	var id int16
	for r.err == nil {
		typ, next := r.field(id)
		id = next
		var p *int32
		if id >= 1 && int(id) <= len(set) {
			p = set[id-1]
		}
		switch {
		case typ == ctStop:
			return
		case p != nil && typ == ctI32:
			*p = r.i32()
		case p != nil && (typ == ctTrue || typ == ctFalse):
			*p = int32(2 - int(typ)) // 1: true, 0: false
		default:
			r.skip(typ, 1)
		}
	}
}

// readPageHeader decodes the page header at the start of b and returns it
// with its length in bytes.
func readPageHeader(b []byte) (pageHeader, int, error) {
	h := pageHeader{typ: -1, uncompressed: -1, compressed: -1, numValues: -1, encoding: -1}
	compressed := int32(1) // is_compressed defaults to true
	r := thriftReader{b: b}
	var id int16
	seen := 0 // the sub-header of the page's type
	for r.err == nil {
		typ, next := r.field(id)
		id = next
		if typ == ctStop {
			break
		}
		switch {
		case id == 1 && typ == ctI32:
			h.typ = r.i32()
		case id == 2 && typ == ctI32:
			h.uncompressed = r.i32()
		case id == 3 && typ == ctI32:
			h.compressed = r.i32()
		case id == 5 && typ == ctStruct:
			seen |= 1 << pageData
			r.i32Fields(&h.numValues, &h.encoding, &h.defEncoding, &h.repEncoding)
		case id == 7 && typ == ctStruct:
			seen |= 1 << pageDictionary
			r.i32Fields(&h.numValues, &h.encoding)
		case id == 8 && typ == ctStruct:
			seen |= 1 << pageDataV2
			r.i32Fields(&h.numValues, &h.numNulls, &h.numRows, &h.encoding, &h.defBytes, &h.repBytes, &compressed)
		default:
			r.skip(typ, 1)
		}
	}
	if r.err != nil {
		return h, 0, r.err
	}
	h.valuesCompressed = compressed != 0
	if h.uncompressed < 0 || h.compressed < 0 {
		return h, 0, fmt.Errorf("%w: page sizes %d and %d", errHeader, h.uncompressed, h.compressed)
	}
	if h.typ != pageIndex && (h.typ < 0 || h.typ > pageDataV2 || seen&(1<<h.typ) == 0 || h.numValues < 0) {
		return h, 0, fmt.Errorf("%w: page type %d without its header", errHeader, h.typ)
	}
	return h, r.off, nil
}
