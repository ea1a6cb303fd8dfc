package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/google/uuid"

	"github.com/deltabus/deltabus/storage"
)

const testSchema = `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},` +
	`{"name":"topic","type":"string","nullable":true,"metadata":{}}]}`

// topicProtocol is the protocol our topic tables use.
var topicProtocol = Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "changeDataFeed"}}

func newTestTable(t testing.TB, store storage.Store, interval int) *Table {
	t.Helper()
	ctx := context.Background()
	meta := Metadata{SchemaString: testSchema, Configuration: map[string]string{
		"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true",
		"delta.checkpointInterval": fmt.Sprint(interval)}}
	if err := CreateTable(ctx, store, meta, topicProtocol, nil); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	tbl, err := OpenTable(ctx, store, Options{})
	if err != nil {
		t.Fatalf("OpenTable: %v", err)
	}
	return tbl
}

func testAdd(n int64) Add {
	return Add{Path: fmt.Sprintf("part-%05d-%s.c000.zstd.parquet", n, uuid.NewString()), Size: 100 + n,
		ModificationTime: 1700000000000 + n, Stats: fmt.Sprintf(`{"numRecords":%d}`, n%7+1)}
}

// TestRoundTripCheckpoints commits 300 batches with txns at interval 100 and
// requires checkpoints at 100, 200, 300, a snapshot loaded from the
// checkpoint equal to a JSON-only replay, and bounded reads per load.
func TestRoundTripCheckpoints(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	store.sync = false
	tbl := newTestTable(t, store, 100)
	for i := int64(1); i <= 300; i++ {
		ca := CommitActions{Adds: []Add{testAdd(i)}, Txn: &Txn{AppID: fmt.Sprintf("app-%d", i%3), Version: i}}
		v, err := tbl.Commit(ctx, ca)
		if err != nil || v != i {
			t.Fatalf("commit %d: v=%d err=%v", i, v, err)
		}
	}
	for _, v := range []int64{100, 200, 300} {
		if _, err := store.Get(ctx, CheckpointKey(v)); err != nil {
			t.Errorf("checkpoint %d: %v", v, err)
		}
	}
	if _, err := store.Get(ctx, CheckpointKey(150)); err == nil {
		t.Errorf("unexpected checkpoint at 150")
	}
	lc := readLastCheckpoint(ctx, store)
	if lc == nil || lc.Version != 300 {
		t.Fatalf("_last_checkpoint = %+v, want version 300", lc)
	}
	// 300 commits then 5 more: the load must read the checkpoint + 5 commits.
	for i := int64(301); i <= 305; i++ {
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(i)}, Txn: &Txn{AppID: "app-0", Version: i}}); err != nil {
			t.Fatal(err)
		}
	}
	store.gets.Store(0)
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		t.Fatal(err)
	}
	if got := store.gets.Load(); got != 1+1+5 { // _last_checkpoint, checkpoint, 5 commits
		t.Errorf("load made %d Gets, want 7", got)
	}
	if snap.CheckpointVersion != 300 || snap.Version != 305 || len(snap.Files) != 305 {
		t.Fatalf("snapshot cp=%d v=%d files=%d", snap.CheckpointVersion, snap.Version, len(snap.Files))
	}
	if snap.Txns["app-0"].Version != 305 || snap.Txns["app-1"].Version != 298 || snap.Txns["app-2"].Version != 299 {
		t.Errorf("txns = %+v", snap.Txns)
	}
	if snap.Txns["app-0"].LastUpdated == nil {
		t.Errorf("txn without lastUpdated")
	}
	l, _ := listLog(ctx, store, 0)
	l.Checkpoints = nil
	jsonOnly, err := replayFrom(ctx, store, l, 305, tbl.opts.Logger, true)
	if err != nil {
		t.Fatal(err)
	}
	compareSnapshots(t, snap, jsonOnly)
	// The in-memory state of the writer equals a fresh load too.
	compareSnapshots(t, tbl.snap, snap)
	for _, v := range []int64{100, 200} { // older checkpoints give the same state at their version
		a, err := LoadSnapshot(ctx, store, v)
		if err != nil || a.CheckpointVersion != v {
			t.Fatalf("load %d: cp=%v err=%v", v, a, err)
		}
		b, _ := replayFrom(ctx, store, l, v, tbl.opts.Logger, true)
		compareSnapshots(t, a, b)
	}
}

