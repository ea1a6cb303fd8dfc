package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// putRaw writes version v as the given JSON lines, as a foreign writer does.
func putRaw(t *testing.T, store storage.Store, v int64, lines ...string) {
	t.Helper()
	if err := store.PutIfAbsent(context.Background(), CommitKey(v), []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		t.Fatalf("foreign commit %d: %v", v, err)
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sparkSetProperties renders the commit delta-spark 3.x writes for
// ALTER TABLE t SET TBLPROPERTIES (...): commitInfo first (properties as a
// JSON-encoded string), then the whole new metaData.
func sparkSetProperties(t *testing.T, m Metadata, readVersion int64, props map[string]string) []string {
	m = cloneMetadata(m)
	maps.Copy(m.Configuration, props)
	ci := fmt.Sprintf(`{"commitInfo":{"timestamp":1764489600000,"operation":"SET TBLPROPERTIES",`+
		`"operationParameters":{"properties":%s},"readVersion":%d,"isolationLevel":"Serializable",`+
		`"isBlindAppend":true,"operationMetrics":{},"engineInfo":"Apache-Spark/3.5.3 Delta-Lake/3.2.1",`+
		`"txnId":"0b7f6a4e-2f4c-4d8e-9a51-6c0c2d1e9f10"}}`, jsonString(t, jsonString(t, props)), readVersion)
	return []string{ci, `{"metaData":` + jsonString(t, m) + `}`}
}

// deltaRSSetProperties renders what delta-rs set_table_properties writes:
// the metaData, a protocol action when the properties touch it, and
// commitInfo with the properties as a JSON object and no engineInfo.
func deltaRSSetProperties(t *testing.T, m Metadata, p *Protocol, props map[string]string) []string {
	m = cloneMetadata(m)
	maps.Copy(m.Configuration, props)
	lines := []string{`{"metaData":` + jsonString(t, m) + `}`}
	if p != nil {
		lines = append(lines, `{"protocol":`+jsonString(t, p)+`}`)
	}
	return append(lines, fmt.Sprintf(`{"commitInfo":{"timestamp":1764489600001,"operation":"SET TBLPROPERTIES",`+
		`"operationParameters":{"properties":%s},"clientVersion":"delta-rs.py-1.2.1"}}`, jsonString(t, props)))
}

func appendOne(ctx context.Context, tbl *Table, n int64) (int64, error) {
	return tbl.Commit(ctx, CommitActions{Adds: []Add{testAdd(n)}, Txn: &Txn{AppID: "relay", Version: n}})
}

// appendRange appends batches from..to (inclusive), one commit each.
func appendRange(t *testing.T, tbl *Table, from, to int64) {
	t.Helper()
	for i := from; i <= to; i++ {
		if _, err := appendOne(context.Background(), tbl, i); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// TestForeignPropertyChangesAreFollowed: table property changes written
// the way Spark and delta-rs write them, landing between two appends of a
// live handle, are followed (the append goes on at the next version); a
// schema change stops the handle with ErrIncompatibleChange, for good.
func TestForeignPropertyChangesAreFollowed(t *testing.T) {
	bothStores(t, func(t *testing.T, store storage.Store) {
		ctx := context.Background()
		tbl := newTestTable(t, store, 100)
		if v, err := appendOne(ctx, tbl, 1); err != nil || v != 1 {
			t.Fatalf("append 1: v=%d %v", v, err)
		}
		putRaw(t, store, 2, sparkSetProperties(t, tbl.Metadata(), 1, map[string]string{PropLogRetention: "interval 60 days"})...)
		if v, err := appendOne(ctx, tbl, 2); err != nil || v != 3 {
			t.Fatalf("append after Spark SET TBLPROPERTIES: v=%d %v", v, err)
		}
		if got := tbl.Metadata().Configuration[PropLogRetention]; got != "interval 60 days" {
			t.Fatalf("handle did not follow the property change: %q", got)
		}
		proto := topicProtocol
		proto.WriterFeatures = append([]string{"domainMetadata"}, proto.WriterFeatures...)
		putRaw(t, store, 4, deltaRSSetProperties(t, tbl.Metadata(), &proto, map[string]string{PropCheckpointInterval: "50", "owner": "team-a"})...)
		if v, err := appendOne(ctx, tbl, 3); err != nil || v != 5 {
			t.Fatalf("append after delta-rs set_table_properties: v=%d %v", v, err)
		}
		snap, err := LoadSnapshot(ctx, store, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Files) != 3 || snap.Txns["relay"].Version != 3 || snap.Metadata.Configuration["owner"] != "team-a" ||
			len(snap.Protocol.WriterFeatures) != 3 {
			t.Fatalf("snapshot: files=%d txn=%+v config=%v protocol=%+v", len(snap.Files), snap.Txns["relay"], snap.Metadata.Configuration, snap.Protocol)
		}
		compareSnapshots(t, tbl.snap, snap)

		m := cloneMetadata(tbl.Metadata())
		m.SchemaString = strings.Replace(testSchema, `]}`, `,{"name":"extra","type":"string","nullable":true,"metadata":{}}]}`, 1)
		putRaw(t, store, 6, `{"commitInfo":{"operation":"ADD COLUMNS"}}`, `{"metaData":`+jsonString(t, m)+`}`)
		for i := range 2 { // the refusal sticks: the handle must be reopened
			_, err := appendOne(ctx, tbl, 4)
			var ice *IncompatibleChangeError
			if !errors.Is(err, ErrIncompatibleChange) || !errors.As(err, &ice) || ice.Version != 6 || ice.Reason != "schema changed" {
				t.Fatalf("attempt %d after a schema change: %v", i, err)
			}
		}
		if _, err := store.Get(ctx, CommitKey(7)); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("a refused handle wrote version 7: %v", err)
		}
		fresh, err := OpenTable(ctx, store, Options{})
		if err != nil || fresh.Version() != 6 {
			t.Fatalf("reopen: %v", err)
		}
	})
}

// TestIncompatibleChanges: each change a writer cannot follow is named.
func TestIncompatibleChanges(t *testing.T) {
	dv := Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"},
		WriterFeatures: []string{"appendOnly", "changeDataFeed", "deletionVectors"}}
	for _, c := range []struct {
		name   string
		change func(m *Metadata) (*Metadata, *Protocol)
		reason string
		proto  bool
	}{
		{"table replaced", func(m *Metadata) (*Metadata, *Protocol) { m.ID = "6a8c1f43-4d0b-4a63-9c5e-1d2b3c4d5e6f"; return m, nil },
			"table replaced (new id 6a8c1f43-4d0b-4a63-9c5e-1d2b3c4d5e6f", false},
		{"partitioned", func(m *Metadata) (*Metadata, *Protocol) { m.PartitionColumns = []string{"topic"}; return m, nil },
			"partition columns changed from [] to [topic]", false},
		{"deletion vectors", func(m *Metadata) (*Metadata, *Protocol) {
			m.Configuration["delta.enableDeletionVectors"] = "true"
			return m, &dv
		}, `protocol: table requires reader feature "deletionVectors"`, true},
		{"writer feature", func(m *Metadata) (*Metadata, *Protocol) {
			p := topicProtocol
			p.WriterFeatures = append(p.WriterFeatures, "rowTracking")
			return nil, &p
		}, `protocol: table requires writer feature "rowTracking"`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store := newDirStore(t, "")
			tbl := newTestTable(t, store, 100)
			reader, err := OpenTable(ctx, store, Options{})
			if err != nil {
				t.Fatal(err)
			}
			m := cloneMetadata(tbl.Metadata())
			nm, np := c.change(&m)
			lines := []string{`{"commitInfo":{"operation":"CHANGE"}}`}
			if np != nil {
				lines = append(lines, `{"protocol":`+jsonString(t, np)+`}`)
			}
			if nm != nil {
				lines = append(lines, `{"metaData":`+jsonString(t, nm)+`}`)
			}
			putRaw(t, store, 1, lines...)
			_, commitErr := appendOne(ctx, tbl, 1)
			refreshErr := reader.Refresh(ctx)
			for _, err := range []error{commitErr, refreshErr} {
				var ice *IncompatibleChangeError
				if !errors.As(err, &ice) || ice.Version != 1 || !strings.HasPrefix(ice.Reason, c.reason) {
					t.Fatalf("err = %v, want an incompatible change at version 1: %q", err, c.reason)
				}
				if errors.Is(err, ErrUnsupportedProtocol) != c.proto {
					t.Errorf("errors.Is(err, ErrUnsupportedProtocol) = %t", !c.proto)
				}
			}
		})
	}
}

// TestRefreshFollowsCompatibleChange: a handle that re-reads the log finds
// a property change and goes on appending.
func TestRefreshFollowsCompatibleChange(t *testing.T) {
	ctx := context.Background()
	store := newDirStore(t, "")
	tbl := newTestTable(t, store, 100)
	putRaw(t, store, 1, sparkSetProperties(t, tbl.Metadata(), 0, map[string]string{PropDeletedFileRetention: "interval 14 days"})...)
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if tbl.Version() != 1 || tbl.Metadata().Configuration[PropDeletedFileRetention] != "interval 14 days" {
		t.Fatalf("after refresh: v=%d config=%v", tbl.Version(), tbl.Metadata().Configuration)
	}
	if v, err := appendOne(ctx, tbl, 1); err != nil || v != 2 {
		t.Fatalf("append: v=%d %v", v, err)
	}
}

// sparkCommentColumns renders what delta-spark writes for COMMENT ON TABLE
// and ALTER TABLE ... ALTER COLUMN c COMMENT '...': the whole new metaData,
// with the description and each column's "comment" metadata set.
func sparkCommentColumns(t *testing.T, m Metadata, desc string, comments map[string]string) []string {
	t.Helper()
	m = cloneMetadata(m)
	m.Description = &desc
	s, err := ParseSchema(m.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range s.Fields {
		if c, ok := comments[f.Name]; ok {
			md := maps.Clone(f.Metadata)
			if md == nil {
				md = map[string]any{}
			}
			md["comment"] = c
			s.Fields[i].Metadata = md
		}
	}
	m.SchemaString = jsonString(t, s)
	return []string{`{"commitInfo":{"timestamp":1764489600002,"operation":"CHANGE COLUMN","engineInfo":"Apache-Spark/3.5.3 Delta-Lake/3.2.1"}}`,
		`{"metaData":` + jsonString(t, m) + `}`}
}

// TestForeignCommentChangesAreFollowed: a table description and column
// comments committed under a live handle (as Spark's COMMENT statements
// and `relay topics describe` write them) are followed, and so is a
// changed comment; any other change of a field's metadata stops the
// handle.
func TestForeignCommentChangesAreFollowed(t *testing.T) {
	ctx := context.Background()
	local, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := storage.Sub(local, "orders")
	tbl := newTestTable(t, store, 100)
	appendRange(t, tbl, 1, 1)
	putRaw(t, store, 2, sparkCommentColumns(t, tbl.Metadata(), "orders of the shop", map[string]string{"id": "the order id"})...)
	if v, err := appendOne(ctx, tbl, 2); err != nil || v != 3 {
		t.Fatalf("append after COMMENT ON COLUMN: v=%d %v", v, err)
	}
	if d := tbl.Metadata().Description; d == nil || *d != "orders of the shop" || !strings.Contains(tbl.Metadata().SchemaString, "the order id") {
		t.Fatalf("handle did not follow the comments: %v %s", d, tbl.Metadata().SchemaString)
	}
	putRaw(t, store, 4, sparkCommentColumns(t, tbl.Metadata(), "orders", map[string]string{"id": "changed"})...)
	if v, err := appendOne(ctx, tbl, 3); err != nil || v != 5 {
		t.Fatalf("append after a changed comment: v=%d %v", v, err)
	}
	// The handle's own metaData updates may change comments too.
	if _, err := tbl.UpdateMetadata(ctx, MetadataChange{Operation: "UPDATE TABLE METADATA", Update: func(m *Metadata) error {
		m.SchemaString = strings.Replace(m.SchemaString, `"changed"`, `"again"`, 1)
		return nil
	}}); err != nil {
		t.Fatalf("own comment change: %v", err)
	}
	m := cloneMetadata(tbl.Metadata())
	m.SchemaString = strings.Replace(m.SchemaString, `"comment":"again"`, `"comment":"again","delta.invariants":"id > 0"`, 1)
	if m.SchemaString == tbl.Metadata().SchemaString {
		t.Fatal("test schema unchanged")
	}
	putRaw(t, store, 7, `{"commitInfo":{"operation":"CHANGE COLUMN"}}`, `{"metaData":`+jsonString(t, m)+`}`)
	if _, err := appendOne(ctx, tbl, 4); !errors.Is(err, ErrIncompatibleChange) {
		t.Fatalf("append after an invariant was added: %v", err)
	}
}

func TestSameSchemaIgnoresOnlyComments(t *testing.T) {
	base := `{"type":"struct","fields":[{"name":"a","type":{"type":"struct","fields":[{"name":"b","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`
	for _, c := range []struct {
		other string
		same  bool
	}{
		{strings.Replace(base, `"metadata":{}}]},`, `"metadata":{"comment":"nested"}}]},`, 1), true},
		{strings.Replace(base, `"nullable":true,"metadata":{}}]}`, `"nullable":true,"metadata":{"comment":"top"}}]}`, 1), true},
		{strings.Replace(base, `"metadata":{}}]},`, `"metadata":{"delta.columnMapping.id":1}}]},`, 1), false},
		{strings.Replace(base, `"long"`, `"integer"`, 1), false},
	} {
		if c.other == base {
			t.Fatalf("case unchanged: %s", c.other)
		}
		if got := SameSchema(base, c.other); got != c.same {
			t.Errorf("SameSchema(base, %s) = %t, want %t", c.other, got, c.same)
		}
	}
}
