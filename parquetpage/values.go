package parquetpage

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// maxStatBytes is the longest min or max written, as arrow-go's default:
// a longer bound is left out rather than truncated.
const maxStatBytes = 4096

// buildDict indexes the present values of column c in e.dict and e.idx;
// false when the dictionary grows past dictBytes.
func (e *encoder) buildDict(spec *colSpec, c *Column, rows int) bool {
	e.dict.reset(rows)
	e.idx = e.idx[:0]
	prev, prevIdx := -1, int32(0) // the previous present row and its index
	for r := range rows {
		if !isValid(c.Valid, r) {
			continue
		}
		if prev >= 0 && equalRows(spec, c, prev, r) {
			e.idx = append(e.idx, prevIdx)
			continue
		}
		v := e.valueBytes(spec, c, r)
		plain := len(v)
		if spec.width == 0 {
			plain += 4
		}
		prev, prevIdx = r, e.dict.index(v, plain)
		e.idx = append(e.idx, prevIdx)
		if e.dict.size > dictBytes {
			return false
		}
	}
	return true
}

// equalRows reports whether rows a and b of c hold the same value.
func equalRows(spec *colSpec, c *Column, a, b int) bool {
	switch spec.width {
	case 4:
		return c.I32[a] == c.I32[b]
	case 8:
		return c.I64[a] == c.I64[b]
	}
	return c.Repeat || bytes.Equal(c.Data[c.Offs[a]:c.Offs[a+1]], c.Data[c.Offs[b]:c.Offs[b+1]])
}

// valueBytes returns the value of row r: a byte array's bytes, or a
// number's PLAIN encoding (in e.key, valid until the next call).
func (e *encoder) valueBytes(spec *colSpec, c *Column, r int) []byte {
	switch spec.width {
	case 4:
		binary.LittleEndian.PutUint32(e.key[:], uint32(c.I32[r]))
		return e.key[:4]
	case 8:
		binary.LittleEndian.PutUint64(e.key[:], uint64(c.I64[r]))
		return e.key[:8]
	}
	return c.bytesAt(r)
}

// appendPlain appends the present values of rows [from, to) to e.page,
// PLAIN: numbers little-endian, byte arrays each after its 4-byte length.
func (e *encoder) appendPlain(spec *colSpec, c *Column, from, to int) {
	switch spec.width {
	case 4:
		e.page = appendInt32s(e.page, c.I32[from:to], c.Valid, from)
	case 8:
		e.page = appendInt64s(e.page, c.I64[from:to], c.Valid, from)
	default:
		e.page = appendByteArrays(e.page, c, from, to)
	}
}

// appendInt32s appends vals, rows from..., skipping NULL rows.
func appendInt32s(b []byte, vals []int32, valid []byte, from int) []byte {
	b = slices.Grow(b, 4*len(vals))
	for k, v := range vals {
		if valid == nil || isValid(valid, from+k) {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
	}
	return b
}

// appendInt64s appends vals, rows from..., skipping NULL rows.
func appendInt64s(b []byte, vals []int64, valid []byte, from int) []byte {
	b = slices.Grow(b, 8*len(vals))
	for k, v := range vals {
		if valid == nil || isValid(valid, from+k) {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

// appendByteArrays appends the byte arrays of rows [from, to), skipping
// NULL rows.
func appendByteArrays(b []byte, c *Column, from, to int) []byte {
	b = slices.Grow(b, c.spanBytes(from, to)+4*(to-from))
	for r := from; r < to; r++ {
		if c.Valid == nil || isValid(c.Valid, r) {
			v := c.bytesAt(r)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// stats returns the chunk statistics of column c: the null count and,
// when some value is present, min and max (signed numbers; byte arrays
// compared as unsigned bytes, from the dictionary when there is one).
// The bounds are copies: the footer keeps them after c is reused.
func (e *encoder) stats(spec *colSpec, c *Column, rows int, dict bool) metadata.EncodedStatistics {
	st := metadata.EncodedStatistics{Signed: spec.width > 0}
	st.SetNullCount(int64(rows - countValid(c.Valid, 0, rows)))
	var lo, hi []byte
	found := false
	switch {
	case spec.width > 0:
		lo, hi, found = e.numberBounds(spec, c, rows)
	case dict:
		for k := range int32(e.dict.len()) {
			lo, hi = widen(lo, hi, e.dict.value(k), k == 0)
		}
		found = e.dict.len() > 0
	default:
		for r := range rows {
			if isValid(c.Valid, r) {
				lo, hi = widen(lo, hi, c.bytesAt(r), !found)
				found = true
			}
		}
	}
	setBounds(&st, lo, hi, found)
	return st
}

// setBounds sets copies of lo and hi as st's min and max, when found,
// each unless longer than maxStatBytes.
func setBounds(st *metadata.EncodedStatistics, lo, hi []byte, found bool) {
	if found && len(lo) <= maxStatBytes {
		st.SetMin(append([]byte{}, lo...))
	}
	if found && len(hi) <= maxStatBytes {
		st.SetMax(append([]byte{}, hi...))
	}
}

// widen extends the bounds [lo, hi] to v (they start at v when first).
func widen(lo, hi, v []byte, first bool) ([]byte, []byte) {
	if first {
		return v, v
	}
	if bytes.Compare(v, lo) < 0 {
		lo = v
	}
	if bytes.Compare(v, hi) > 0 {
		hi = v
	}
	return lo, hi
}

// numberBounds returns the PLAIN encodings of the least and greatest
// present value of a number column; false when none is present.
func (e *encoder) numberBounds(spec *colSpec, c *Column, rows int) ([]byte, []byte, bool) {
	var lo, hi int64
	found := false
	for r := range rows {
		if !isValid(c.Valid, r) {
			continue
		}
		var x int64
		if spec.width == 4 {
			x = int64(c.I32[r])
		} else {
			x = c.I64[r]
		}
		if !found {
			lo, hi, found = x, x, true
		}
		lo, hi = min(lo, x), max(hi, x)
	}
	if !found {
		return nil, nil, false
	}
	if spec.width == 4 {
		return binary.LittleEndian.AppendUint32(nil, uint32(lo)), binary.LittleEndian.AppendUint32(nil, uint32(hi)), true
	}
	return binary.LittleEndian.AppendUint64(nil, uint64(lo)), binary.LittleEndian.AppendUint64(nil, uint64(hi)), true
}
