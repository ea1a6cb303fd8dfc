package subscribe

import (
	"encoding/binary"
	"errors"
)

// rleDecoder reads parquet's RLE / bit-packing hybrid encoding (definition
// levels, dictionary indices) of values up to 32 bits wide.
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
