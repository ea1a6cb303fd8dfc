package parquetpage

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
)

// decodeStruct reads one compact-protocol struct with Apache Thrift's own
// reader into fields: "1" -> i32, "5.2" -> i32 of field 2 of the struct in
// field 5.
func decodeStruct(ctx context.Context, p thrift.TProtocol, prefix string, fields map[string]int32) error {
	if _, err := p.ReadStructBegin(ctx); err != nil {
		return err
	}
	for {
		_, typ, id, err := p.ReadFieldBegin(ctx)
		if err != nil {
			return err
		}
		if typ == thrift.STOP {
			return p.ReadStructEnd(ctx)
		}
		key := prefix + fmt.Sprint(id)
		switch typ {
		case thrift.I32:
			v, err := p.ReadI32(ctx)
			if err != nil {
				return err
			}
			fields[key] = v
		case thrift.STRUCT:
			if err := decodeStruct(ctx, p, key+".", fields); err != nil {
				return err
			}
		default:
			return fmt.Errorf("field %s of type %v", key, typ)
		}
		if err := p.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
}

func checkHeader(t *testing.T, h pageHeader) {
	t.Helper()
	b := appendPageHeader(nil, h)
	buf := thrift.NewTMemoryBuffer()
	buf.Write(b)
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	got := map[string]int32{}
	if err := decodeStruct(t.Context(), p, "", got); err != nil {
		t.Fatalf("decode %+v: %v", h, err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes after the header", buf.Len())
	}
	want := map[string]int32{"1": pageData, "2": h.uncompressed, "3": h.compressed,
		"5.1": h.numValues, "5.2": h.encoding, "5.3": encRLE, "5.4": encRLE}
	if h.typ == pageDictionary {
		want = map[string]int32{"1": pageDictionary, "2": h.uncompressed, "3": h.compressed,
			"7.1": h.numValues, "7.2": h.encoding}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("header %+v decoded as %v, want %v", h, got, want)
	}
	// And our own reader reads back what was written.
	back, n, err := readPageHeader(append(b, 0xee))
	if h.typ == pageData {
		h.defEncoding, h.repEncoding = encRLE, encRLE
	}
	h.valuesCompressed = true
	if err != nil || n != len(b) || back != h {
		t.Fatalf("header %+v read back as %+v (%d of %d bytes): %v", h, back, n, len(b), err)
	}
}

// TestPageHeader checks page headers against Apache Thrift's compact
// protocol reader, at the edges of the varint sizes.
func TestPageHeader(t *testing.T) {
	for _, v := range []int32{0, 1, 63, 64, 8191, 8192, 1 << 20, 1<<31 - 1} {
		for _, typ := range []int32{pageData, pageDictionary} {
			checkHeader(t, pageHeader{typ: typ, uncompressed: v, compressed: v / 2, numValues: v / 3, encoding: encRLEDict})
		}
	}
}

func FuzzPageHeader(f *testing.F) {
	f.Add(false, int32(1), int32(2), int32(3), int32(8))
	f.Add(true, int32(1<<30), int32(1<<29), int32(1<<20), int32(0))
	f.Fuzz(func(t *testing.T, dict bool, u, c, n, enc int32) {
		if u < 0 || c < 0 || n < 0 {
			return // not a page header any writer writes; the reader refuses it
		}
		typ := int32(pageData)
		if dict {
			typ = pageDictionary
		}
		checkHeader(t, pageHeader{typ: typ, uncompressed: u, compressed: c, numValues: n, encoding: enc})
	})
}

// thriftHeader writes a page header with Apache Thrift's own writer, as
// other writers do: with the optional fields this package passes over
// (crc, statistics, index pages, a field of a later format, long field
// headers) when extras is set.
func thriftHeader(t testing.TB, h pageHeader, extras bool) []byte {
	t.Helper()
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTCompactProtocolConf(buf, &thrift.TConfiguration{})
	i32 := func(id int16, v int32) {
		p.WriteFieldBegin(ctx, "", thrift.I32, id)
		p.WriteI32(ctx, v)
		p.WriteFieldEnd(ctx)
	}
	stats := func(id int16) {
		p.WriteFieldBegin(ctx, "", thrift.STRUCT, id)
		p.WriteStructBegin(ctx, "Statistics")
		for fid, v := range map[int16]string{1: "max", 2: "min", 5: "max_value", 6: "min_value"} {
			p.WriteFieldBegin(ctx, "", thrift.STRING, fid)
			p.WriteBinary(ctx, []byte(v))
			p.WriteFieldEnd(ctx)
		}
		p.WriteFieldBegin(ctx, "", thrift.I64, 3)
		p.WriteI64(ctx, 1<<40)
		p.WriteFieldEnd(ctx)
		p.WriteFieldBegin(ctx, "", thrift.BOOL, 7)
		p.WriteBool(ctx, true)
		p.WriteFieldEnd(ctx)
		p.WriteFieldStop(ctx)
		p.WriteStructEnd(ctx)
		p.WriteFieldEnd(ctx)
	}
	p.WriteStructBegin(ctx, "PageHeader")
	i32(1, h.typ)
	i32(2, h.uncompressed)
	i32(3, h.compressed)
	if extras {
		i32(4, -12345) // crc
	}
	sub := func(id int16, fields ...int32) {
		p.WriteFieldBegin(ctx, "", thrift.STRUCT, id)
		p.WriteStructBegin(ctx, "")
		for k, v := range fields {
			i32(int16(k+1), v)
		}
		if extras && id != 7 {
			stats(int16(len(fields) + 2))
		}
		p.WriteFieldStop(ctx)
		p.WriteStructEnd(ctx)
		p.WriteFieldEnd(ctx)
	}
	switch h.typ {
	case pageData:
		sub(5, h.numValues, h.encoding, h.defEncoding, h.repEncoding)
	case pageDictionary:
		sub(7, h.numValues, h.encoding)
	case pageDataV2:
		p.WriteFieldBegin(ctx, "", thrift.STRUCT, 8)
		p.WriteStructBegin(ctx, "")
		for k, v := range []int32{h.numValues, h.numNulls, h.numRows, h.encoding, h.defBytes, h.repBytes} {
			i32(int16(k+1), v)
		}
		p.WriteFieldBegin(ctx, "", thrift.BOOL, 7)
		p.WriteBool(ctx, h.valuesCompressed)
		p.WriteFieldEnd(ctx)
		if extras {
			stats(8)
		}
		p.WriteFieldStop(ctx)
		p.WriteStructEnd(ctx)
		p.WriteFieldEnd(ctx)
	}
	if extras {
		p.WriteFieldBegin(ctx, "", thrift.LIST, 40)
		p.WriteListBegin(ctx, thrift.STRING, 20)
		for range 20 {
			p.WriteBinary(ctx, []byte("later"))
		}
		p.WriteListEnd(ctx)
		p.WriteFieldEnd(ctx)
		p.WriteFieldBegin(ctx, "", thrift.MAP, 41)
		p.WriteMapBegin(ctx, thrift.I32, thrift.BOOL, 2)
		p.WriteI32(ctx, 1)
		p.WriteBool(ctx, true)
		p.WriteI32(ctx, 2)
		p.WriteBool(ctx, false)
		p.WriteMapEnd(ctx)
		p.WriteFieldEnd(ctx)
	}
	p.WriteFieldStop(ctx)
	p.WriteStructEnd(ctx)
	p.Flush(ctx)
	return buf.Bytes()
}

// TestReadOtherWritersHeaders: headers as Apache Thrift writes them, of
// every page type, with and without the fields this package passes over,
// read back exactly; cut short anywhere, they are an error.
func TestReadOtherWritersHeaders(t *testing.T) {
	for _, h := range []pageHeader{
		{typ: pageData, uncompressed: 100, compressed: 90, numValues: 7, encoding: encPlain, defEncoding: encRLE, repEncoding: encRLE, valuesCompressed: true},
		{typ: pageDictionary, uncompressed: 1 << 20, compressed: 5, numValues: 3, encoding: encPlainDict, valuesCompressed: true},
		{typ: pageDataV2, uncompressed: 1 << 30, compressed: 1 << 29, numValues: 20480, numNulls: 3, numRows: 20000,
			encoding: encRLEDict, defBytes: 17, repBytes: 5, valuesCompressed: false},
		{typ: pageDataV2, uncompressed: 64, compressed: 64, numValues: 1, encoding: encPlain, valuesCompressed: true},
	} {
		for _, extras := range []bool{false, true} {
			b := thriftHeader(t, h, extras)
			got, n, err := readPageHeader(append(b, 1, 2, 3))
			if err != nil || n != len(b) || got != h {
				t.Fatalf("extras %t: %+v read as %+v (%d of %d bytes): %v", extras, h, got, n, len(b), err)
			}
			for cut := range b {
				if _, _, err := readPageHeader(b[:cut]); err == nil {
					t.Fatalf("extras %t: header cut to %d of %d bytes read", extras, cut, len(b))
				}
			}
		}
	}
}

// FuzzReadPageHeader: any bytes read as a header or an error, never a
// panic; a header read has sizes and a count a page can have, and its
// length is within the input.
func FuzzReadPageHeader(f *testing.F) {
	f.Add(appendPageHeader(nil, pageHeader{typ: pageData, uncompressed: 10, compressed: 4, numValues: 2}))
	f.Add(thriftHeader(f, pageHeader{typ: pageDataV2, uncompressed: 9, compressed: 9, numValues: 1, defBytes: 2}, true))
	f.Add([]byte{0x09, 0xf8, 0xff, 0xff, 0x0f, 0x05})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := readPageHeader(b)
		if err != nil {
			return
		}
		if n <= 0 || n > len(b) || h.uncompressed < 0 || h.compressed < 0 {
			t.Fatalf("header %+v of %d bytes read from %d", h, n, len(b))
		}
		if h.typ != pageIndex && h.numValues < 0 {
			t.Fatalf("header %+v: negative count", h)
		}
	})
}
