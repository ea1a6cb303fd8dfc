package delta

import (
	"context"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// TestSetProperties: valid properties are committed as a metaData change a
// fresh reader sees; invalid ones are refused before anything is written;
// setting what is already set commits nothing; unsetting removes.
func TestSetProperties(t *testing.T) {
	bothStores(t, func(t *testing.T, store storage.Store) {
		ctx := context.Background()
		tbl := newTestTable(t, store, 100)
		for _, bad := range []map[string]string{
			{PropLogRetention: "30 days"},
			{PropLogRetention: "interval 10 minutes"},
			{PropDeletedFileRetention: "interval 1 fortnight"},
			{PropCheckpointInterval: "0"},
			{"delta.appendOnly": "yes"},
			{"delta.setTransactionRetentionDuration": "interval 7 days"},
			{"delta.columnMapping.mode": "name"},
			{"delta.enableDeletionVectors": "true"},
			{"bad key": "x"},
		} {
			if _, err := SetProperties(ctx, tbl, bad); err == nil {
				t.Errorf("SetProperties(%v) accepted", bad)
			}
		}
		if tbl.Version() != 0 {
			t.Fatalf("refused changes wrote version %d", tbl.Version())
		}
		props := map[string]string{PropLogRetention: "interval 7 days", PropDeletedFileRetention: "interval 2 days", "deltabus.owner": "payments"}
		v, err := SetProperties(ctx, tbl, props)
		if err != nil || v != 1 {
			t.Fatalf("SetProperties: v=%d %v", v, err)
		}
		if v, err := SetProperties(ctx, tbl, props); err != nil || v != 1 {
			t.Fatalf("repeated SetProperties: v=%d %v (want no new version)", v, err)
		}
		snap, err := LoadSnapshot(ctx, store, -1)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range props {
			if got := snap.Metadata.Configuration[k]; got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if snap.CommitInfo.Operation() != "SET TBLPROPERTIES" || snap.Metadata.Configuration["delta.appendOnly"] != "true" {
			t.Errorf("commit %s, config %v", snap.CommitInfo.Operation(), snap.Metadata.Configuration)
		}
		if got := Retention(snap.Metadata, PropDeletedFileRetention, DefaultDeletedFileRetention); got != 48*60*60*1e9 {
			t.Errorf("retention %v", got)
		}
		if v, err := UnsetProperties(ctx, tbl, "deltabus.owner", PropLogRetention); err != nil || v != 2 {
			t.Fatalf("UnsetProperties: v=%d %v", v, err)
		}
		if _, ok := tbl.Metadata().Configuration[PropLogRetention]; ok {
			t.Errorf("unset left %v", tbl.Metadata().Configuration)
		}
	})
}

// TestConcurrentPropertyChangesBothLand: a handle that loses the race to
// another metaData change re-applies its change on the winner's metaData,
// so neither change is lost; appends in between never conflict.
func TestConcurrentPropertyChangesBothLand(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	a := newTestTable(t, store, 100)
	b, err := OpenTable(ctx, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SetProperties(ctx, a, map[string]string{PropLogRetention: "interval 3 days"}); err != nil {
		t.Fatal(err)
	}
	if _, err := appendOne(ctx, a, 1); err != nil {
		t.Fatal(err)
	}
	v, err := SetProperties(ctx, b, map[string]string{PropDeletedFileRetention: "interval 3 days"})
	if err != nil || v != 3 {
		t.Fatalf("losing SetProperties: v=%d %v", v, err)
	}
	if _, err := appendOne(ctx, a, 2); err != nil {
		t.Fatalf("append after the other handle's change: %v", err)
	}
	snap, _ := LoadSnapshot(ctx, store, -1)
	c := snap.Metadata.Configuration
	if c[PropLogRetention] != "interval 3 days" || c[PropDeletedFileRetention] != "interval 3 days" || len(snap.Files) != 2 {
		t.Fatalf("config %v files %d", c, len(snap.Files))
	}
}

// TestUpdateMetadataSchemaRules: appending a nullable column is accepted;
// a non-nullable one, an altered or dropped column, a new id or partition
// columns are refused.
func TestUpdateMetadataSchemaRules(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 100)
	extra := func(col string) func(m *Metadata) error {
		return func(m *Metadata) error {
			m.SchemaString = strings.Replace(m.SchemaString, `]}`, ","+col+`]}`, 1)
			return nil
		}
	}
	for name, update := range map[string]func(m *Metadata) error{
		"not nullable": extra(`{"name":"x","type":"string","nullable":false,"metadata":{}}`),
		"duplicate":    extra(`{"name":"ID","type":"string","nullable":true,"metadata":{}}`),
		"altered": func(m *Metadata) error {
			m.SchemaString = strings.Replace(m.SchemaString, `"long"`, `"integer"`, 1)
			return nil
		},
		"dropped":     func(m *Metadata) error { m.SchemaString = `{"type":"struct","fields":[]}`; return nil },
		"new id":      func(m *Metadata) error { m.ID = "x"; return nil },
		"partitioned": func(m *Metadata) error { m.PartitionColumns = []string{"topic"}; return nil },
	} {
		if _, err := tbl.UpdateMetadata(ctx, MetadataChange{Operation: "CHANGE", Update: update}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	v, err := tbl.UpdateMetadata(ctx, MetadataChange{Operation: "ADD COLUMNS",
		Update: extra(`{"name":"x","type":"string","nullable":true,"metadata":{}}`)})
	if err != nil || v != 1 {
		t.Fatalf("add nullable column: v=%d %v", v, err)
	}
	if _, err := appendOne(ctx, tbl, 1); err != nil {
		t.Fatalf("append after own schema change: %v", err)
	}
}
