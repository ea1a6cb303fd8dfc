package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// flatAndArrow decodes the reader's row groups of a checkpoint with the
// flat reader and with pqarrow.
func flatAndArrow(t *testing.T, data []byte) (flat, arrow []Action, flatErr error) {
	t.Helper()
	pf, err := openParquet(data)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	rgs := rowGroupsWithout(pf, "remove.path")
	if len(rgs) == 0 {
		return nil, nil, nil
	}
	flat, flatErr = parseFlat(context.Background(), pf, bytes.NewReader(data), int64(len(data)), rgs)
	if arrow, err = parseArrow(context.Background(), pf, rgs, false); err != nil {
		t.Fatal(err)
	}
	return flat, arrow, flatErr
}

func sameActions(t *testing.T, name string, flat, arrow []Action) {
	t.Helper()
	if len(flat) != len(arrow) {
		t.Fatalf("%s: flat reader gives %d actions, pqarrow %d", name, len(flat), len(arrow))
	}
	for i := range flat {
		if !reflect.DeepEqual(flat[i], arrow[i]) {
			t.Errorf("%s: action %d:\nflat   %s\npqarrow %s", name, i, actionString(flat[i]), actionString(arrow[i]))
		}
	}
}

func actionString(a Action) string {
	b, err := EncodeCommit([]Action{a})
	if err != nil {
		return fmt.Sprintf("%+v", a)
	}
	return strings.TrimSpace(string(b))
}

// conformanceCheckpoints yields the path and bytes of every checkpoint
// file of the conformance tables.
func conformanceCheckpoints(t *testing.T) iter.Seq2[string, []byte] {
	var paths []string
	err := filepath.WalkDir(conformanceDir(t), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".checkpoint.") && strings.HasSuffix(p, ".parquet") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil || len(paths) == 0 {
		t.Fatalf("no conformance checkpoint found: %v", err)
	}
	return func(yield func(string, []byte) bool) {
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !yield(p, data) {
				return
			}
		}
	}
}

// TestFlatCheckpointMatchesArrow: the flat reader gives exactly pqarrow's
// actions for the checkpoints of other writers (or leaves them to
// pqarrow) and for the checkpoints this package writes.
func TestFlatCheckpointMatchesArrow(t *testing.T) {
	flatRead := 0
	for p, data := range conformanceCheckpoints(t) {
		flat, arrow, err := flatAndArrow(t, data)
		switch {
		case errors.Is(err, errFlatUnfit):
			t.Logf("%s: left to pqarrow", p)
		case err != nil:
			t.Errorf("%s: flat reader: %v", p, err)
		default:
			flatRead++
			sameActions(t, p, flat, arrow)
		}
	}
	if flatRead == 0 {
		t.Error("the flat reader read none of the conformance checkpoints")
	}
	for name, snap := range flatSnapshots() {
		data, _, _, err := EncodeCheckpoint(snap, time.UnixMilli(2000))
		if err != nil {
			t.Fatal(err)
		}
		flat, arrow, err := flatAndArrow(t, data)
		if err != nil {
			t.Fatalf("%s: flat reader: %v", name, err)
		}
		sameActions(t, name, flat, arrow)
	}
}

// flatSnapshots are table states whose checkpoints hold every shape the
// flat reader decodes: null, empty and full MAPs and LISTs, null map
// values, optional fields set and unset, several txns and domains, and
// tombstones (in row groups of their own).
func flatSnapshots() map[string]*Snapshot {
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	yes := true
	full := newSnapshot()
	full.Version = 7
	full.Protocol = Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{}, WriterFeatures: []string{"appendOnly", "domainMetadata"}}
	full.Metadata = Metadata{ID: "id", Name: str("orders"), Description: str(""), Format: Format{Provider: "parquet", Options: map[string]string{"k": "v"}},
		SchemaString: `{"type":"struct","fields":[]}`, PartitionColumns: []string{"day", "region"},
		Configuration: map[string]string{"delta.appendOnly": "true", "empty": ""}, CreatedTime: i64(5)}
	full.Files = map[string]Add{
		"a": {Path: "a", PartitionValues: map[string]*string{"day": str("1"), "region": nil}, Size: 10, ModificationTime: 20, Stats: `{"numRecords":1}`, Tags: map[string]string{"t": "x", "u": ""}},
		"b": {Path: "b%20c", PartitionValues: map[string]*string{}, Size: 0, ModificationTime: 0},
		"c": {Path: "c", Size: 3, Tags: map[string]string{}},
	}
	full.Tombstones = map[string]Remove{"old": {Path: "old", DeletionTimestamp: i64(1500), ExtendedFileMetadata: &yes, Size: i64(4)}}
	full.Txns = map[string]Txn{"app1": {AppID: "app1", Version: 9, LastUpdated: i64(3)}, "app2": {AppID: "app2", Version: -1}}
	full.Domains = map[string]DomainMetadata{"d": {Domain: "d", Configuration: `{"x":1}`}}

	bare := newSnapshot()
	bare.Protocol = Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	bare.Metadata = Metadata{ID: "bare", Format: Format{Provider: "parquet"}, SchemaString: "{}"}
	return map[string]*Snapshot{"full": full, "bare": bare}
}

