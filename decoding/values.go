package decoding

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// ErrUnchanged is returned by DecodeValue for a DatumUnchanged: an UPDATE
// that left a TOASTed value alone does not send it.
var ErrUnchanged = errors.New("unchanged TOASTed value was not sent")

// TextValue returns the datum's text as a new string. null is true for
// DatumNull. A DatumUnchanged yields ("", false): check Kind first where an
// UPDATE may leave TOASTed values out. A DatumBinary yields its raw bytes.
func TextValue(d Datum) (s string, null bool) {
	if d.Kind == DatumNull {
		return "", true
	}
	return string(d.Data), false
}

// DecodeValue decodes one datum of column col with the pgx type map m
// (Decoder.TypeMap), in text ('t') or binary ('b') format, to the Go value
// pgx would return for that type (for example int32, string, time.Time,
// [16]byte for uuid, map[string]any or []any for json/jsonb). A NULL yields
// nil; an infinite timestamp yields a pgtype.InfinityModifier. A text datum
// of a type the map does not know (an enum or domain, say) yields its text
// as a string. The result does not alias d.Data.
func DecodeValue(m *pgtype.Map, col Column, d Datum) (any, error) {
	var format int16
	switch d.Kind {
	case DatumNull:
		return nil, nil
	case DatumUnchanged:
		return nil, fmt.Errorf("column %q: %w", col.Name, ErrUnchanged)
	case DatumText:
		format = pgtype.TextFormatCode
	case DatumBinary:
		format = pgtype.BinaryFormatCode
	default:
		return nil, fmt.Errorf("column %q: unknown datum kind %q", col.Name, d.Kind)
	}
	typ, ok := m.TypeForOID(col.TypeOID)
	if !ok {
		if format == pgtype.TextFormatCode {
			return string(d.Data), nil
		}
		return nil, fmt.Errorf("column %q: binary value of unknown type OID %d", col.Name, col.TypeOID)
	}
	v, err := typ.Codec.DecodeValue(m, col.TypeOID, format, d.Data)
	if err != nil {
		return nil, fmt.Errorf("column %q: decode %s value: %w", col.Name, typ.Name, err)
	}
	return v, nil
}
