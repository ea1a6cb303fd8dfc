package parquetpage

import (
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRLESkipRepeatMatchesRead: reading definition levels (width 1) in
// random steps, skipping a step when skipRepeat can (every value the
// maximum, in one repeated run), gives the levels read value by value,
// over repeated and bit-packed runs.
func TestRLESkipRepeatMatchesRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var data []byte
	var want []int32
	for range 200 {
		if rng.IntN(2) == 0 { // repeated run
			n, v := 1+rng.IntN(3000), int32(rng.IntN(2))
			data = append(binary.AppendUvarint(data, uint64(n)<<1), byte(v))
			for range n {
				want = append(want, v)
			}
			continue
		}
		groups := 1 + rng.IntN(4) // bit-packed: 8 values a byte
		data = binary.AppendUvarint(data, uint64(groups)<<1|1)
		for range groups {
			b := byte(rng.Uint32())
			data = append(data, b)
			for i := range 8 {
				want = append(want, int32(b>>i&1))
			}
		}
	}
	r, got, skipped := newRLE(data, 1), []int32(nil), 0
	for len(got) < len(want) {
		n := min(1+rng.IntN(1500), len(want)-len(got))
		all, err := r.skipRepeat(n, 1)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int32, n)
		if all {
			for k := range out {
				out[k] = 1
			}
			skipped++
		} else if err := r.read(out); err != nil {
			t.Fatal(err)
		}
		got = append(got, out...)
	}
	if !reflect.DeepEqual(got, want) || skipped == 0 {
		t.Fatalf("levels equal %t, %d steps skipped", reflect.DeepEqual(got, want), skipped)
	}
	if all, err := r.skipRepeat(1, 1); all || err == nil {
		t.Fatalf("past the end: skipped %t, error %v", all, err)
	}
}
