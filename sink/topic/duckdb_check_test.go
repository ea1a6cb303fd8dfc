package topic

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

var duckTypes = map[string]string{
	"event_id": "VARCHAR", "topic": "VARCHAR", "key": "VARCHAR", "type": "VARCHAR",
	"schema_version": "INTEGER", "payload": "VARCHAR", "headers": "VARCHAR",
	"occurred_at": "TIMESTAMP WITH TIME ZONE", "commit_lsn": "BIGINT", "seq": "INTEGER",
	"xid": "BIGINT", "commit_time": "TIMESTAMP WITH TIME ZONE",
	"dead_letter_reason": "VARCHAR", "source_table": "VARCHAR", "raw_row": "VARCHAR", "source": "VARCHAR",
}

// TestDuckDBReadsTopicTables writes two topic tables (events in four
// versions and six files, and dead letters) and has DuckDB read the log and
// the data files: rows, order, types, protocol, configuration and stats
// must be what a Delta reader expects.
func TestDuckDBReadsTopicTables(t *testing.T) {
	duckdbDir(t) // fail or skip before doing any work
	root := t.TempDir()
	local, err := storage.NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	orders := storage.Sub(local, "orders")
	evs := testEvents(3000, 9, 0x16B3748)
	createTable(t, orders, "orders")
	appendCommit(t, orders, 1, FileOptions{RowGroupRows: 500, MaxFileRows: 800}, evs[:2000])
	appendCommit(t, orders, 2, FileOptions{}, evs[2000:2300])
	appendCommit(t, orders, 3, FileOptions{MaxFileRows: 400}, evs[2300:])

	dlt := storage.Sub(local, outbox.DeadLetterTopic)
	createTable(t, dlt, outbox.DeadLetterTopic)
	dls := []outbox.DeadLetter{
		{Event: outbox.Event{ID: "x1", Topic: "bad/topic", CommitLSN: 77, Xid: 9, CommitTime: base},
			Reason: `invalid topic name "bad/topic"`, SourceTable: "public.outbox", RawRow: `{"id":"x1","topic":"bad/topic"}`},
		{Event: outbox.Event{ID: "x2", CommitLSN: 77, Seq: 1, Xid: 9, CommitTime: base, OccurredAt: base},
			Reason: "UPDATE of an outbox row", SourceTable: "public.outbox", RawRow: `{"id":"x2","payload":null}`},
	}
	w := NewFileWriter(dlt, FileOptions{DeadLetter: true})
	for i := range dls {
		if err := w.AppendDeadLetter(&dls[i]); err != nil {
			t.Fatal(err)
		}
	}
	adds, err := w.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	commitJSON(t, dlt, 1, []delta.Action{{Add: &adds[0]}})

	ordersDir, dlDir := filepath.Join(root, "orders"), filepath.Join(root, outbox.DeadLetterTopic)
	res := runDuckDB(t, ordersDir, dlDir)
	got := res[ordersDir]
	checkDuckLog(t, got, SchemaString(false))
	if len(got.Adds) != 6 || len(got.Txns) != 3 || got.Txns[2].TxnVersion != strconv.FormatInt(evs[2999].CommitLSN, 10) {
		t.Errorf("adds %d (want 6), txns %+v", len(got.Adds), got.Txns)
	}
	checkDuckFiles(t, got, ordersDir, numEventCols)
	if len(got.Rows) != len(evs) {
		t.Fatalf("DuckDB read %d rows, want %d", len(got.Rows), len(evs))
	}
	for i, r := range got.Rows {
		checkDuckRow(t, i, r, evs[i])
		if i > 0 && cmpPos(got.Rows[i-1], r) >= 0 {
			t.Fatalf("row %d is not after row %d in (commit_lsn, seq) order", i, i-1)
		}
	}

	if snap := got.Snapshot; snap.CheckpointVersion != -1 || len(snap.Files) != 6 || len(snap.Rows) != len(evs) || !snap.Ordered {
		t.Errorf("DuckDB's replay of the log: checkpoint %d, %d files, %d rows, ordered %t", snap.CheckpointVersion, len(snap.Files), len(snap.Rows), snap.Ordered)
	}

	dg := res[dlDir]
	checkDuckLog(t, dg, SchemaString(true))
	checkDuckFiles(t, dg, dlDir, numDeadLetterCols)
	if len(dg.Rows) != 2 {
		t.Fatalf("dead letters: %d rows", len(dg.Rows))
	}
	for i, r := range dg.Rows {
		checkDuckRow(t, i, r, dls[i].Event)
		if r["dead_letter_reason"] != dls[i].Reason || r["source_table"] != dls[i].SourceTable || r["raw_row"] != dls[i].RawRow {
			t.Errorf("dead letter %d: %v", i, r)
		}
	}
}

