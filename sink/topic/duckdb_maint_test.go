package topic

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// TestDuckDBReadsMaintainedTable: a topic table that was compacted, whose
// log was cleaned up and whose unreferenced files were vacuumed, is read by
// DuckDB through its checkpoint and the commits after it: the same files
// as ours, every row once, in commit order, the relay's txn intact; and a
// compacted dead-letter table keeps its columns.
func TestDuckDBReadsMaintainedTable(t *testing.T) {
	duckdbDir(t)
	ctx := t.Context()
	dir := t.TempDir()
	local, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, tbl := openTopic(t, local, "orders")
	if _, err := delta.SetProperties(ctx, tbl, map[string]string{delta.PropCheckpointInterval: "10"}); err != nil {
		t.Fatal(err)
	}
	evs := testEvents(53*40, 9, 0x16B3748)
	for b := range 45 {
		if err := relayCommit(t, st, tbl, FileOptions{MaxFileRows: 15}, evs[b*40:(b+1)*40]); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := Compact(ctx, st, CompactOptions{TargetFileBytes: 48 << 10, RowGroupRows: 300}); err != nil || res.FilesAdded < 2 {
		t.Fatalf("compact: %+v %v", res, err)
	}
	for b := 45; b < 53; b++ {
		if err := relayCommit(t, st, tbl, FileOptions{}, evs[b*40:(b+1)*40]); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Hour)
	cleaned, err := delta.CleanupLog(ctx, st, delta.CleanupOptions{Now: later, Retention: time.Hour})
	if err != nil || cleaned.Checkpoint != 50 || len(cleaned.Deleted) < 50 {
		t.Fatalf("cleanup: checkpoint %d, %d deleted, %v", cleaned.Checkpoint, len(cleaned.Deleted), err)
	}
	vac, err := delta.Vacuum(ctx, st, delta.VacuumOptions{Now: later, Retention: time.Hour})
	if err != nil || len(vac.Deleted) != 135 {
		t.Fatalf("vacuum: %d deleted, %v", len(vac.Deleted), err)
	}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}

	dlt := storage.Sub(local, outbox.DeadLetterTopic)
	dls := compactedDeadLetters(t, dlt)

	ordersDir, dlDir := filepath.Join(dir, "orders"), filepath.Join(dir, outbox.DeadLetterTopic)
	res := runDuckDB(t, ordersDir, dlDir)
	got := res[ordersDir].Snapshot
	var paths, want []string
	for _, f := range got.Files {
		paths = append(paths, f.Path)
	}
	for _, a := range snap.Files {
		want = append(want, a.Path)
	}
	slices.Sort(paths)
	slices.Sort(want)
	if got.CheckpointVersion != 50 || !slices.Equal(got.Commits, []int64{51, 52, 53, 54, 55}) || !slices.Equal(paths, want) {
		t.Fatalf("DuckDB's snapshot: checkpoint %d commits %v\nfiles %v\nwant  %v", got.CheckpointVersion, got.Commits, paths, want)
	}
	if !got.Ordered || len(got.Rows) != len(evs) {
		t.Fatalf("DuckDB read %d rows (want %d), files in order: %t", len(got.Rows), len(evs), got.Ordered)
	}
	for i, r := range got.Rows {
		checkDuckRow(t, i, r, evs[i])
	}
	if got.Txns[relayApp] != strconv.FormatInt(evs[len(evs)-1].CommitLSN, 10) || got.SchemaString != SchemaString(false) ||
		got.Configuration["delta.checkpointInterval"] != "10" || got.Protocol.MinWriterVersion != 7 {
		t.Fatalf("DuckDB's snapshot: txns %v protocol %+v config %v", got.Txns, got.Protocol, got.Configuration)
	}

	dg := res[dlDir].Snapshot
	if len(dg.Files) != 1 || len(dg.Rows) != len(dls) || !dg.Ordered {
		t.Fatalf("dead letters as DuckDB reads them: %d files, %d rows", len(dg.Files), len(dg.Rows))
	}
	for i, r := range dg.Rows {
		checkDuckRow(t, i, r, dls[i].Event)
		if r["dead_letter_reason"] != dls[i].Reason || r["raw_row"] != dls[i].RawRow {
			t.Fatalf("dead letter %d: %v", i, r)
		}
	}
}

