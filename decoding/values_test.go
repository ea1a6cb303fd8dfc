package decoding

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeValue(t *testing.T) {
	m := NewDecoder().TypeMap()
	col := func(name string, oid uint32) Column { return Column{Name: name, TypeOID: oid, TypeMod: -1} }
	cases := []struct {
		col  Column
		d    Datum
		want any
	}{
		{col("n", 23), null, nil},
		{col("schema_version", 23), text("-7"), int32(-7)},
		{col("big", 20), text("9223372036854775807"), int64(9223372036854775807)},
		{col("topic", 25), text("orders"), "orders"},
		{col("headers", 3802), text(`{"a": {"b": [1, "x"]}}`), map[string]any{"a": map[string]any{"b": []any{float64(1), "x"}}}},
		{col("mood", 99999), text("happy"), "happy"}, // unknown type (an enum): its text
		{col("flag", 16), text("t"), true},
		{col("n4", 23), Datum{Kind: DatumBinary, Data: []byte{0, 0, 1, 0}}, int32(256)},
	}
	for _, c := range cases {
		got, err := DecodeValue(m, c.col, c.d)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("DecodeValue(%s, %q) = %#v, %v; want %#v", c.col.Name, c.d.Data, got, err, c.want)
		}
	}
	if _, err := DecodeValue(m, col("payload", 3802), unchanged); !errors.Is(err, ErrUnchanged) || !strings.Contains(err.Error(), `"payload"`) {
		t.Errorf("unchanged datum: %v", err)
	}
	if _, err := DecodeValue(m, col("schema_version", 23), text("one")); err == nil || !strings.Contains(err.Error(), `column "schema_version": decode int4 value`) {
		t.Errorf("bad int: %v", err)
	}
	if _, err := DecodeValue(m, col("mood", 99999), Datum{Kind: DatumBinary, Data: []byte{1}}); err == nil {
		t.Error("binary value of an unknown type decoded")
	}
	if _, err := DecodeValue(m, col("x", 25), Datum{Kind: 'z'}); err == nil {
		t.Error("unknown datum kind decoded")
	}
}

// TestDecodeValueDoesNotAlias: values must survive the reuse of the
// receive buffer.
func TestDecodeValueDoesNotAlias(t *testing.T) {
	m := NewDecoder().TypeMap()
	for _, c := range []struct {
		col Column
		d   Datum
	}{
		{Column{Name: "b", TypeOID: 17}, text(`\x0102`)},
		{Column{Name: "b", TypeOID: 17}, Datum{Kind: DatumBinary, Data: []byte{1, 2}}},
		{Column{Name: "s", TypeOID: 25}, text("abc")},
		{Column{Name: "s", TypeOID: 25}, Datum{Kind: DatumBinary, Data: []byte("abc")}},
		{Column{Name: "j", TypeOID: 3802}, text(`"abc"`)},
		{Column{Name: "u", TypeOID: 99999}, text("abc")},
	} {
		v, err := DecodeValue(m, c.col, c.d)
		if err != nil {
			t.Fatal(err)
		}
		snapshot := deepCopy(v)
		clear(c.d.Data)
		if !reflect.DeepEqual(v, snapshot) {
			t.Errorf("%s (%c): value changed with the input buffer: %#v", c.col.Name, c.d.Kind, v)
		}
	}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case []byte:
		return append([]byte(nil), v...)
	case string:
		return strings.Clone(v)
	}
	return v
}
