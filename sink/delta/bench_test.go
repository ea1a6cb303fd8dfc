package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkCommit measures the latency of a one-add commit on the local
// filesystem (fsync on), reporting p50 and p99.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	store := newDirStore(b, "")
	tbl := newTestTable(b, store, 100)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(int64(i))}, Txn: &Txn{AppID: "bench", Version: int64(i + 1)}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkSnapshotLoad compares loading a 20-version table with a
// 20,000-version one that has checkpoints every 100 versions. Each commit
// carries one txn (constant-size state), so the difference is the table's
// age alone; with checkpoints the load reads one checkpoint and at most 99
// commits.
func BenchmarkSnapshotLoad(b *testing.B) {
	for _, versions := range []int64{20, 20000} {
		b.Run(fmt.Sprintf("versions=%d", versions), func(b *testing.B) {
			store := syntheticTable(b, versions, 100)
			ctx := context.Background()
			store.gets.Store(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap, err := LoadSnapshot(ctx, store, -1)
				if err != nil || snap.Version != versions {
					b.Fatalf("v=%v err=%v", snap, err)
				}
			}
			b.ReportMetric(float64(store.gets.Load())/float64(b.N), "gets/op")
		})
	}
}

// syntheticTable writes a table of the given number of versions directly
// (no fsync), each commit a txn update plus, every 100th, one add; with a
// checkpoint at every interval, like the writer makes.
func syntheticTable(b *testing.B, versions, interval int64) *dirStore {
	b.Helper()
	store := newDirStore(b, "")
	store.sync = false
	newTestTable(b, store, int(interval))
	ctx := context.Background()
	snap, err := LoadSnapshot(ctx, store, 0)
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(store.root, "_delta_log")
	for v := int64(1); v <= versions; v++ {
		ms := int64(1700000000000) + v
		acts := []Action{{CommitInfo: &CommitInfo{Timestamp: &ms}}, {Txn: &Txn{AppID: "bench", Version: v, LastUpdated: &ms}}}
		if v%100 == 0 {
			add := testAdd(v)
			add.DataChange = true
			acts = append(acts, Action{Add: &add})
		}
		data, err := EncodeCommit(acts)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.json", v)), data, 0o644); err != nil {
			b.Fatal(err)
		}
		snap.applyCommit(v, acts, time.Time{})
		if v%interval == 0 {
			if err := WriteCheckpoint(ctx, store, snap, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	}
	return store
}

// BenchmarkEncodeCheckpoint measures a checkpoint of a table of 30,000
// files as the relay writes them (a hot table after a minute at 2,000
// transactions a second), written from its leaves, beside the same
// checkpoint written with arrow-go's pqarrow (the writer it replaced,
// kept as the tests' oracle): CPU per checkpoint, bytes allocated and the
// file's size.
func BenchmarkEncodeCheckpoint(b *testing.B) {
	snap := relaySnapshot(30000)
	for name, encode := range map[string]func(*Snapshot, time.Time) ([]byte, int, int, error){
		"leaves": EncodeCheckpoint, "pqarrow": encodeCheckpointArrow,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			size := 0
			for b.Loop() {
				data, _, _, err := encode(snap, time.UnixMilli(2000))
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			b.ReportMetric(float64(size), "bytes/checkpoint")
		})
	}
}

// relaySnapshot is a table of n files as the relay's commits add them:
// no partition values, per-file statistics of an event table.
func relaySnapshot(n int) *Snapshot {
	s := flatSnapshots()["bare"]
	for i := range n {
		ts := time.UnixMilli(1796433035879 + int64(i)).UTC().Format("2006-01-02T15:04:05.000Z")
		vals := fmt.Sprintf(`{"topic":"orders","source":"deltabus-7715619370348996713-s1","schema_version":1,`+
			`"occurred_at":%q,"commit_lsn":%d,"seq":0,"xid":%d,"commit_time":%q}`, ts, 22493560+i*400, 755+i, ts)
		a := Add{Path: fmt.Sprintf("part-00000-%08x-1d9b-4e39-a22c-8f1043b36883.c000.snappy.parquet", i),
			PartitionValues: map[string]*string{}, Size: 1917, ModificationTime: 1796433035879 + int64(i),
			Stats: `{"numRecords":1,"minValues":` + vals + `,"maxValues":` + vals + `,"nullCount":{"event_id":0,"topic":0,` +
				`"key":0,"type":0,"schema_version":0,"payload":0,"headers":1,"occurred_at":0,"commit_lsn":0,"seq":0,` +
				`"xid":0,"commit_time":0,"source":0}}`}
		s.Files[a.Path] = a
	}
	return s
}