// TestCheckpointLayout checks the physical layout delta-spark expects.
func TestCheckpointLayout(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 2)
	for i := int64(1); i <= 2; i++ {
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(i)}, Txn: &Txn{AppID: "a", Version: i}}); err != nil {
			t.Fatal(err)
		}
	}
	data, err := store.Get(ctx, CheckpointKey(2))
	if err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	printSchema(&buf, pf)
	s := buf.String()
	for _, want := range []string{"key_value", "partitionValues", "element", "schemaString", "minReaderVersion", "appId", "domainMetadata"} {
		if !strings.Contains(s, want) {
			t.Errorf("checkpoint schema lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "commitInfo") || strings.Contains(s, "cdc") || strings.Contains(s, "entries") {
		t.Errorf("checkpoint schema has commitInfo/cdc/entries:\n%s", s)
	}
	acts, err := ParseCheckpoint(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	var adds, txns, protos, metas int
	for _, a := range acts {
		switch {
		case a.Add != nil:
			adds++
			if a.Add.DataChange {
				t.Errorf("checkpoint add with dataChange=true")
			}
		case a.Txn != nil:
			txns++
		case a.Protocol != nil:
			protos++
		case a.Metadata != nil:
			metas++
		}
	}
	if adds != 2 || txns != 1 || protos != 1 || metas != 1 {
		t.Errorf("checkpoint rows: adds=%d txns=%d protocol=%d metaData=%d", adds, txns, protos, metas)
	}
}

// TestCommitIdempotent: a batch whose txn is reached is refused unwritten.
func TestCommitIdempotent(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 100)
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(1)}, Txn: &Txn{AppID: "a", Version: 10}}); err != nil {
		t.Fatal(err)
	}
	_, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(2)}, Txn: &Txn{AppID: "a", Version: 10}})
	if !errors.Is(err, ErrAlreadyCommitted) {
		t.Fatalf("err = %v, want ErrAlreadyCommitted", err)
	}
	// A zombie (second handle, stale state) loses the race and learns it.
	zombie, err := OpenTable(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(3)}, Txn: &Txn{AppID: "a", Version: 11}}); err != nil {
		t.Fatal(err)
	}
	_, err = zombie.Commit(ctx, CommitActions{Adds: []Add{testAdd(4)}, Txn: &Txn{AppID: "a", Version: 11}})
	if !errors.Is(err, ErrAlreadyCommitted) {
		t.Fatalf("zombie err = %v, want ErrAlreadyCommitted", err)
	}
	// A concurrent instance behind us (lower batch) is a concurrent writer.
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(5)}, Txn: &Txn{AppID: "a", Version: 20}}); err != nil {
		t.Fatal(err)
	}
	other, _ := OpenTable(ctx, store, Options{})
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(6)}, Txn: &Txn{AppID: "a", Version: 21}}); err != nil {
		t.Fatal(err)
	}
	_, err = other.Commit(ctx, CommitActions{Adds: []Add{testAdd(7)}, Txn: &Txn{AppID: "a", Version: 25}})
	if !errors.Is(err, ErrConcurrentWriter) {
		t.Fatalf("err = %v, want ErrConcurrentWriter", err)
	}
	snap, _ := LoadSnapshot(ctx, store, -1)
	if len(snap.Files) != 4 || snap.Txns["a"].Version != 21 {
		t.Fatalf("files=%d txn=%d, want 4 files and txn 21", len(snap.Files), snap.Txns["a"].Version)
	}
}

// TestLastCheckpointNeverMovesBack: two writers' checkpoints finishing out
// of order leave _last_checkpoint at the newer one.
func TestLastCheckpointNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 1000)
	appendRange(t, tbl, 1, 12)
	snapAt := func(v int64) *Snapshot {
		s, err := LoadSnapshot(ctx, store, v)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hint := func() int64 {
		lc := readLastCheckpoint(ctx, store)
		if lc == nil {
			t.Fatal("no _last_checkpoint")
		}
		return lc.Version
	}
	if err := WriteCheckpoint(ctx, store, snapAt(10), time.Now()); err != nil {
		t.Fatal(err)
	}
	// The slower writer's checkpoint of version 5 finishes after.
	if err := WriteCheckpoint(ctx, store, snapAt(5), time.Now()); err != nil {
		t.Fatal(err)
	}
	if v := hint(); v != 10 {
		t.Fatalf("_last_checkpoint at %d after an older checkpoint finished late, want 10", v)
	}
	// Both read the hint before either wrote it: the one at 7 overwrites
	// the hint of 10 and must point it back at 10.
	if err := store.Put(ctx, LastCheckpointKey, []byte(`{"version":5,"size":7}`)); err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpoint(ctx, store, snapAt(7), time.Now()); err != nil {
		t.Fatal(err)
	}
	if v := hint(); v != 10 {
		t.Fatalf("_last_checkpoint at %d, want the newest checkpoint 10", v)
	}
	if s, err := LoadSnapshot(ctx, store, -1); err != nil || s.Version != 12 {
		t.Fatalf("snapshot after: %v %v", s, err)
	}
}
