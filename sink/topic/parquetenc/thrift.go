package parquetenc

import "encoding/binary"

// This file holds the only Thrift this package writes itself: the page
// headers (PageHeader, DataPageHeader, DictionaryPageHeader of
// parquet.thrift) in the Thrift compact protocol. arrow-go's Thrift code
// is internal, and the footer is written with its public metadata
// builders instead.
//
// Compact protocol, as used here: a struct is a sequence of fields, each a
// header byte (field id delta << 4 | type) followed by its value, ended by
// a 0 byte. Field ids here always grow by 1..15 from the previous one, so
// the short header form is always used. An i32 is a zigzag varint; a
// nested struct is its fields and stop byte.

// Compact protocol type ids.
const (
	ctI32    = 5
	ctStruct = 12
)

// Parquet PageType values.
const (
	pageData       = 0
	pageDictionary = 2
)

// Parquet Encoding values.
const (
	encPlain   = 0
	encRLE     = 3
	encRLEDict = 8
)

// pageHeader is what this package writes of a PageHeader: a data page v1
// (dict false) or a dictionary page (dict true).
type pageHeader struct {
	dict         bool
	uncompressed int32
	compressed   int32
	numValues    int32
	encoding     int32 // of the values (data page) or of the dictionary
}

// appendPageHeader appends h in the compact protocol:
//
//	PageHeader{1: type, 2: uncompressed_page_size, 3: compressed_page_size,
//	  5: data_page_header{1: num_values, 2: encoding,
//	     3: definition_level_encoding = RLE, 4: repetition_level_encoding = RLE}
//	  | 7: dictionary_page_header{1: num_values, 2: encoding}}
func appendPageHeader(b []byte, h pageHeader) []byte {
	typ := int32(pageData)
	if h.dict {
		typ = pageDictionary
	}
	b = appendI32Field(b, 1, typ)
	b = appendI32Field(b, 1, h.uncompressed)
	b = appendI32Field(b, 1, h.compressed)
	if h.dict {
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
