package topic

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// fixtureDir holds a small "orders" topic table written by this release
// (schema of today): two relay commits of fixtureEvents, with txns.
const fixtureDir = "testdata/orders-v2"

// fixtureV1Dir holds the same table as the release before the source
// column wrote it.
const fixtureV1Dir = "testdata/orders-v1"

func fixtureEvents() []outbox.Event { return testEvents(30, 3, 0x2000) }

// TestWriteFixture writes the fixture's table with today's code into a
// temporary directory and checks it has the committed fixture's shape (the
// same schema is written until a release changes it). With
// DELTABUS_WRITE_FIXTURES=1 it rewrites testdata/orders-v1 instead: only
// when the schema fixture must change.
func TestWriteFixture(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "orders")
	if os.Getenv("DELTABUS_WRITE_FIXTURES") == "1" {
		if err := os.RemoveAll(fixtureDir); err != nil {
			t.Fatal(err)
		}
		dir = fixtureDir
	}
	root, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	evs := fixtureEvents()
	md, proto := NewTableMetadata("orders")
	if err := delta.CreateTable(t.Context(), root, md, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(t.Context(), root, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]outbox.Event{evs[:18], evs[18:]} {
		if err := relayCommit(t, root, tbl, FileOptions{}, batch); err != nil {
			t.Fatal(err)
		}
	}
	written, err := delta.LoadSnapshot(t.Context(), root, -1)
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := storage.NewLocal(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := delta.LoadSnapshot(t.Context(), fixture, -1)
	if err != nil {
		t.Fatal(err)
	}
	if written.Version != committed.Version || written.StatsRecords() != committed.StatsRecords() ||
		written.Metadata.SchemaString != committed.Metadata.SchemaString {
		t.Fatalf("today's writer gives version %d, %d rows, schema %s; the fixture has version %d, %d rows, schema %s",
			written.Version, written.StatsRecords(), written.Metadata.SchemaString,
			committed.Version, committed.StatsRecords(), committed.Metadata.SchemaString)
	}
}

// copyFixture copies the fixture table to a temporary root.
func copyFixture(t *testing.T) (storage.Store, *delta.Table) { return copyFixtureFrom(t, fixtureDir) }

func copyFixtureFrom(t *testing.T, from string) (storage.Store, *delta.Table) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "orders")
	if err := os.CopyFS(dir, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
	st, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(t.Context(), st, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, tbl
}

// nextSchema is a hypothetical next release's event schema: today's plus
// one nullable column.
var nextSchema = strings.TrimSuffix(SchemaString(false), "]}") + `,{"name":"trace_id","type":"string","nullable":true,"metadata":{}}]}`

// tailRows reads the table's change feed as the generic reader does:
// every column of the table's current schema, NULL where a file lacks it.
func tailRows(t *testing.T, st storage.Store) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	if err := delta.Tail(t.Context(), st, 0, -1, &buf); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestUpgradeFixtureToNextSchema: the committed table of today's schema is
// upgraded in place to a next release's schema (one nullable column
// appended, same id and partitioning), and both releases' readers read
// every row back; today's writer keeps appending to the upgraded table
// (a newer schema), while today's compaction refuses it.
func TestUpgradeFixtureToNextSchema(t *testing.T) {
	ctx := t.Context()
	st, tbl := copyFixture(t)
	evs := fixtureEvents()
	if up, err := CheckOrUpgrade(ctx, tbl, false); up || err != nil {
		t.Fatalf("fixture with today's schema: upgraded=%t %v", up, err)
	}
	before := tbl.Metadata()
	if up, err := checkOrUpgradeTo(ctx, tbl, nextSchema, false); !up || err != nil {
		t.Fatalf("upgrade to the next schema: upgraded=%t %v", up, err)
	}
	if up, err := checkOrUpgradeTo(ctx, tbl, nextSchema, false); up || err != nil {
		t.Fatalf("second upgrade: upgraded=%t %v", up, err)
	}
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		t.Fatal(err)
	}
	m := snap.Metadata
	if snap.Version != 3 || m.SchemaString != nextSchema || m.ID != before.ID || len(m.PartitionColumns) != 0 ||
		len(m.Configuration) != len(before.Configuration) || snap.CommitInfo.Operation() != "ADD COLUMNS" ||
		!strings.Contains(string(snap.CommitInfo.Raw["operationParameters"]), "trace_id") {
		t.Fatalf("after upgrade: v=%d metadata %+v commitInfo %s", snap.Version, m, snap.CommitInfo.Raw["operationParameters"])
	}
	got, _ := snapshotEvents(t, st) // today's reader
	checkSameEvents(t, got, evs)
	rows := tailRows(t, st) // the next release's reader: all its columns
	if len(rows) != len(evs) {
		t.Fatalf("%d rows through the generic reader", len(rows))
	}
	for i, r := range rows {
		if v, ok := r["trace_id"]; !ok || v != nil || r["event_id"] != evs[i].ID {
			t.Fatalf("row %d = %v", i, r)
		}
	}

	// Today's relay on the upgraded table: appends, leaving trace_id NULL.
	if up, err := CheckOrUpgrade(ctx, tbl, false); up || err != nil {
		t.Fatalf("today's release on a newer schema: upgraded=%t %v", up, err)
	}
	more := testEvents(6, 2, 0x9000)
	if err := relayCommit(t, st, tbl, FileOptions{}, more); err != nil {
		t.Fatal(err)
	}
	got, _ = snapshotEvents(t, st)
	checkSameEvents(t, got, append(evs, more...))
	if rows := tailRows(t, st); len(rows) != len(evs)+len(more) || rows[len(rows)-1]["trace_id"] != nil {
		t.Fatalf("rows after today's append: %d", len(rows))
	}
	if _, err := Compact(ctx, st, CompactOptions{}); !errors.Is(err, ErrForeignSchema) {
		t.Fatalf("compaction of a newer schema: %v (it would drop trace_id)", err)
	}
}

