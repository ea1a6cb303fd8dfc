package parquetpage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// numValues sets the numbers of the rows, from the dictionary by idxs or
// from the PLAIN values.
func (r *Reader) numValues(nums []int64, nulls []bool, idxs []int32) error {
	if len(idxs) == len(nums) { // no NULL
		return r.numDense(nums, idxs)
	}
	return r.numSparse(nums, nulls, idxs)
}

// numSparse is numValues row by row, NULLs included.
func (r *Reader) numSparse(nums []int64, nulls []bool, idxs []int32) error {
	src, w := r.plain, r.width
	if r.idx != nil {
		src = r.dict
	} else if len(idxs)*w > len(src) {
		return errors.New("PLAIN values cut short")
	}
	v := 0
	for k := range nums {
		if nulls[k] {
			nums[k] = 0
			continue
		}
		at := v * w
		if r.idx != nil {
			if uint(idxs[v]) >= uint(r.dictN) {
				return fmt.Errorf("dictionary index %d out of %d values", idxs[v], r.dictN)
			}
			at = int(idxs[v]) * w
		}
		v++
		if w == 4 {
			nums[k] = int64(int32(binary.LittleEndian.Uint32(src[at:])))
		} else {
			nums[k] = int64(binary.LittleEndian.Uint64(src[at:]))
		}
	}
	if r.idx == nil {
		r.plain = src[v*w:]
	}
	return nil
}

// numDense is numValues for rows without a NULL: one loop per width and
// source, no per-row branch but the dictionary's bound.
func (r *Reader) numDense(nums []int64, idxs []int32) error {
	w := r.width
	if r.idx == nil {
		src := r.plain
		if len(nums)*w > len(src) {
			return errors.New("PLAIN values cut short")
		}
		if w == 4 {
			for k := range nums {
				nums[k] = int64(int32(binary.LittleEndian.Uint32(src[4*k:])))
			}
		} else {
			for k := range nums {
				nums[k] = int64(binary.LittleEndian.Uint64(src[8*k:]))
			}
		}
		r.plain = src[len(nums)*w:]
		return nil
	}
	dict, n := r.dict, uint(r.dictN)
	for k, i := range idxs {
		if uint(i) >= n {
			return fmt.Errorf("dictionary index %d out of %d values", i, r.dictN)
		}
		if w == 4 {
			nums[k] = int64(int32(binary.LittleEndian.Uint32(dict[4*int(i):])))
		} else {
			nums[k] = int64(binary.LittleEndian.Uint64(dict[8*int(i):]))
		}
	}
	return nil
}

func (r *Reader) dictValues(buf []byte, starts, ends []int32, nulls []bool, idxs []int32) ([]byte, error) {
	dict, doffs := r.dict, r.doffs
	prev, v := int32(-1), 0
	var from, to int32
	for k := range starts {
		if nulls[k] {
			starts[k], ends[k] = 0, 0
			continue
		}
		i := idxs[v]
		v++
		if i != prev {
			if uint(i) >= uint(len(doffs)-1) {
				return buf, fmt.Errorf("dictionary index %d out of %d values", i, len(doffs)-1)
			}
			from, prev = int32(len(buf)), i
			buf = append(buf, dict[doffs[i]:doffs[i+1]]...)
			to = int32(len(buf))
		}
		starts[k], ends[k] = from, to
	}
	return buf, nil
}

func (r *Reader) plainValues(buf []byte, starts, ends []int32, nulls []bool) ([]byte, error) {
	p := r.plain
	for k := range starts {
		if nulls[k] {
			starts[k], ends[k] = 0, 0
			continue
		}
		if len(p) < 4 {
			return buf, errors.New("PLAIN values cut short")
		}
		l := binary.LittleEndian.Uint32(p)
		if uint64(l) > uint64(len(p)-4) {
			return buf, fmt.Errorf("PLAIN value of %d bytes past the page's end", l)
		}
		starts[k] = int32(len(buf))
		buf = append(buf, p[4:4+l]...)
		ends[k] = int32(len(buf))
		p = p[4+l:]
	}
	r.plain = p
	return buf, nil
}

// maxDictText bounds the dictionaries whose rows are ranges of the
// dictionary itself (dictText): keeping one value keeps its dictionary, so
// a handler that keeps one key per file (a map of the last event per key)
// keeps at most this much per file, about what a chunk's own column of
// keys would keep. The relay's topic, type and key dictionaries are far
// smaller; a larger one (headers unique per event) is copied row by row.
const maxDictText = 64 << 10

// dictText sets every row of o from the dictionary without a copy: o.Text
// is the dictionary's values (one string per dictionary page, made once,
// never reused), each row a range of it.
func (r *Reader) dictText(o *Batch, idxs []int32) error {
	if r.dstr == "" {
		r.dstr = string(r.dict)
	}
	doffs, v := r.doffs, 0
	for k, null := range o.Nulls {
		if null {
			o.Starts[k], o.Ends[k] = 0, 0
			continue
		}
		i := idxs[v]
		v++
		if uint(i) >= uint(len(doffs)-1) {
			return fmt.Errorf("dictionary index %d out of %d values", i, len(doffs)-1)
		}
		o.Starts[k], o.Ends[k] = doffs[i], doffs[i+1]
	}
	o.Text, o.Direct = r.dstr, true
	return nil
}

// plainText reads every row of o from the current PLAIN page with one
// copy: o.Text is the page's bytes from the first value to the last,
// length prefixes included, each value a range of it.
func (r *Reader) plainText(o *Batch) error {
	p, off := r.plain, 0
	for k, null := range o.Nulls {
		if null {
			o.Starts[k], o.Ends[k] = 0, 0
			continue
		}
		if len(p)-off < 4 {
			return errors.New("PLAIN values cut short")
		}
		l := binary.LittleEndian.Uint32(p[off:])
		if uint64(l) > uint64(len(p)-off-4) || off+4+int(l) > maxBatchBytes {
			return fmt.Errorf("PLAIN value of %d bytes past the page's end", l)
		}
		o.Starts[k] = int32(off + 4)
		off += 4 + int(l)
		o.Ends[k] = int32(off)
	}
	o.Text, o.Direct = string(p[:off]), true // one allocation, never reused
	r.plain = p[off:]
	return nil
}

// dictionary keeps the values of a dictionary page (its buffer is reused
// by the pages that follow).
func (r *Reader) dictionary(p page) error {
	if p.encoding != encPlain && p.encoding != encPlainDict || r.kind == Boolean {
		return ErrUnsupported
	}
	data, n := p.values, p.numValues
	if n < 0 || n > len(data)/max(r.width, 4) {
		return fmt.Errorf("dictionary page of %d values in %d bytes", n, len(data))
	}
	r.dictN, r.dstr = n, ""
	if r.width > 0 {
		r.dict = append(r.dict[:0], data[:n*r.width]...)
		return nil
	}
	r.dict, r.doffs = slices.Grow(r.dict[:0], len(data)-4*n), append(slices.Grow(r.doffs[:0], n+1), 0)
	for range n {
		if len(data) < 4 || uint64(binary.LittleEndian.Uint32(data)) > uint64(len(data)-4) {
			return errors.New("dictionary value past the page's end")
		}
		l := binary.LittleEndian.Uint32(data)
		r.dict = append(r.dict, data[4:4+l]...)
		r.doffs = append(r.doffs, int32(len(r.dict)))
		data = data[4+l:]
	}
	return nil
}
