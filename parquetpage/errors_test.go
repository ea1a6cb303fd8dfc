package parquetpage

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

var errDisk = errors.New("disk full")

func (w *failAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		n := w.n
		w.n = 0
		return n, errDisk
	}
	w.n -= len(p)
	return len(p), nil
}

// TestWriteErrorIsSticky: a failed write fails the row group, and every
// later call, whatever byte it failed at.
func TestWriteErrorIsSticky(t *testing.T) {
	_, s := testSchema(t)
	g := randomGroup(rand.New(rand.NewPCG(1, 1)), shape{rows: 3000, nullPct: 10, distinct: 4, maxLen: 400_000})
	for _, n := range []int{0, 3, 100, 10_000, 300_000} {
		f := NewFile(s, &failAfter{n: n})
		err := f.WriteRowGroup(g.rows, g.columns())
		if err == nil {
			err = f.WriteRowGroup(g.rows, g.columns())
		}
		if !errors.Is(err, errDisk) {
			t.Fatalf("failing after %d bytes: %v", n, err)
		}
		if err2 := f.WriteRowGroup(g.rows, g.columns()); !errors.Is(err2, errDisk) {
			t.Errorf("next row group after the failure: %v", err2)
		}
		if err2 := f.Close(); !errors.Is(err2, errDisk) {
			t.Errorf("Close after the failure: %v", err2)
		}
	}
}

// TestRefusesBadShapes: a row group that does not fit the schema is
// refused before anything is written, and the file stays usable.
func TestRefusesBadShapes(t *testing.T) {
	_, s := testSchema(t)
	g := randomGroup(rand.New(rand.NewPCG(2, 2)), shape{rows: 100, nullPct: 10, distinct: 4, maxLen: 10})
	var out failAfter
	out.n = 1 << 30
	bad := []func(c []Column) []Column{
		func(c []Column) []Column { return c[:3] },
		func(c []Column) []Column { c[0].Valid = make([]byte, 13); return c }, // NULL in a required column
		func(c []Column) []Column { c[1].Valid = c[1].Valid[:0:0]; return c }, // bitmap too short
		func(c []Column) []Column { c[1].Offs = c[1].Offs[:50]; return c },
		func(c []Column) []Column { c[2].Data = c[2].Data[:len(c[2].Data)/2]; return c },
		func(c []Column) []Column { c[5].I32 = c[5].I32[:99]; return c },
		func(c []Column) []Column { c[6].I64 = nil; return c },
	}
	f := NewFile(s, &out)
	for i, mutate := range bad {
		cols := g.columns()
		if cols[1].Valid == nil {
			cols[1].Valid = make([]byte, 13)
		}
		if err := f.WriteRowGroup(g.rows, mutate(cols)); err == nil {
			t.Errorf("bad shape %d accepted", i)
		}
	}
	if f.Size() != 0 {
		t.Fatalf("%d bytes written for refused row groups", f.Size())
	}
	if err := f.WriteRowGroup(0, g.columns()); err == nil {
		t.Error("a row group of 0 rows accepted")
	}
	if err := f.WriteRowGroup(g.rows, g.columns()); err != nil {
		t.Fatalf("good row group after refused ones: %v", err)
	}
}