// compactedDeadLetters writes a dead-letter table of three commits and
// compacts it into one file.
func compactedDeadLetters(t *testing.T, dlt storage.Store) []outbox.DeadLetter {
	t.Helper()
	md, proto := NewTableMetadata(outbox.DeadLetterTopic)
	if err := delta.CreateTable(t.Context(), dlt, md, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(t.Context(), dlt, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var all []outbox.DeadLetter
	for b := range 3 {
		w := NewFileWriter(dlt, FileOptions{DeadLetter: true})
		for i, e := range testEvents(4, 2, int64(0x10000*(b+1))) {
			d := outbox.DeadLetter{Event: e, Reason: fmt.Sprint("bad ", b, i), SourceTable: "public.outbox", RawRow: `{"n":1}`}
			all = append(all, d)
			if err := w.AppendDeadLetter(&d); err != nil {
				t.Fatal(err)
			}
		}
		adds, err := w.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Commit(t.Context(), delta.CommitActions{Adds: adds}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := Compact(t.Context(), dlt, CompactOptions{}); err != nil || res.FilesAdded != 1 {
		t.Fatalf("compact dead letters: %+v %v", res, err)
	}
	return all
}

// TestDuckDBReadsCompactedGroupTable: a group table of small mixed files,
// compacted twice (split by topic, then the new mixed files split and each
// topic's files packed), then appended to by commits of one topic each,
// its log cleaned up and its files vacuumed, is read by DuckDB as we read
// it: the same files, each of whose stats (as DuckDB reads them from the
// checkpoint and the commits) name one topic, every row once in commit
// order, each topic's rows in its files alone, every topic's txn intact.
func TestDuckDBReadsCompactedGroupTable(t *testing.T) {
	duckdbDir(t)
	ctx := t.Context()
	dir := t.TempDir()
	local, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, tbl := openTopic(t, local, "_group.m")
	if _, err := delta.SetProperties(ctx, tbl, map[string]string{delta.PropCheckpointInterval: "10"}); err != nil {
		t.Fatal(err)
	}
	evs := groupEvents(40*40+600, 6, 0x16B3748, groupTopics)
	var want []outbox.Event
	txns := map[string]string{}
	commit := func(batch []outbox.Event) {
		t.Helper()
		if err := groupCommit(t, st, tbl, FileOptions{MaxFileRows: 15}, batch); err != nil {
			t.Fatal(err)
		}
		want = append(want, batch...)
		for name := range byTopic(batch) {
			txns[relayApp+"/"+name] = strconv.FormatInt(batch[len(batch)-1].CommitLSN, 10)
		}
	}
	opts := CompactOptions{SplitTopics: true, TargetFileBytes: 48 << 10, RowGroupRows: 300}
	for b := range 30 {
		commit(evs[b*40 : (b+1)*40])
	}
	if res, err := Compact(ctx, st, opts); err != nil || res.FilesAdded < len(groupTopics) {
		t.Fatalf("compact: %+v %v", res, err)
	}
	for b := 30; b < 40; b++ {
		commit(evs[b*40 : (b+1)*40])
	}
	res, err := Compact(ctx, st, opts)
	if err != nil || res.FilesRemoved == 0 {
		t.Fatalf("second compaction: %+v %v", res, err)
	}
	// Commits of one topic each, past the next checkpoint: the log's tail
	// adds only files that stay.
	past := res.Versions[len(res.Versions)-1]/10*10 + 13
	for i := 0; tbl.Version() < past; i++ {
		if batch := byTopic(evs[1600+i*10 : 1610+i*10])[groupTopics[i%len(groupTopics)]]; len(batch) > 0 {
			commit(batch)
		}
	}
	later := time.Now().Add(time.Hour)
	if _, err := delta.CleanupLog(ctx, st, delta.CleanupOptions{Now: later, Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := delta.Vacuum(ctx, st, delta.VacuumOptions{Now: later, Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	ours := checkOneTopicFiles(t, st, snap)

	groupDir := filepath.Join(dir, "_group.m")
	got := runDuckDB(t, groupDir)[groupDir].Snapshot
	var paths, files []string
	duckFiles := map[string]int{}
	for _, f := range got.Files {
		paths = append(paths, f.Path)
		name := fileTopic(t, delta.Add{Path: f.Path, Stats: f.Stats})
		if name == "" {
			t.Fatalf("DuckDB reads file %s with stats %s: not one topic", f.Path, f.Stats)
		}
		duckFiles[name]++
	}
	for _, a := range snap.Files {
		files = append(files, a.Path)
	}
	slices.Sort(paths)
	slices.Sort(files)
	if !slices.Equal(paths, files) || !maps.Equal(duckFiles, ours) || got.CheckpointVersion < 0 {
		t.Fatalf("DuckDB's snapshot: checkpoint %d, files %v (by topic %v)\nwant %v (by topic %v)", got.CheckpointVersion, paths, duckFiles, files, ours)
	}
	slices.SortStableFunc(want, func(a, b outbox.Event) int { return pos{a.CommitLSN, int64(a.Seq)}.cmp(pos{b.CommitLSN, int64(b.Seq)}) })
	if !got.Ordered || len(got.Rows) != len(want) {
		t.Fatalf("DuckDB read %d rows (want %d), files in order: %t", len(got.Rows), len(want), got.Ordered)
	}
	perTopic := map[string]int{}
	for i, r := range got.Rows {
		checkDuckRow(t, i, r, want[i])
		perTopic[r["topic"].(string)]++
	}
	for name, rows := range byTopic(want) {
		if perTopic[name] != len(rows) {
			t.Fatalf("DuckDB read %d rows of %s, want %d", perTopic[name], name, len(rows))
		}
	}
	if !maps.Equal(got.Txns, txns) {
		t.Fatalf("DuckDB's txns %v, want %v", got.Txns, txns)
	}
}
