package parquetpage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// level is one level of a column chunk as a test compares it: its
// definition and repetition levels and its value (nil, string, int64 or
// bool) where it has one.
type level struct {
	def, rep int16
	v        any
}

func (l level) String() string { return fmt.Sprintf("%d/%d:%.40q", l.def, l.rep, fmt.Sprint(l.v)) }

// readOurs reads column col of row group rg with Reader, in batches of
// random sizes; withLevels asks for Defs and Reps (without, a level's def
// is the maximum or 0, and rep 0, which only a flat column can compare).
// It returns the levels read and the error that ended the chunk (nil at
// its end).
func readOurs(t testing.TB, data []byte, rg *metadata.RowGroupMetaData, col int, withLevels bool, rng *rand.Rand) ([]level, error) {
	t.Helper()
	c, off, size, err := ChunkAt(rg, col, int64(len(data)))
	if err != nil {
		return nil, err
	}
	c.Data = data[off : off+size]
	var r Reader
	r.Reset(c)
	var out []level
	for {
		n := 1 + rng.IntN(3000)
		b := Batch{Nulls: make([]bool, n), Nums: make([]int64, n), Bools: make([]bool, n),
			Starts: make([]int32, n), Ends: make([]int32, n)}
		if withLevels {
			b.Defs, b.Reps = make([]int16, n), make([]int16, n)
		}
		if rng.IntN(2) == 0 {
			b.Buf = []byte("left from an earlier read")
		}
		got, err := r.Read(&b)
		text := func(k int) string {
			if b.Direct {
				return b.Text[b.Starts[k]:b.Ends[k]]
			}
			return string(b.Buf[b.Starts[k]:b.Ends[k]])
		}
		for k := range got {
			l := level{def: c.MaxDef}
			if withLevels {
				l.def, l.rep = b.Defs[k], b.Reps[k]
			} else if b.Nulls[k] {
				l.def = 0
			}
			if b.Nulls[k] != (l.def < c.MaxDef) {
				t.Fatalf("level %d: null %t at definition level %d of %d", len(out), b.Nulls[k], l.def, c.MaxDef)
			}
			if !b.Nulls[k] {
				switch c.Kind {
				case ByteArray:
					l.v = text(k)
				case Boolean:
					l.v = b.Bools[k]
				default:
					l.v = b.Nums[k]
				}
			}
			out = append(out, l)
		}
		if r.Levels() != int64(len(out)) {
			t.Fatalf("Levels %d after %d levels read", r.Levels(), len(out))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// readArrow reads column col of row group rg with arrow-go's column
// reader.
func readArrow(t testing.TB, pf *file.Reader, rg, col int) ([]level, error) {
	t.Helper()
	cr, err := pf.RowGroup(rg).Column(col)
	if err != nil {
		t.Fatal(err)
	}
	descr := pf.MetaData().Schema.Column(col)
	const batch = 333
	def, rep := make([]int16, batch), make([]int16, batch)
	var out []level
	add := func(n int64, value func(j int) any) {
		j := 0
		for e := range n {
			l := level{def: descr.MaxDefinitionLevel()}
			if l.def > 0 {
				l.def = def[e]
			}
			if descr.MaxRepetitionLevel() > 0 {
				l.rep = rep[e]
			}
			if l.def == descr.MaxDefinitionLevel() {
				l.v = value(j)
				j++
			}
			out = append(out, l)
		}
	}
	for cr.HasNext() {
		var n int64
		switch r := cr.(type) {
		case *file.ByteArrayColumnChunkReader:
			vals := make([]parquet.ByteArray, batch)
			n, _, err = r.ReadBatch(batch, vals, def, rep)
			add(n, func(j int) any { return string(vals[j]) })
		case *file.Int32ColumnChunkReader:
			vals := make([]int32, batch)
			n, _, err = r.ReadBatch(batch, vals, def, rep)
			add(n, func(j int) any { return int64(vals[j]) })
		case *file.Int64ColumnChunkReader:
			vals := make([]int64, batch)
			n, _, err = r.ReadBatch(batch, vals, def, rep)
			add(n, func(j int) any { return vals[j] })
		case *file.BooleanColumnChunkReader:
			vals := make([]bool, batch)
			n, _, err = r.ReadBatch(batch, vals, def, rep)
			add(n, func(j int) any { return vals[j] })
		default:
			t.Fatalf("column %d: reader %T", col, r)
		}
		if err != nil {
			return out, fmt.Errorf("arrow-go, column %s: %w", descr.Path(), err)
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

// readable reports whether Reader reads columns of this physical type.
func readable(typ parquet.Type) bool {
	switch typ {
	case parquet.Types.ByteArray, parquet.Types.Int32, parquet.Types.Int64, parquet.Types.Boolean:
		return true
	}
	return false
}

// coverage counts the column chunks compareFile read whole, and those
// Reader left (in part or from the start) to another reader.
type coverage struct{ read, unsupported int }

// compareFile reads every column chunk of a readable type in data with
// Reader and with arrow-go, and fails unless they give the same levels,
// or Reader stops with ErrUnsupported after a prefix of arrow-go's.
func compareFile(t testing.TB, name string, data []byte, rng *rand.Rand) coverage {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer pf.Close()
	var cov coverage
	sc := pf.MetaData().Schema
	for rg := range pf.NumRowGroups() {
		for col := range sc.NumColumns() {
			descr := sc.Column(col)
			if !readable(descr.PhysicalType()) {
				continue
			}
			want, arrowErr := readArrow(t, pf, rg, col)
			modes := []bool{true}
			if descr.MaxRepetitionLevel() == 0 && descr.MaxDefinitionLevel() <= 1 {
				modes = append(modes, false) // as a flat column: Nulls alone
			}
			for _, withLevels := range modes {
				got, err := readOurs(t, data, pf.MetaData().RowGroup(rg), col, withLevels, rng)
				where := fmt.Sprintf("%s row group %d column %s (levels %t)", name, rg, descr.Path(), withLevels)
				switch {
				case arrowErr != nil && errors.Is(err, ErrUnsupported):
					// arrow-go cannot read back some DELTA pages (its own
					// and DuckDB's): neither reader reads the chunk.
					t.Logf("%s: %v", where, arrowErr)
					if withLevels {
						cov.unsupported++
					}
				case arrowErr != nil:
					t.Fatalf("%s: Reader read it, with %v; %v", where, err, arrowErr)
				case errors.Is(err, ErrUnsupported):
					if withLevels {
						cov.unsupported++
					}
					if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
						t.Fatalf("%s: before a page it does not decode, Reader read %d levels unlike arrow-go's", where, len(got))
					}
				case err != nil:
					t.Fatalf("%s: %v", where, err)
				case !slices.Equal(got, want):
					t.Fatalf("%s: Reader and arrow-go differ:\n%.300v\n%.300v", where, got, want)
				case withLevels:
					cov.read++
				}
			}
		}
	}
	return cov
}

// otherWritersFiles are the parquet files of other writers the repository
// holds: data files and checkpoints of Spark, delta-rs and kernel
// conformance tables, and sink/topic's fixtures.
func otherWritersFiles(t testing.TB) []string {
	var paths []string
	for _, dir := range []string{"../sink/delta/testdata/conformance", "../sink/topic/testdata"} {
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".parquet") {
				paths = append(paths, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// TestReaderOtherWriters: every column chunk of the files other writers
// made (Spark, delta-rs, kernel conformance tables: flat data columns,
// nested and repeated checkpoint columns, booleans) reads the same with
// Reader as with arrow-go, levels and values.
func TestReaderOtherWriters(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var cov coverage
	checkpoints := 0
	paths := otherWritersFiles(t)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c := compareFile(t, p, data, rng)
		cov.read += c.read
		cov.unsupported += c.unsupported
		if strings.Contains(p, ".checkpoint.") {
			checkpoints++
		}
	}
	t.Logf("%d files (%d checkpoints): %d column chunks read, %d left to arrow-go", len(paths), checkpoints, cov.read, cov.unsupported)
	if len(paths) < 50 || checkpoints < 4 || cov.read < 500 {
		t.Fatalf("%d files, %d checkpoints, %d column chunks read: testdata moved?", len(paths), checkpoints, cov.read)
	}
	if cov.unsupported > cov.read/20 {
		t.Fatalf("%d column chunks of other writers left to arrow-go, %d read", cov.unsupported, cov.read)
	}
}
