package delta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// topicStats are statistics as a topic file of source src carries them.
func topicStats(src string, i int) string {
	return fmt.Sprintf(`{"numRecords":%d,"minValues":{"topic":"payments.eu","source":"%s","schema_version":1,`+
		`"occurred_at":"2026-12-05T11:%02d:%02d.%03dZ","commit_lsn":%d,"seq":0,"xid":%d,"commit_time":"2026-12-05T11:%02d:%02d.%03dZ"},`+
		`"maxValues":{"topic":"payments.eu","source":"%s","schema_version":2,"occurred_at":"2026-12-05T11:%02d:%02d.%03dZ",`+
		`"commit_lsn":%d,"seq":%d,"xid":%d,"commit_time":"2026-12-05T11:%02d:%02d.%03dZ"},"nullCount":{"event_id":0,"topic":0,`+
		`"key":0,"type":0,"schema_version":0,"payload":0,"headers":%d,"occurred_at":0,"commit_lsn":0,"seq":0,"xid":0,"commit_time":0,"source":0}}`,
		1+i%7, src, i%60, (i*7)%60, i%1000, 30732960+i*913, 741+i*3, i%60, (i*7)%60, (i+3)%1000,
		src, i%60, (i*7+1)%60, (i+5)%1000, 30732960+i*913+400, i%3, 741+i*3+2, i%60, (i*7+1)%60, (i+9)%1000, 1+i%7)
}

func TestPackStatsRoundTrip(t *testing.T) {
	long := topicStats("deltabus-7715779080795741758-orders", 42)
	rnd := rand.New(rand.NewPCG(1, 2))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return string(b)
	}
	cases := map[string]string{
		"empty":         "",
		"short":         `{"numRecords":3}`,
		"topic":         long,
		"marked short":  "\x00{}",
		"marked long":   "\x00" + long,
		"only the mark": "\x00",
		"random":        random(700),
		"marked random": "\x00" + random(300),
		"unicode":       strings.Repeat(`{"minValues":{"k":"ü€😀"}}`, 10),
		"wide table":    `{"numRecords":1,"minValues":{"a":"` + strings.Repeat("xyz", 100_000) + `"}}`,
		"marked wide":   "\x00" + random(200_000),
	}
	for name, in := range cases {
		p := packStats(in)
		if got := unpackStats(p); got != in {
			t.Errorf("%s: round trip changed the statistics: got %q", name, got)
		}
		if strings.HasPrefix(in, packedMark) && !strings.HasPrefix(p, packedMark) {
			t.Errorf("%s: a marked plain string was kept unpacked, so it would read as packed", name)
		}
		if len(p) > len(in) && !strings.HasPrefix(in, packedMark) {
			t.Errorf("%s: packing grew it from %d to %d bytes", name, len(in), len(p))
		}
	}
	if p := packStats(long); len(p)*4 > len(long) {
		t.Errorf("a topic file's %d bytes of statistics packed to %d, want at most a quarter", len(long), len(p))
	}
}

