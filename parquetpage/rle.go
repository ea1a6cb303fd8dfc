package parquetpage

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// The RLE / bit-packing hybrid of the Parquet spec: a sequence of runs,
// each a varint header then either one value repeated (header count<<1,
// the value in ceil(width/8) bytes little-endian) or groups of 8 values
// bit-packed LSB first (header groups<<1 | 1). Only the last bit-packed
// run of a page may hold padding past the page's values. This file holds
// both directions: appendHybrid and appendLevels write it, rleDecoder
// reads it (definition and repetition levels, dictionary indices,
// booleans).

// hybridValue is what the hybrid encoding writes: dictionary indices
// (int32) and levels (uint8).
type hybridValue interface{ ~int32 | ~uint8 }

// appendHybrid appends vals (each below 1<<width, width 1..32) in the
// hybrid encoding: a run of 8 or more equal values found at the start
// of a group becomes an RLE run, everything else bit-packed groups.
func appendHybrid[T hybridValue](b []byte, vals []T, width int) []byte {
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
func runLength[T hybridValue](v []T) int {
	n := 1
	for n < len(v) && v[n] == v[0] {
		n++
	}
	return n
}

// appendRepeated appends an RLE run of n copies of v.
func appendRepeated[T hybridValue](b []byte, v T, n, width int) []byte {
	b = binary.AppendUvarint(b, uint64(n)<<1)
	for k := 0; k < (width+7)/8; k++ {
		b = append(b, byte(uint32(v)>>(8*k)))
	}
	return b
}

// appendBitPacked appends vals as one bit-packed run, padded with zeros to
// a multiple of 8 values; nothing when vals is empty.
func appendBitPacked[T hybridValue](b []byte, vals []T, width int) []byte {
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
		return appendRepeated(b, uint8(1), n, 1)
	}
	groups := (n + 7) / 8
	bm := valid[from/8 : from/8+groups]
	switch allBits(bm, n) {
	case 1:
		return appendRepeated(b, uint8(1), n, 1)
	case 0:
		return appendRepeated(b, uint8(0), n, 1)
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

// rleDecoder reads the hybrid encoding of values up to 32 bits wide.
type rleDecoder struct {
	data  []byte
	width uint
	run   int    // values left in the current run
	val   uint32 // repeated run: the value
	bp    []byte // bit-packed run: its bytes; nil for a repeated run
	bit   uint   // bit-packed run: bit offset of the next value
}

var errRLE = errors.New("corrupt RLE/bit-packed data")

func newRLE(data []byte, width uint) rleDecoder {
	return rleDecoder{data: data, width: width}
}

// newBitPacked reads n values of width 1 bit-packed with no run header
// (PLAIN booleans).
func newBitPacked(data []byte, n int) rleDecoder {
	return rleDecoder{width: 1, bp: data, run: n}
}

// next starts the next run.
func (r *rleDecoder) next() error {
	h, n := binary.Uvarint(r.data)
	if n <= 0 || h>>1 > 1<<31 {
		return errRLE
	}
	r.data = r.data[n:]
	if h&1 == 1 { // bit-packed: h>>1 groups of 8 values
		size := int(h>>1) * int(r.width)
		if h>>1 == 0 || size > len(r.data) {
			return errRLE
		}
		r.bp, r.bit, r.run = r.data[:size], 0, int(h>>1)*8
		r.data = r.data[size:]
		return nil
	}
	size := int(r.width+7) / 8
	if h>>1 == 0 || size > len(r.data) {
		return errRLE
	}
	var v [4]byte
	copy(v[:], r.data[:size])
	r.val, r.bp, r.run = binary.LittleEndian.Uint32(v[:]), nil, int(h>>1)
	r.data = r.data[size:]
	if r.width < 32 && r.val>>r.width != 0 {
		return errRLE
	}
	return nil
}

// skipRepeat skips the next n values when they are all v in one repeated
// run, and reports whether it did; otherwise nothing is consumed (the
// current run may have been started).
func (r *rleDecoder) skipRepeat(n int, v uint32) (bool, error) {
	if r.run == 0 {
		if err := r.next(); err != nil {
			return false, err
		}
	}
	if r.bp != nil || r.val != v || r.run < n {
		return false, nil
	}
	r.run -= n
	return true, nil
}

// read fills out with the next len(out) values.
func (r *rleDecoder) read(out []int32) error {
	for len(out) > 0 {
		if r.run == 0 {
			if err := r.next(); err != nil {
				return err
			}
		}
		n := min(r.run, len(out))
		if r.bp == nil {
			v := int32(r.val)
			for k := range out[:n] {
				out[k] = v
			}
		} else {
			r.unpack(out[:n])
		}
		r.run -= n
		out = out[n:]
	}
	return nil
}

// unpack reads len(out) values of the bit-packed run.
func (r *rleDecoder) unpack(out []int32) {
	w, mask := r.width, uint64(1)<<r.width-1
	bp, bit := r.bp, r.bit
	for k := range out {
		i := bit >> 3
		var word uint64
		if int(i)+8 <= len(bp) {
			word = binary.LittleEndian.Uint64(bp[i:])
		} else {
			var tail [8]byte
			copy(tail[:], bp[i:])
			word = binary.LittleEndian.Uint64(tail[:])
		}
		out[k] = int32(word >> (bit & 7) & mask)
		bit += w
	}
	r.bit = bit
}