func checkDuckLog(t *testing.T, got duckTable, schemaString string) {
	t.Helper()
	if len(got.Protocol) != 1 || got.Protocol[0].MinReaderVersion != 1 || got.Protocol[0].MinWriterVersion != 7 ||
		!slices.Equal(got.Protocol[0].WriterFeatures, []string{"appendOnly", "changeDataFeed"}) || got.Protocol[0].ReaderFeatures != nil {
		t.Errorf("protocol as DuckDB reads it: %+v", got.Protocol)
	}
	want := TableConfiguration()
	if len(got.Configuration) != len(want) {
		t.Errorf("configuration %+v, want %v", got.Configuration, want)
	}
	for _, c := range got.Configuration {
		if c.Type != "VARCHAR" || want[c.Key] != c.Value {
			t.Errorf("configuration %s = %s (%s), want string %q", c.Key, c.Value, c.Type, want[c.Key])
		}
	}
	if len(got.Metadata) != 1 || got.Metadata[0].Provider != "parquet" || got.Metadata[0].PartitionColumnsType != "ARRAY" ||
		got.Metadata[0].PartitionColumns != 0 || len(got.Metadata[0].ID) != 36 {
		t.Errorf("metaData %+v", got.Metadata)
	}
	fields := parseSchema(t, schemaString)
	if len(got.Schema) != len(fields) {
		t.Fatalf("schema as DuckDB reads it: %+v", got.Schema)
	}
	for i, f := range fields {
		if g := got.Schema[i]; g.Name != f.Name || g.Type != f.Type || g.Nullable != f.Nullable {
			t.Errorf("schema field %d: DuckDB %+v, want %+v", i, g, f)
		}
	}
}

func checkDuckFiles(t *testing.T, got duckTable, dir string, ncols int) {
	t.Helper()
	if len(got.Files) != len(got.Adds) {
		t.Fatalf("%d files for %d adds", len(got.Files), len(got.Adds))
	}
	for i, a := range got.Adds {
		f := got.Files[i]
		fi, err := os.Stat(filepath.Join(dir, a.Path))
		if err != nil || strconv.FormatInt(fi.Size(), 10) != a.Size {
			t.Errorf("add %s size %s, file %v %v", a.Path, a.Size, fi, err)
		}
		if a.StatsType != "VARCHAR" || !a.StatsValid || !a.DataChange || a.PartitionValuesType != "OBJECT" {
			t.Errorf("add %s: stats type %s valid %t, dataChange %t, partitionValues %s", a.Path, a.StatsType, a.StatsValid, a.DataChange, a.PartitionValuesType)
		}
		if a.NumRecords != f.Rows || a.MinLSN != f.MinLSN || a.MaxLSN != f.MaxLSN || a.NullHeaders != f.NullHeaders {
			t.Errorf("add %s stats %+v disagree with the file %+v", a.Path, a, f)
		}
		checkTimeBounds(t, a.Path, a.MinOccurredAt, a.MaxOccurredAt, f.MinOccurredAt, f.MaxOccurredAt)
		if len(f.Columns) != ncols || !slices.Equal(f.Codecs, []string{"SNAPPY"}) {
			t.Errorf("file %s: %d columns, codecs %v", a.Path, len(f.Columns), f.Codecs)
		}
		list := tableColumns(ncols == numDeadLetterCols)
		for j, c := range f.Columns {
			if j >= len(list) || c.Name != list[j].name || c.Type != duckTypes[c.Name] {
				t.Errorf("file %s column %d: %s %s, want %s %s", a.Path, j, c.Name, c.Type, list[min(j, len(list)-1)].name, duckTypes[list[min(j, len(list)-1)].name])
			}
		}
		checkParquetSchema(t, a.Path, f.ParquetSchema)
	}
}

