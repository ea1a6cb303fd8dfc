package parquetenc

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
	if h.dict {
		want = map[string]int32{"1": pageDictionary, "2": h.uncompressed, "3": h.compressed,
			"7.1": h.numValues, "7.2": h.encoding}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("header %+v decoded as %v, want %v", h, got, want)
	}
}

// TestPageHeader checks page headers against Apache Thrift's compact
// protocol reader, at the edges of the varint sizes.
func TestPageHeader(t *testing.T) {
	for _, v := range []int32{0, 1, 63, 64, 8191, 8192, 1 << 20, 1<<31 - 1} {
		for _, dict := range []bool{false, true} {
			checkHeader(t, pageHeader{dict: dict, uncompressed: v, compressed: v / 2, numValues: v / 3, encoding: encRLEDict})
		}
	}
}

func FuzzPageHeader(f *testing.F) {
	f.Add(false, int32(1), int32(2), int32(3), int32(8))
	f.Add(true, int32(1<<30), int32(1<<29), int32(1<<20), int32(0))
	f.Fuzz(func(t *testing.T, dict bool, u, c, n, enc int32) {
		checkHeader(t, pageHeader{dict: dict, uncompressed: u, compressed: c, numValues: n, encoding: enc})
	})
}