// TestFlatScratchReuse: the actions of a readers' load stay intact while
// later loads, on other goroutines, reuse the chunk and page buffers of
// the first (flatScratches): nothing the flat reader returns refers to
// them.
func TestFlatScratchReuse(t *testing.T) {
	data, _, _, err := EncodeCheckpoint(flatSnapshots()["full"], time.UnixMilli(2000))
	if err != nil {
		t.Fatal(err)
	}
	load := func() []Action {
		acts, err := parseCheckpoint(context.Background(), data, false)
		if err != nil {
			t.Error(err)
		}
		return acts
	}
	want := load()
	kept := make([][]Action, 8)
	var wg sync.WaitGroup
	for g := range kept {
		wg.Go(func() {
			kept[g] = load()
			for range 50 {
				if got := load(); !reflect.DeepEqual(got, want) {
					t.Error("a concurrent load differs from the first")
					return
				}
			}
		})
	}
	wg.Wait()
	for _, acts := range append(kept, want) {
		if !reflect.DeepEqual(acts, want) {
			t.Fatal("the actions of a load changed after later loads")
		}
	}
	if n := len(want); n < 8 {
		t.Fatalf("%d actions, want the checkpoint's 8", n)
	}
}

// TestFlatLeavesOddLayoutsToArrow: a checkpoint whose needed columns have
// types the flat reader does not decode (int64 protocol versions, binary
// paths) is read by pqarrow, with the same result as a pqarrow read.
func TestFlatLeavesOddLayoutsToArrow(t *testing.T) {
	f := func(name string, dt arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: dt, Nullable: true}
	}
	str, i64 := arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64
	for name, sc := range map[string]*arrow.Schema{
		"int64 versions": arrow.NewSchema([]arrow.Field{
			f("protocol", arrow.StructOf(f("minReaderVersion", i64), f("minWriterVersion", i64))),
			f("metaData", arrow.StructOf(f("id", str), f("schemaString", str))),
			f("add", arrow.StructOf(f("path", str), f("size", i64))),
		}, nil),
		"binary path": arrow.NewSchema([]arrow.Field{
			f("protocol", arrow.StructOf(f("minReaderVersion", arrow.PrimitiveTypes.Int32), f("minWriterVersion", arrow.PrimitiveTypes.Int32))),
			f("metaData", arrow.StructOf(f("id", str), f("schemaString", str))),
			f("add", arrow.StructOf(f("path", arrow.BinaryTypes.Binary), f("size", i64))),
		}, nil),
	} {
		rows := `[{"protocol":{"minReaderVersion":1,"minWriterVersion":2}},{"metaData":{"id":"x","schemaString":"{}"}},` +
			`{"add":{"path":"YQ==","size":3}}]`
		rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
		if err == nil {
			err = w.Write(rec)
		}
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		flat, arrow, err := flatAndArrow(t, buf.Bytes())
		if !errors.Is(err, errFlatUnfit) {
			t.Fatalf("%s: flat reader gives %v, %v; want it to leave the file to pqarrow", name, flat, err)
		}
		acts, err := parseCheckpoint(context.Background(), buf.Bytes(), false)
		if err != nil {
			t.Fatal(err)
		}
		sameActions(t, name, acts, arrow)
		if len(acts) < 2 {
			t.Errorf("%s: %d actions, want protocol and metaData at least", name, len(acts))
		}
	}
}
