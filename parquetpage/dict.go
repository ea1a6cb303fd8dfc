package parquetpage

import (
	"bytes"
	"hash/maphash"
)

// dictionary maps the distinct values of one column chunk to their
// indices, in order of first appearance. Values are byte strings (a
// number is its PLAIN bytes). It is an open-addressing hash table over the
// values' bytes, kept in one buffer: inserting allocates nothing once the
// buffers have grown, and reset keeps them for the next chunk.
type dictionary struct {
	seed  maphash.Seed
	data  []byte   // the values, concatenated
	offs  []int32  // value k is data[offs[k]:offs[k+1]]
	slots []int32  // index+1 of the value in the slot, 0 when free
	hash  []uint64 // hash of value k
	size  int      // PLAIN size of the dictionary page's values
}

// reset empties the dictionary for a chunk of rows rows, with a table no
// larger than those rows need (a small chunk after a large one clears
// little), grown as values come.
func (d *dictionary) reset(rows int) {
	if d.slots == nil {
		d.seed = maphash.MakeSeed()
	}
	n := 64
	for n < 2*rows && n < max(cap(d.slots), 1024) {
		n <<= 1
	}
	d.resize(n)
	d.data, d.offs, d.hash, d.size = d.data[:0], append(d.offs[:0], 0), d.hash[:0], 0
}

// len is the number of distinct values.
func (d *dictionary) len() int { return len(d.hash) }

// value returns value k.
func (d *dictionary) value(k int32) []byte { return d.data[d.offs[k]:d.offs[k+1]] }

// index returns the index of v, adding it (plainLen bytes in a PLAIN
// page) when new.
func (d *dictionary) index(v []byte, plainLen int) int32 {
	h := maphash.Bytes(d.seed, v)
	mask := uint64(len(d.slots) - 1)
	for s := h & mask; ; s = (s + 1) & mask {
		k := d.slots[s] - 1
		if k < 0 {
			break
		}
		if d.hash[k] == h && bytes.Equal(d.value(k), v) {
			return k
		}
	}
	k := int32(len(d.hash))
	d.data = append(d.data, v...)
	d.offs = append(d.offs, int32(len(d.data)))
	d.hash = append(d.hash, h)
	d.size += plainLen
	if 2*len(d.hash) > len(d.slots) {
		d.rehash(2 * len(d.slots))
	} else {
		d.place(h, k)
	}
	return k
}

// place puts index k, of hash h, in the first free slot from h.
func (d *dictionary) place(h uint64, k int32) {
	mask := uint64(len(d.slots) - 1)
	s := h & mask
	for d.slots[s] != 0 {
		s = (s + 1) & mask
	}
	d.slots[s] = k + 1
}

// resize empties the table and makes it n slots (a power of two).
func (d *dictionary) resize(n int) {
	if cap(d.slots) >= n {
		d.slots = d.slots[:n]
		clear(d.slots)
	} else {
		d.slots = make([]int32, n)
	}
}

// rehash rebuilds the table with n slots (a power of two).
func (d *dictionary) rehash(n int) {
	d.resize(n)
	for k, h := range d.hash {
		d.place(h, int32(k))
	}
}