// TestTableKeepsStatsPacked: a Table holds its active files' statistics
// packed, and everything read from it (Files, StatsRecords, checkpoints,
// a reopened handle) sees them exactly as committed, a hostile writer's
// marked statistics included.
func TestTableKeepsStatsPacked(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	store.sync = false
	tbl := newTestTable(t, store, 10)
	want := map[string]string{}
	var records int64
	for i := 1; i <= 24; i++ {
		a := Add{Path: fmt.Sprintf("part-%05d-%s.c000.zstd.parquet", i, uuid.NewString()), Size: 100, ModificationTime: 1700000000000,
			Stats: topicStats("deltabus-7715779080795741758-orders", i)}
		records += int64(1 + i%7)
		want[a.Path] = a.Stats
		if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{a}}); err != nil {
			t.Fatal(err)
		}
	}
	// Another writer commits a file whose statistics carry the mark.
	other, err := OpenTable(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hostile := Add{Path: "part-hostile.parquet", Size: 1, ModificationTime: 1, Stats: "\x00" + topicStats("x", 1)}
	if _, err := other.Commit(ctx, CommitActions{Adds: []Add{hostile}}); err != nil {
		t.Fatal(err)
	}
	want[hostile.Path] = hostile.Stats
	last := Add{Path: "part-last.parquet", Size: 1, ModificationTime: 1, Stats: topicStats("y", 2)}
	records += 3
	want[last.Path] = last.Stats
	if _, err := tbl.Commit(ctx, CommitActions{Adds: []Add{last}}); err != nil { // catches up on the hostile commit
		t.Fatal(err)
	}
	tbl.Wait()
	for k, a := range tbl.snap.Files {
		if !strings.HasPrefix(a.Stats, packedMark) || len(a.Stats) >= len(want[a.Path]) {
			t.Errorf("state of %s holds %d bytes of statistics unpacked", k, len(a.Stats))
		}
	}
	checkStats := func(what string, files []Add) {
		t.Helper()
		if len(files) != len(want) {
			t.Fatalf("%s: %d files, want %d", what, len(files), len(want))
		}
		for _, a := range files {
			if a.Stats != want[a.Path] {
				t.Errorf("%s: %s has statistics %q, want %q", what, a.Path, a.Stats, want[a.Path])
			}
		}
	}
	checkStats("Files", tbl.Files())
	if got := tbl.snap.StatsRecords(); got != records {
		t.Errorf("StatsRecords = %d, want %d", got, records)
	}
	// A checkpoint of the packed state holds the statistics in clear.
	if err := WriteCheckpoint(ctx, store, tbl.snap.clone(), tbl.opts.Now()); err != nil {
		t.Fatal(err)
	}
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.CheckpointVersion != snap.Version {
		t.Fatalf("loaded from checkpoint %d, want %d", snap.CheckpointVersion, snap.Version)
	}
	var loaded []Add
	for _, a := range snap.Files {
		loaded = append(loaded, a)
	}
	checkStats("checkpoint", loaded)
	// A handle opened on it packs what it loads.
	again, err := OpenTable(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkStats("reopened Files", again.Files())
	if a := again.snap.Files[last.Path]; !strings.HasPrefix(a.Stats, packedMark) {
		t.Errorf("a reopened handle keeps loaded statistics unpacked")
	}
}

// BenchmarkTableStateBytesPerFile reports the heap a Table's state holds
// per active topic file, with its statistics packed and, in the same run,
// kept as plain JSON.
func BenchmarkTableStateBytesPerFile(b *testing.B) {
	const files = 20000
	unpackStats(packStats(topicStats("warm", 1))) // the codec is made once per process
	for _, packed := range []bool{true, false} {
		b.Run(map[bool]string{true: "packed", false: "plain"}[packed], func(b *testing.B) {
			for range b.N {
				store := newDirStore(b, "")
				store.sync = false
				tbl := newTestTable(b, store, 1<<30)
				tbl.snap.packedStats = packed
				before := liveHeap()
				snap := tbl.snap
				for i := range files {
					a := Add{Path: fmt.Sprintf("part-%05d-%s.c000.zstd.parquet", i, uuid.NewString()), Size: 2000,
						ModificationTime: 1700000000000, Stats: topicStats("deltabus-7715779080795741758-orders", i)}
					tbl.applyCommit(int64(i+1), []Action{{Add: &a}}, tbl.opts.Now())
				}
				b.ReportMetric(float64(liveHeap()-before)/files, "B/file")
				runtime.KeepAlive(snap)
			}
		})
	}
}

func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// FuzzPackStats: any string, statistics or not, marked or not, comes back
// from its packed form unchanged.
func FuzzPackStats(f *testing.F) {
	f.Add(topicStats("deltabus-7715779080795741758-orders", 7))
	f.Add("\x00" + topicStats("x", 1))
	f.Add("\x00")
	f.Add(`{"numRecords":3}`)
	f.Fuzz(func(t *testing.T, in string) {
		if got := unpackStats(packStats(in)); got != in {
			t.Fatalf("round trip of %q gave %q", in, got)
		}
	})
}