// checkParquetSchema: event_id is REQUIRED, every other column OPTIONAL,
// timestamps are INT64 TIMESTAMP(isAdjustedToUTC=true, MICROS).
func checkParquetSchema(t *testing.T, path string, cols []struct{ Name, Type, Repetition, Logical string }) {
	t.Helper()
	for _, p := range cols {
		wantRep := "OPTIONAL"
		if p.Name == "event_id" {
			wantRep = "REQUIRED"
		}
		if p.Repetition != wantRep {
			t.Errorf("file %s: parquet column %s is %s, want %s", path, p.Name, p.Repetition, wantRep)
		}
		if duckTypes[p.Name] == "TIMESTAMP WITH TIME ZONE" && (p.Type != "INT64" ||
			!strings.Contains(p.Logical, "isAdjustedToUTC=1") || !strings.Contains(p.Logical, "MICROS")) {
			t.Errorf("file %s: parquet column %+v, want INT64 TIMESTAMP(isAdjustedToUTC=true, MICROS)", path, p)
		}
	}
}

// checkTimeBounds: stats bounds (ms) must enclose the true microsecond
// bounds and be no looser than one millisecond.
func checkTimeBounds(t *testing.T, path, smin, smax, fmin, fmax string) {
	t.Helper()
	if smin == "" && fmin == "" {
		return
	}
	a, _ := strconv.ParseInt(smin, 10, 64)
	b, _ := strconv.ParseInt(smax, 10, 64)
	c, _ := strconv.ParseInt(fmin, 10, 64)
	d, _ := strconv.ParseInt(fmax, 10, 64)
	if a > c || c-a >= 1000 || b < d || b-d >= 1000 {
		t.Errorf("add %s occurred_at stats [%s, %s] do not tightly enclose the data [%s, %s]", path, smin, smax, fmin, fmax)
	}
}

func checkDuckRow(t *testing.T, i int, r map[string]any, e outbox.Event) {
	t.Helper()
	us := func(tm interface{ UnixMicro() int64 }) string { return strconv.FormatInt(tm.UnixMicro(), 10) }
	var occ any
	if !e.OccurredAt.IsZero() {
		occ = us(e.OccurredAt)
	}
	var headers any
	if e.Headers != nil {
		headers = *e.Headers
	}
	if r["event_id"] != e.ID || r["topic"] != e.Topic || r["key"] != e.Key || r["type"] != e.Type ||
		r["schema_version"] != float64(e.SchemaVersion) || r["payload"] != e.Payload || r["headers"] != headers ||
		r["occurred_at"] != occ || r["commit_lsn"] != strconv.FormatInt(e.CommitLSN, 10) || r["seq"] != float64(e.Seq) ||
		r["xid"] != strconv.FormatInt(e.Xid, 10) || r["commit_time"] != us(e.CommitTime) {
		t.Fatalf("DuckDB row %d = %v\nwant %+v", i, r, e)
	}
}

// cmpPos compares two DuckDB rows by (commit_lsn, seq).
func cmpPos(a, b map[string]any) int {
	la, _ := strconv.ParseInt(a["commit_lsn"].(string), 10, 64)
	lb, _ := strconv.ParseInt(b["commit_lsn"].(string), 10, 64)
	if c := cmp.Compare(la, lb); c != 0 {
		return c
	}
	return cmp.Compare(a["seq"].(float64), b["seq"].(float64))
}
