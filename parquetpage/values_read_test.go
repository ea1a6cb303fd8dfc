package parquetpage

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testBatch is the batch size of the value decoders' tests.
const testBatch = 1024

// TestPlainTextMatchesPlainValues: the one-copy reading of a whole chunk
// from one PLAIN page gives the values (NULL, empty, long) the value by
// value reading gives, and both refuse a value past the page's end.
func TestPlainTextMatchesPlainValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var page []byte
	nulls := make([]bool, testBatch)
	var want []string
	for k := range nulls {
		nulls[k] = rng.IntN(5) == 0
		if nulls[k] {
			want = append(want, "")
			continue
		}
		v := strings.Repeat(string(rune('a'+k%26)), rng.IntN(3)*rng.IntN(200))
		page = binary.LittleEndian.AppendUint32(page, uint32(len(v)))
		page = append(page, v...)
		want = append(want, v)
	}
	read := func(direct bool, page []byte) ([]string, error) {
		s := &Reader{plain: page}
		o := Batch{Starts: make([]int32, len(nulls)), Ends: make([]int32, len(nulls)), Nulls: nulls}
		var err error
		if direct {
			err = s.plainText(&o)
		} else {
			o.Buf, err = s.plainValues(o.Buf, o.Starts, o.Ends, nulls)
			o.Text = string(o.Buf)
		}
		if err != nil || o.Direct != direct || len(s.plain) != 0 {
			return nil, cmp.Or(err, fmt.Errorf("direct %t, %d bytes left", o.Direct, len(s.plain)))
		}
		var got []string
		for k := range nulls {
			got = append(got, o.Text[o.Starts[k]:o.Ends[k]])
		}
		return got, nil
	}
	for _, direct := range []bool{true, false} {
		got, err := read(direct, page)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("direct %t: %v, values equal %t", direct, err, reflect.DeepEqual(got, want))
		}
		if _, err := read(direct, page[:len(page)-1]); err == nil {
			t.Fatalf("direct %t: a value past the page's end was read", direct)
		}
	}
}

// TestDictTextMatchesDictValues: rows as ranges of the dictionary itself
// equal the rows copied value by value, and an index out of the
// dictionary is refused either way.
func TestDictTextMatchesDictValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := &Reader{dict: []byte("alphabetagamma"), doffs: []int32{0, 5, 9, 9, 14}, dictN: 4}
	nulls := make([]bool, testBatch)
	var idxs []int32
	for k := range nulls {
		if nulls[k] = rng.IntN(4) == 0; !nulls[k] {
			idxs = append(idxs, int32(rng.IntN(4)))
		}
	}
	read := func(direct bool, idxs []int32) ([]string, error) {
		o := Batch{Starts: make([]int32, len(nulls)), Ends: make([]int32, len(nulls)), Nulls: nulls}
		var err error
		if direct {
			err = s.dictText(&o, idxs)
		} else {
			o.Buf, err = s.dictValues(o.Buf, o.Starts, o.Ends, nulls, idxs)
			o.Text = string(o.Buf)
		}
		if err != nil {
			return nil, err
		}
		var got []string
		for k := range nulls {
			got = append(got, o.Text[o.Starts[k]:o.Ends[k]])
		}
		return got, nil
	}
	want, err := read(false, idxs)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read(true, idxs); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("dictText: %v, rows equal %t", err, reflect.DeepEqual(got, want))
	}
	idxs[len(idxs)/2] = 4
	for _, direct := range []bool{true, false} {
		if _, err := read(direct, idxs); err == nil {
			t.Fatalf("direct %t: index 4 of a 4-value dictionary was read", direct)
		}
	}
}

// TestNumDenseMatchesNumSparse: rows without a NULL read the same numbers
// through the dense loops as row by row, INT32 and INT64, PLAIN and from a
// dictionary, and both refuse values cut short or out of the dictionary.
func TestNumDenseMatchesNumSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, w := range []int{4, 8} {
		for _, dict := range []bool{false, true} {
			var src []byte
			for range testBatch {
				src = binary.LittleEndian.AppendUint64(src, rng.Uint64())
			}
			idxs := make([]int32, testBatch)
			for k := range idxs {
				idxs[k] = int32(rng.IntN(300))
			}
			read := func(dense bool, src []byte, idxs []int32) ([]int64, error) {
				s := &Reader{width: w, plain: src}
				if dict {
					s.idx, s.dict, s.dictN, s.plain = &rleDecoder{}, src, len(src)/w, nil
				}
				nums := make([]int64, testBatch)
				if dense {
					return nums, s.numDense(nums, idxs)
				}
				return nums, s.numSparse(nums, make([]bool, testBatch), idxs)
			}
			if !dict {
				src = src[:testBatch*w]
			}
			want, err := read(false, src, idxs)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := read(true, src, idxs); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("width %d dictionary %t: %v, equal %t", w, dict, err, reflect.DeepEqual(got, want))
			}
			short, bad := src[:len(src)-1], slices.Clone(idxs)
			if bad[7] = int32(len(src) / w); !dict {
				bad = idxs
			}
			for _, dense := range []bool{true, false} {
				if _, err := read(dense, short, bad); err == nil {
					t.Fatalf("width %d dictionary %t dense %t: read past the values", w, dict, dense)
				}
			}
		}
	}
}
