package bootstrap

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/deltabus/deltabus/decoding"
)

// binStream is a COPY binary stream of n one-column rows holding 0..n-1
// as int8, with the end marker when complete.
func binStream(n int, complete bool) []byte {
	b := append([]byte{}, binCopySignature...)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	for i := range n {
		b = binary.BigEndian.AppendUint16(b, 1)
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(i))
	}
	if complete {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	}
	return b
}

// copyInPieces writes stream to sink in uneven pieces, as pgconn might.
func copyInPieces(stream []byte) func(context.Context, *fanOut) error {
	return func(ctx context.Context, sink *fanOut) error {
		for i := 0; len(stream) > 0; i++ {
			k := min(len(stream), 1+(i*7919)%5000)
			if _, err := sink.Write(stream[:k]); err != nil {
				return err
			}
			stream = stream[k:]
		}
		return nil
	}
}

func withChunk(t *testing.T, n int) {
	old := fanOutChunk
	fanOutChunk = n
	t.Cleanup(func() { fanOutChunk = old })
}

// TestFanOutDealsEveryRowOnceInOrder: every row reaches exactly one
// worker, each worker sees its rows in stream order, and all workers get
// some.
func TestFanOutDealsEveryRowOnceInOrder(t *testing.T) {
	withChunk(t, 1000)
	const n, workers = 20_000, 3
	got := make([][]uint64, workers)
	parsers := make([]*binRows, workers)
	for k := range parsers {
		parsers[k] = newBinRows(1, func(d []decoding.Datum) error {
			got[k] = append(got[k], binary.BigEndian.Uint64(d[0].Data))
			return nil
		})
		parsers[k].header = true
	}
	f := newFanOut(t.Context(), 1, workers, -1)
	if err := f.run(copyInPieces(binStream(n, true)), parsers); err != nil {
		t.Fatal(err)
	}
	var all []uint64
	for k, g := range got {
		if len(g) == 0 || !slices.IsSorted(g) {
			t.Errorf("worker %d got %d rows, sorted %t", k, len(g), slices.IsSorted(g))
		}
		all = append(all, g...)
	}
	slices.Sort(all)
	if len(all) != n || all[0] != 0 || all[n-1] != n-1 || len(slices.Compact(all)) != n {
		t.Fatalf("workers got %d rows in all, want each of %d once", len(all), n)
	}
}

// TestFanOutStopsOnAnyError: a failing worker stops the copy (no
// deadlock while the stream keeps coming), and a truncated stream fails.
func TestFanOutStopsOnAnyError(t *testing.T) {
	withChunk(t, 500)
	boom := errors.New("boom")
	parsers := make([]*binRows, 2)
	for k := range parsers {
		rows := 0
		parsers[k] = newBinRows(1, func([]decoding.Datum) error {
			if rows++; k == 1 && rows == 5 {
				return boom
			}
			return nil
		})
		parsers[k].header = true
	}
	done := make(chan error, 1)
	go func() { done <- newFanOut(t.Context(), 1, 2, -1).run(copyInPieces(binStream(200_000, true)), parsers) }()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("run = %v, want the worker's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after a worker failed")
	}

	ok := []*binRows{newBinRows(1, func([]decoding.Datum) error { return nil })}
	ok[0].header = true
	if err := newFanOut(t.Context(), 1, 1, -1).run(copyInPieces(binStream(100, false)), ok); err == nil {
		t.Fatal("a stream without its end marker was accepted")
	}
}
