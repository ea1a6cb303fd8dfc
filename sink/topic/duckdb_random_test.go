package topic

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// TestDuckDBReadsRandomRows has DuckDB read random events and dead letters
// (NULLs, empty strings, strings past a page's size, repeated and unique
// values) written with small, large and many row groups per file, value by
// value, with the files' stats checked against the adds.
func TestDuckDBReadsRandomRows(t *testing.T) {
	duckdbDir(t)
	root := t.TempDir()
	local, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 16))
	dls := randomDeadLetters(r, 400, 1_100_000, false)
	evs := make([]outbox.Event, len(dls))
	for i := range dls {
		evs[i] = dls[i].Event
	}
	orders := storage.Sub(local, "orders")
	createTable(t, orders, "orders")
	appendCommit(t, orders, 1, FileOptions{RowGroupRows: 3, MaxFileRows: 50}, evs[:200])
	appendCommit(t, orders, 2, FileOptions{RowGroupRows: 100}, evs[200:])

	dlt := storage.Sub(local, outbox.DeadLetterTopic)
	createTable(t, dlt, outbox.DeadLetterTopic)
	var acts []delta.Action
	for _, opts := range []FileOptions{{DeadLetter: true, RowGroupRows: 17}, {DeadLetter: true}} {
		adds := checkDeadLetters(t, dlt, opts, dls[:150])
		for i := range adds {
			acts = append(acts, delta.Action{Add: &adds[i]})
		}
	}
	commitJSON(t, dlt, 1, acts)

	ordersDir, dlDir := filepath.Join(root, "orders"), filepath.Join(root, outbox.DeadLetterTopic)
	res := runDuckDB(t, ordersDir, dlDir)
	got := res[ordersDir]
	checkDuckFiles(t, got, ordersDir, numEventCols)
	if len(got.Rows) != len(evs) {
		t.Fatalf("DuckDB read %d rows, want %d", len(got.Rows), len(evs))
	}
	for i, row := range got.Rows {
		checkDuckRow(t, i, row, evs[i])
	}
	dg := res[dlDir]
	checkDuckFiles(t, dg, dlDir, numDeadLetterCols)
	if len(dg.Rows) != 300 {
		t.Fatalf("dead letters: %d rows", len(dg.Rows))
	}
	for i, row := range dg.Rows {
		d := dls[i%150]
		checkDuckRow(t, i, row, d.Event)
		if row["dead_letter_reason"] != d.Reason || row["source_table"] != d.SourceTable || row["raw_row"] != d.RawRow {
			t.Fatalf("dead letter %d: %v", i, row)
		}
	}
}
