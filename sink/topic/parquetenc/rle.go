package parquetenc

import (
	"encoding/binary"
	"math/bits"
)

// The RLE / bit-packing hybrid of the Parquet spec: a sequence of runs,
// each a varint header then either one value repeated (header count<<1,
// the value in ceil(width/8) bytes little-endian) or groups of 8 values
// bit-packed LSB first (header groups<<1 | 1). Only the last bit-packed
// run of a page may hold padding past the page's values.

// appendHybrid appends vals (each below 1<<width, width 1..32) in the
// hybrid encoding: a run of 8 or more equal values found at the start
// of a group becomes an RLE run, everything else bit-packed groups.
func appendHybrid(b []byte, vals []int32, width int) []byte {
	lit := 0 // values vals[i-lit:i] wait to be bit-packed; a multiple of 8 at a group start
	i := 0
	for i < len(vals) {
		if lit%8 == 0 {
			if r := runLength(vals[i:]); r >= 8 {
				b = appendBitPacked(b, vals[i-lit:i], width)
				b = appendRepeated(b, vals[i], r, width)
				i, lit = i+r, 0
				continue
			}
		}
		i++
		lit++
	}
	return appendBitPacked(b, vals[i-lit:i], width)
}

// runLength is how many values at the start of v equal v[0].
func runLength(v []int32) int {
	n := 1
	for n < len(v) && v[n] == v[0] {
		n++
	}
	return n
}

// appendRepeated appends an RLE run of n copies of v.
func appendRepeated(b []byte, v int32, n, width int) []byte {
	b = binary.AppendUvarint(b, uint64(n)<<1)
	for k := 0; k < (width+7)/8; k++ {
		b = append(b, byte(uint32(v)>>(8*k)))
	}
	return b
}

// appendBitPacked appends vals as one bit-packed run, padded with zeros to
// a multiple of 8 values; nothing when vals is empty.
func appendBitPacked(b []byte, vals []int32, width int) []byte {
	if len(vals) == 0 {
		return b
	}
	groups := (len(vals) + 7) / 8
	b = binary.AppendUvarint(b, uint64(groups)<<1|1)
	var acc uint64 // bits not yet appended, LSB first
	n := 0         // how many
	for k := range groups * 8 {
		var v uint64
		if k < len(vals) {
			v = uint64(uint32(vals[k]))
		}
		acc |= v << n
		n += width
		for n >= 8 {
			b = append(b, byte(acc))
			acc >>= 8
			n -= 8
		}
	}
	return b // groups*8*width is a multiple of 8: no bits left
}

// bitWidth is the bit width of dictionary indices below n (at least 1:
// a width of 0, which the spec allows for a one-value dictionary, is
// avoided for readers that mishandle it; so is an empty dictionary's).
func bitWidth(n int) int {
	if n <= 2 {
		return 1
	}
	return bits.Len(uint(n - 1))
}

// appendLevels appends the definition levels (width 1) of rows
// [from, from+n) of a column whose validity bitmap is valid (nil: every
// row defined), from a multiple of 8: one RLE run when they are all equal,
// else the bitmap's bytes as they are, one bit-packed run (an Arrow-style
// bitmap is the hybrid's bit-packing at width 1).
func appendLevels(b []byte, valid []byte, from, n int) []byte {
	if valid == nil {
		return appendRepeated(b, 1, n, 1)
	}
	groups := (n + 7) / 8
	bm := valid[from/8 : from/8+groups]
	switch allBits(bm, n) {
	case 1:
		return appendRepeated(b, 1, n, 1)
	case 0:
		return appendRepeated(b, 0, n, 1)
	}
	b = binary.AppendUvarint(b, uint64(groups)<<1|1)
	return append(b, bm...)
}

// allBits reports whether the first n bits of bm are all 1 (1), all 0
// (0), or mixed (-1).
func allBits(bm []byte, n int) int {
	full := bm[:n/8]
	var want byte
	if (len(full) > 0 && full[0] == 0xff) || (len(full) == 0 && bm[0]&1 == 1) {
		want = 0xff
	}
	for _, x := range full {
		if x != want {
			return -1
		}
	}
	if r := n % 8; r > 0 {
		mask := byte(1)<<r - 1
		if bm[n/8]&mask != want&mask {
			return -1
		}
	}
	if want == 0 {
		return 0
	}
	return 1
}