// TestUpgradeOlderSchema: a table of an older DeltaBus schema (here
// today's without commit_time and source) is upgraded to today's; its old
// files read NULL in the new columns with today's reader.
func TestUpgradeOlderSchema(t *testing.T) {
	ctx := t.Context()
	older := strings.Replace(SchemaString(false), `,{"name":"commit_time","type":"timestamp","nullable":true,"metadata":{}},{"name":"source","type":"string","nullable":true,"metadata":{}}`, "", 1)
	if older == SchemaString(false) {
		t.Fatal("test schema unchanged")
	}
	md, proto := NewTableMetadata("orders")
	md.SchemaString = older
	st := storage.Sub(newLocalStore(t), "orders")
	if err := delta.CreateTable(ctx, st, md, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := writeOldFile(t, st)
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: []delta.Add{old}}); err != nil {
		t.Fatal(err)
	}
	if up, err := CheckOrUpgrade(ctx, tbl, false); !up || err != nil {
		t.Fatalf("upgrade an older schema: upgraded=%t %v", up, err)
	}
	if tbl.Metadata().SchemaString != SchemaString(false) {
		t.Fatalf("schema after upgrade: %s", tbl.Metadata().SchemaString)
	}
	got := readAll(t, st, []delta.Add{old})
	if len(got) != 2 || got[1].ID != "old-1" || !got[1].CommitTime.IsZero() || got[1].Key != "" {
		t.Fatalf("old rows through today's reader: %+v", got)
	}
	if _, err := Compact(ctx, st, CompactOptions{MinFiles: 1}); err != nil {
		t.Fatalf("compaction after the upgrade: %v", err)
	}
}

// TestForeignSchemas: anything else is ErrForeignSchema, naming the first
// difference; event and dead-letter tables never turn into each other.
func TestForeignSchemas(t *testing.T) {
	for _, c := range []struct {
		table      string
		deadLetter bool
		why        string
	}{
		{strings.Replace(SchemaString(false), `"key","type":"string"`, `"key","type":"long"`, 1), false, `column 3 is "key" long`},
		{strings.Replace(SchemaString(false), `"event_id","type":"string","nullable":false`, `"event_id","type":"string","nullable":true`, 1), false, `column 1 is "event_id" string`},
		{strings.TrimSuffix(SchemaString(false), "]}") + `,{"name":"x","type":"string","nullable":false,"metadata":{}}]}`, false, "NOT NULL"},
		{SchemaString(true), false, "never share a path"},
		{SchemaString(false), true, "never share a path"},
		{`{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}`, false, `column 1 is "id" long`},
	} {
		rel, why := relateSchema(c.table, SchemaString(c.deadLetter), c.deadLetter)
		if rel != schemaForeign || !strings.Contains(why, c.why) {
			t.Errorf("relateSchema = %v %q, want foreign %q", rel, why, c.why)
		}
	}
	ctx := t.Context()
	st := storage.Sub(newLocalStore(t), "orders")
	md, proto := NewTableMetadata(outbox.DeadLetterTopic)
	if err := delta.CreateTable(ctx, st, md, proto, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if up, err := CheckOrUpgrade(ctx, tbl, false); up || !errors.Is(err, ErrForeignSchema) || tbl.Version() != 0 {
		t.Fatalf("dead-letter table opened as an event topic: upgraded=%t %v", up, err)
	}
}

// TestUpgradeFixtureWithoutSource: the table the release before the source
// column wrote is upgraded in place (source appended, nullable): its rows
// read with an empty Source, rows appended after name their source, and
// compaction keeps both as they are.
func TestUpgradeFixtureWithoutSource(t *testing.T) {
	ctx := t.Context()
	st, tbl := copyFixtureFrom(t, fixtureV1Dir)
	evs := fixtureEvents()
	if up, err := CheckOrUpgrade(ctx, tbl, false); !up || err != nil {
		t.Fatalf("upgrade of the v1 fixture: upgraded=%t %v", up, err)
	}
	if tbl.Metadata().SchemaString != SchemaString(false) {
		t.Fatalf("schema after upgrade: %s", tbl.Metadata().SchemaString)
	}
	more := testEvents(6, 2, 0x9000)
	if err := relayCommit(t, st, tbl, FileOptions{Source: "deltabus-1-s"}, more); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		got, _ := snapshotEvents(t, st)
		checkSameEvents(t, got, append(slices.Clone(evs), more...))
		for i, e := range got {
			if want := map[bool]string{true: "", false: "deltabus-1-s"}[i < len(evs)]; e.Source != want {
				t.Fatalf("%s: row %d source %q, want %q", when, i, e.Source, want)
			}
		}
	}
	check("after the append")
	if _, err := Compact(ctx, st, CompactOptions{MinFiles: 1}); err != nil {
		t.Fatalf("compaction after the upgrade: %v", err)
	}
	check("after compaction")
}
