package txlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/duckdbtest"
)

func TestAppendTopics(t *testing.T) {
	for _, counts := range [][]Count{{}, {{"orders", 2}}, {{"payments", 1}, {"orders", 3}, {"_dead_letter", 1}}, {{"odd\"key\\", 4}, {"é", 5}}} {
		want := map[string]int64{}
		for _, c := range counts {
			want[c.Topic] = c.N
		}
		s := AppendTopics(nil, counts)
		var back map[string]int64
		if err := json.Unmarshal(s, &back); err != nil {
			t.Fatalf("%v: %s is not JSON: %v", counts, s, err)
		}
		if len(back) != len(want) {
			t.Fatalf("%v: read back %v", counts, back)
		}
		for k, v := range want {
			if back[k] != v {
				t.Fatalf("%v: read back %v", counts, back)
			}
		}
	}
	if got := AppendTopics([]byte("x"), []Count{{"b", 1}, {"a", 2}}); string(got) != `x{"a":2,"b":1}` {
		t.Fatalf("keys not sorted, or the prefix lost: %s", got)
	}
}

// TestCommitReadsBack commits entries in two commits through the
// parquetpage encoding and reads them back, every column, with the
// table's reader (arrow-go), and checks each file's statistics bound its
// rows.
func TestCommitReadsBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	const src = "deltabus-7301234567890123456-deltabus"
	base := time.Date(2026, 12, 6, 11, 0, 0, 123456000, time.UTC)
	var ents []Entry
	for i := range 2500 {
		counts := []Count{{"orders", int64(1 + i%3)}}
		if i%7 == 0 {
			counts = append(counts, Count{"payments", 1}, Count{"_dead_letter", 2})
		}
		var n int64
		for _, c := range counts {
			n += c.N
		}
		ents = append(ents, Entry{Xid: int64(1000 + i), CommitLSN: int64(0x16000000 + 100*i), EndLSN: int64(0x16000000 + 100*i + 40),
			CommitTime: base.Add(time.Duration(i) * 997 * time.Microsecond).UnixMicro(), Events: n, Topics: string(AppendTopics(nil, counts))})
	}
	w := NewWriter(root, src)
	if err := w.Commit(ctx, ents[:1000]); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, ents[1000:]); err != nil {
		t.Fatal(err)
	}
	if pos, err := NewWriter(root, src).Position(ctx); err != nil || pos != ents[len(ents)-1].CommitLSN {
		t.Fatalf("position %d, %v; want %d", pos, err, ents[len(ents)-1].CommitLSN)
	}
	if err := w.Commit(ctx, ents[10:11]); !errors.Is(err, ErrFenced) {
		t.Fatalf("a commit below the position: %v, want ErrFenced", err)
	}
	recs, err := Read(ctx, root, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(ents) {
		t.Fatalf("read %d records, want %d", len(recs), len(ents))
	}
	for i, r := range recs {
		e := ents[i]
		var topics map[string]int64
		if err := json.Unmarshal([]byte(e.Topics), &topics); err != nil {
			t.Fatal(err)
		}
		if r.Source != src || r.Xid != e.Xid || r.CommitLSN != e.CommitLSN || r.EndLSN != e.EndLSN || r.Events != e.Events ||
			!r.CommitTime.Equal(time.UnixMicro(e.CommitTime)) || fmt.Sprint(r.Topics) != fmt.Sprint(topics) {
			t.Fatalf("record %d read back as %+v, written %+v", i, r, e)
		}
	}
	// A reader of a later range skips the first file by its statistics.
	recs, err = Read(ctx, root, Filter{After: ents[999].CommitLSN, Topics: []string{"payments"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.CommitLSN <= ents[999].CommitLSN || r.Topics["payments"] == 0 {
			t.Fatalf("filtered read returned %+v", r)
		}
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(root, Table), -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range snap.Files {
		if !strings.Contains(f.Stats, `"source":"`+src+`"`) || !strings.Contains(f.Stats, `"numRecords":`) {
			t.Fatalf("file %s: stats %s", f.Path, f.Stats)
		}
	}
	duckCheck(t, filepath.Join(dir, Table), len(ents))
}

// duckCheck reads the table's files with DuckDB, a Parquet reader other
// than the relay's (arrow-go): the same rows, one source, its timestamps
// and JSON readable.
func duckCheck(t *testing.T, dir string, rows int) {
	pkg := duckdbtest.Dir(t)
	script := `const d = require(process.argv[1]);
(async () => {
  const inst = await d.DuckDBInstance.create(':memory:', {autoinstall_known_extensions: 'false', autoload_known_extensions: 'false'});
  const c = await inst.connect();
  const r = await c.runAndReadAll("SELECT count(*), count(DISTINCT source), min(commit_time) < max(commit_time), sum(events) > 0, " +
    "bool_and(starts_with(topics, '{')) FROM read_parquet('" + process.argv[2] + "/*.parquet')");
  console.log(r.getRows()[0].map(String).join(","));
})();`
	out, err := exec.Command("node", "-e", script, filepath.Join(pkg, "node_modules/@duckdb/node-api"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("duckdb: %v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("%d,1,true,true,true", rows); got != want {
		t.Fatalf("duckdb read %s, want %s", got, want)
	}
}
