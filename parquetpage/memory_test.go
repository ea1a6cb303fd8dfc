package parquetpage

import (
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestEncodingMemoryBounded: encoding a row group allocates about a page,
// a dictionary and the footer's metadata, not the row group's size: a
// row group of about 80 MiB of strings (in values past a page's size, and in
// many small ones) allocates less than 12 MiB, scratch included.
func TestEncodingMemoryBounded(t *testing.T) {
	_, s := testSchema(t)
	const rows = 200_000
	big := strings.Repeat("x", 300_000)
	g := group{rows: rows, vals: make([][]any, len(testFields))}
	for c, f := range testFields {
		g.vals[c] = make([]any, rows)
		for i := range rows {
			switch {
			case f.Name == "s_req" && i%1000 == 0: // 200 values of 300 kB: 60 MB
				g.vals[c][i] = big
			case f.Type.ID() == testFields[0].Type.ID(): // strings: ~20 MB in all
				g.vals[c][i] = strings.Repeat("y", i%60)
			case f.Type.ID() == testFields[4].Type.ID():
				g.vals[c][i] = int32(i % 100)
			default:
				g.vals[c][i] = int64(i)
			}
		}
	}
	cols := g.columns()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := NewFile(s, io.Discard)
	if err := f.WriteRowGroup(rows, cols); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	data := 0
	for _, c := range cols {
		data += len(c.Data)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12<<20 || data < 64<<20 {
		t.Fatalf("encoding %d MiB of strings allocated %d KiB", data>>20, alloc>>10)
	} else {
		t.Logf("encoding %d MiB of strings (%d MiB written) allocated %d KiB", data>>20, f.Size()>>20, alloc>>10)
	}
}
