package bootstrap

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// binKind says how a column's binary COPY form (the type's send function)
// is read and turned into its text output, the form pgoutput sends.
type binKind uint8

const (
	binUnsupported binKind = iota
	binText                // text, varchar, bpchar, name, json: the send form is the text
	binJSONB               // a version byte (1), then the text
	binUUID                // 16 bytes
	binBool                // 1 byte
	binInt2                // big-endian integers
	binInt4
	binInt8
	binTimestamp   // int64 microseconds since 2000-01-01, shown without zone
	binTimestamptz // the same, shown in UTC: only when the session's TimeZone is UTC
)

// PostgreSQL type OIDs read in binary.
const (
	oidBool        = 16
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
)

// binKindOf returns the kind of a column type; utc says whether the
// session shows timestamptz in UTC (DateStyle ISO is required for any
// timestamp and checked by the caller).
func binKindOf(oid uint32, utc bool) binKind {
	switch oid {
	case oidText, oidVarchar, oidBpchar, oidName, oidJSON:
		return binText
	case oidJSONB:
		return binJSONB
	case oidUUID:
		return binUUID
	case oidBool:
		return binBool
	case oidInt2:
		return binInt2
	case oidInt4:
		return binInt4
	case oidInt8:
		return binInt8
	case oidTimestamp:
		return binTimestamp
	case oidTimestamptz:
		if utc {
			return binTimestamptz
		}
	}
	return binUnsupported
}

// utcZones are TimeZone settings whose offset is zero at every instant.
var utcZones = map[string]bool{
	"utc": true, "etc/utc": true, "uct": true, "etc/uct": true, "gmt": true, "etc/gmt": true,
	"gmt0": true, "etc/gmt0": true, "gmt+0": true, "etc/gmt+0": true, "gmt-0": true, "etc/gmt-0": true,
	"universal": true, "etc/universal": true, "zulu": true, "etc/zulu": true,
	"greenwich": true, "etc/greenwich": true,
}

// pgEpochMicros is 2000-01-01 00:00:00 UTC in Unix microseconds.
const pgEpochMicros = 946684800_000_000

// Infinite timestamps in the binary form.
const (
	tsMinusInfinity = math.MinInt64
	tsInfinity      = math.MaxInt64
)

// binWidth is the byte length of the fixed-width kinds, 0 for the others.
var binWidth = [...]int{binUUID: 16, binBool: 1, binInt2: 2, binInt4: 4, binInt8: 8, binTimestamp: 8, binTimestamptz: 8}

// appendText appends the text output of a non-NULL binary value of kind k
// to buf: exactly what text COPY and pgoutput send under DateStyle ISO (and
// TimeZone UTC for timestamptz).
func (k binKind) appendText(buf, v []byte) ([]byte, error) {
	if w := binWidth[k]; w > 0 && len(v) != w {
		return buf, fmt.Errorf("binary value of %d bytes for a %d-byte type", len(v), w)
	}
	switch k {
	case binText:
		return append(buf, v...), nil
	case binJSONB:
		if len(v) == 0 || v[0] != 1 {
			return buf, fmt.Errorf("jsonb binary value of unknown version")
		}
		return append(buf, v[1:]...), nil
	case binUUID:
		return appendUUID(buf, v), nil
	case binBool:
		if v[0] != 0 {
			return append(buf, 't'), nil
		}
		return append(buf, 'f'), nil
	case binInt2:
		return strconv.AppendInt(buf, int64(int16(binary.BigEndian.Uint16(v))), 10), nil
	case binInt4:
		return strconv.AppendInt(buf, int64(int32(binary.BigEndian.Uint32(v))), 10), nil
	case binInt8:
		return strconv.AppendInt(buf, int64(binary.BigEndian.Uint64(v)), 10), nil
	case binTimestamp, binTimestamptz:
		return appendTimestamp(buf, int64(binary.BigEndian.Uint64(v)), k == binTimestamptz), nil
	}
	return buf, fmt.Errorf("no binary reader for kind %d", k)
}

// appendUUID appends the 16 bytes of a uuid in lowercase 8-4-4-4-12 form.
func appendUUID(buf, u []byte) []byte {
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return append(buf, s[:]...)
}

// appendTimestamp renders microseconds since 2000-01-01 as PostgreSQL's
// ISO output: "2026-01-02 03:04:05.12+00" (the zone only for timestamptz,
// trailing zeros of the fraction dropped, " BC" after it all).
func appendTimestamp(buf []byte, us int64, zone bool) []byte {
	switch us {
	case tsInfinity:
		return append(buf, "infinity"...)
	case tsMinusInfinity:
		return append(buf, "-infinity"...)
	}
	t := pgTime(us)
	year, month, day := t.Date()
	bc := year <= 0
	if bc {
		year = 1 - year
	}
	buf = appendPadded(buf, year, 4)
	buf = append(buf, '-')
	buf = appendPadded(buf, int(month), 2)
	buf = append(buf, '-')
	buf = appendPadded(buf, day, 2)
	buf = append(buf, ' ')
	hour, minute, sec := t.Clock()
	buf = appendPadded(buf, hour, 2)
	buf = append(buf, ':')
	buf = appendPadded(buf, minute, 2)
	buf = append(buf, ':')
	buf = appendPadded(buf, sec, 2)
	if frac := t.Nanosecond() / 1000; frac > 0 {
		digits := 6
		for frac%10 == 0 {
			frac /= 10
			digits--
		}
		buf = append(buf, '.')
		buf = appendPadded(buf, frac, digits)
	}
	if zone {
		buf = append(buf, "+00"...)
	}
	if bc {
		buf = append(buf, " BC"...)
	}
	return buf
}

// pgTime converts microseconds since 2000-01-01 (finite) to a UTC time.
func pgTime(us int64) time.Time {
	sec, rem := us/1_000_000, us%1_000_000
	if rem < 0 {
		sec, rem = sec-1, rem+1_000_000
	}
	return time.Unix(sec+pgEpochMicros/1_000_000, rem*1000).UTC()
}

func appendPadded(buf []byte, v, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

// binTextRow converts a binary tuple to text datums, the tuple pgoutput
// would send, using scratch for the converted bytes.
type binTextRow struct {
	kinds   []binKind
	datums  []decoding.Datum
	scratch []byte
}

func (r *binTextRow) convert(in []decoding.Datum) ([]decoding.Datum, error) {
	if r.datums == nil {
		r.datums = make([]decoding.Datum, len(r.kinds))
		r.scratch = make([]byte, 0, 256)
	}
	// Earlier datums keep pointing into the old array when scratch grows.
	r.scratch = r.scratch[:0]
	for i, d := range in {
		if d.Kind != decoding.DatumBinary {
			r.datums[i] = decoding.Datum{Kind: decoding.DatumNull}
			continue
		}
		if r.kinds[i] == binText {
			r.datums[i] = decoding.Datum{Kind: decoding.DatumText, Data: d.Data}
			continue
		}
		start := len(r.scratch)
		var err error
		if r.scratch, err = r.kinds[i].appendText(r.scratch, d.Data); err != nil {
			return nil, fmt.Errorf("column %d: %w", i+1, err)
		}
		r.datums[i] = decoding.Datum{Kind: decoding.DatumText, Data: r.scratch[start:len(r.scratch):len(r.scratch)]}
	}
	return r.datums, nil
}
