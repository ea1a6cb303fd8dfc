package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// TestForeignCompatibleMetadataChange: while the relay streams, another
// Delta writer changes a topic table's properties (Spark's ALTER TABLE ...
// SET TBLPROPERTIES, delta-rs set_table_properties): normal operations, the
// relay follows the change and goes on committing without a restart.
func TestForeignCompatibleMetadataChange(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	tp := topics[0]
	s, p := streamingLocal(t, 6000, 400, tp, 100)
	store := s.store
	ctx := context.Background()
	tbl, err := delta.OpenTable(ctx, storage.Sub(store, tp), delta.Options{EngineInfo: "Apache-Spark/3.5.3 Delta-Lake/3.3.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := delta.SetProperties(ctx, tbl, map[string]string{"team.owner": "platform", delta.PropLogRetention: "interval 60 days"}); err != nil {
		t.Fatal(err)
	}
	before := topicRows(t, s, tp)
	eventually(t, time.Minute, tp+" streaming after the foreign change", func() bool { return topicRows(t, s, tp) > before+100 })
	s.finish(p)
	if strings.Contains(p.output(), "replication session ended") {
		t.Errorf("a compatible change restarted the session:\n%s", p.tail())
	}
	snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, tp), -1)
	if err != nil || snap.Metadata.Configuration["team.owner"] != "platform" {
		t.Fatalf("the foreign property was lost: %v %v", err, snap.Metadata.Configuration)
	}
}

// TestForeignIncompatibleSchemaChange: another writer changes a topic
// table's schema (a column's type): the relay cannot append there any
// more. It holds that topic (log, relay status, metric) while the others
// stream; once the operator moves the table away, `relay rebuild` restores
// it and every topic ends equal to the source.
func TestForeignIncompatibleSchemaChange(t *testing.T) {
	t.Parallel() // a unique slot: runs beside the other fault tests
	tp := topics[0]
	s, p := streamingLocal(t, 6000, 400, tp, 100)
	store := s.store
	ctx := context.Background()
	forceSchemaChange(t, storage.Sub(store, tp))
	eventually(t, time.Minute, tp+" held", func() bool {
		st := heldState(ctx, store, tp)
		return st.Paused == catalog.HoldIncompatibleTable
	})
	_, out, _ := runCLI(t, s.env, "status")
	if !strings.Contains(out, tp) || !strings.Contains(out, "held since") {
		t.Errorf("relay status does not show the held topic:\n%s", out)
	}
	others := topicRows(t, s, topics[1])
	eventually(t, time.Minute, "other topics streaming", func() bool { return topicRows(t, s, topics[1]) > others+50 })
	deleteAll(t, storage.Sub(store, tp)) // the operator moves the table away
	if code, stdout, stderr := runCLI(t, s.env, "rebuild", "--topic", tp); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s%s\n%s", code, stdout, stderr, p.tail())
	}
	<-s.produced
	waitDrained(t, s.db.DSN, s.slot, 3*time.Minute)
	s.stopWithin(p, 30*time.Second)
	checkAfterRebuild(t, store, s.truth.read(t), tp)
}

// forceSchemaChange commits, as another engine would, a metaData whose
// "key" column is an integer instead of a string.
func forceSchemaChange(t testing.TB, table storage.Store) {
	t.Helper()
	ctx := context.Background()
	for range 100 {
		snap, err := delta.LoadSnapshot(ctx, table, -1)
		if err != nil {
			t.Fatal(err)
		}
		m := snap.Metadata
		m.SchemaString = keyAsInteger(t, m.SchemaString)
		ci := &delta.CommitInfo{Raw: map[string]json.RawMessage{"operation": json.RawMessage(`"CHANGE COLUMN"`),
			"engineInfo": json.RawMessage(`"Apache-Spark/3.5.3 Delta-Lake/3.3.0"`)}}
		ts := time.Now().UnixMilli()
		ci.Timestamp = &ts
		data, err := delta.EncodeCommit([]delta.Action{{CommitInfo: ci}, {Metadata: &m}})
		if err != nil {
			t.Fatal(err)
		}
		err = table.PutIfAbsent(ctx, delta.CommitKey(snap.Version+1), data)
		if err == nil {
			return
		}
		if !errors.Is(err, storage.ErrExists) {
			t.Fatal(err)
		}
	}
	t.Fatal("could not commit the schema change: the relay won every version")
}

// keyAsInteger returns schema with its string "key" column made an
// integer, whatever else the schema's JSON holds (governance adds column
// comments, and another engine may order an object's members otherwise).
func keyAsInteger(t testing.TB, schema string) string {
	t.Helper()
	var s struct {
		Type   string           `json:"type"`
		Fields []map[string]any `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	for _, f := range s.Fields {
		if f["name"] == "key" && f["type"] == "string" {
			f["type"] = "integer"
			out, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
	}
	t.Fatalf("schema has no string key column: %s", schema)
	return ""
}
