package unitycatalog

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/unitycatalog/uctest"
)

const token = "uc-secret-token-1234"

// topics makes a store with described topics (one of them with a "." in
// its name) and returns their listing.
func topics(t *testing.T) (storage.Store, topicmeta.Listing) {
	t.Helper()
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"orders", "orders.v2", "_dead_letter"} {
		md, proto := topic.NewTableMetadata(n)
		if err := delta.CreateTable(ctx, storage.Sub(store, n), md, proto, nil); err != nil {
			t.Fatal(err)
		}
		if err := catalog.RegisterTopic(ctx, store, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := catalog.WriteTopicMeta(ctx, store, catalog.TopicMeta{Topic: "orders", Owner: "team-checkout", Description: "Orders."}); err != nil {
		t.Fatal(err)
	}
	in, err := topicmeta.LoadTopic(ctx, store, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := topicmeta.Apply(ctx, store, in); err != nil {
		t.Fatal(err)
	}
	l, err := topicmeta.LoadAll(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	return store, l
}

func writes(calls []uctest.Call) []string {
	var out []string
	for _, c := range calls {
		if c.Method != http.MethodGet {
			out = append(out, c.Method+" "+c.Path)
		}
	}
	return out
}

// TestSyncTwice: the first sync creates the catalog, the schema and every
// table with the columns Unity Catalog OSS requires; the second changes
// nothing (GETs only); every request and response is valid against the
// published API description (uctest fails the test otherwise).
func TestSyncTwice(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		srv := uctest.Start(t, uctest.Options{Token: token, Legacy400: legacy})
		c, err := NewClient(srv.URL, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, infos := topics(t)
		tg := Target{Catalog: "lake", Schema: "events", Version: "1.2.3", Replace: true}
		rep, err := c.Sync(ctx, tg, infos)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.CatalogCreated || !rep.SchemaCreated || strings.Join(rep.Created, ",") != "_dead_letter,orders,orders_v2" {
			t.Fatalf("first sync: %+v", rep)
		}
		tbl, ok := srv.Table("lake.events.orders")
		if !ok {
			t.Fatal("orders not registered")
		}
		props := tbl["properties"].(map[string]any)
		if tbl["comment"] != "Orders." || tbl["table_type"] != "EXTERNAL" || tbl["data_source_format"] != "DELTA" ||
			!strings.HasSuffix(tbl["storage_location"].(string), "/orders") || props[PropOwner] != "team-checkout" ||
			props[PropContract] != "none" || props[PropPersonal] != "none" || props[PropVersion] != "1.2.3" {
			t.Fatalf("orders as registered: %v", tbl)
		}
		cols := tbl["columns"].([]any)
		if len(cols) != 13 { // the event schema, source included
			t.Fatalf("%d columns", len(cols))
		}
		id := cols[0].(map[string]any)
		var field map[string]any
		if err := json.Unmarshal([]byte(id["type_json"].(string)), &field); err != nil {
			t.Fatal(err)
		}
		md := field["metadata"].(map[string]any)
		if id["name"] != "event_id" || id["type_name"] != "STRING" || id["nullable"] != false || id["position"] != 0.0 ||
			field["name"] != "event_id" || md["comment"] != id["comment"] || id["comment"] == "" {
			t.Fatalf("event_id column: %v", id)
		}
		lsn := cols[8].(map[string]any)
		if lsn["type_text"] != "bigint" || lsn["type_name"] != "LONG" {
			t.Fatalf("commit_lsn column: %v", lsn)
		}
		before := len(srv.Calls())
		rep, err = c.Sync(ctx, tg, infos)
		if err != nil || rep.Changed() || len(rep.Unchanged) != 3 {
			t.Fatalf("second sync: %+v %v", rep, err)
		}
		if w := writes(srv.Calls()[before:]); len(w) != 0 {
			t.Fatalf("second sync wrote: %v", w)
		}
		// Another DeltaBus release registers the same: still no write.
		tg.Version = "1.2.4"
		if rep, err = c.Sync(ctx, tg, infos); err != nil || rep.Changed() {
			t.Fatalf("sync by another release: %+v %v", rep, err)
		}
	}
}

// TestSyncUpdatesADrift: a changed description is brought up to date by
// delete and create (the API has no update); without Replace it is
// reported; a table of the same name elsewhere is never touched.
func TestSyncUpdatesADrift(t *testing.T) {
	srv := uctest.Start(t, uctest.Options{})
	c, _ := NewClient(srv.URL+BasePath+"/", "", nil)
	ctx := context.Background()
	store, infos := topics(t)
	tg := Target{Catalog: "lake", Schema: "events", Version: "1"}
	if _, err := c.Sync(ctx, tg, infos); err != nil {
		t.Fatal(err)
	}
	if err := catalog.WriteTopicMeta(ctx, store, catalog.TopicMeta{Topic: "orders", Owner: "team-orders", Description: "Orders, v2."}); err != nil {
		t.Fatal(err)
	}
	infos, _ = topicmeta.LoadAll(ctx, store)
	rep, err := c.Sync(ctx, tg, infos)
	if err != nil || rep.Drifted["orders"] != "comment, properties" || rep.Changed() {
		t.Fatalf("drift without Replace: %+v %v", rep, err)
	}
	tg.Replace = true
	before := len(srv.Calls())
	if rep, err = c.Sync(ctx, tg, infos); err != nil || rep.Replaced["orders"] != "comment, properties" {
		t.Fatalf("drift with Replace: %+v %v", rep, err)
	}
	if w := writes(srv.Calls()[before:]); strings.Join(w, " ") != "DELETE "+BasePath+"/tables/lake.events.orders POST "+BasePath+"/tables" {
		t.Fatalf("writes of a replace: %v", w)
	}
	if tbl, _ := srv.Table("lake.events.orders"); tbl["comment"] != "Orders, v2." {
		t.Fatalf("after replace: %v", tbl["comment"])
	}
	// Someone else's table at the name of orders.v2.
	if err := c.DeleteTable(ctx, "lake.events.orders_v2"); err != nil {
		t.Fatal(err)
	}
	foreign, _ := TableFor(infos.Topics[2], "lake", "events", "x")
	foreign.StorageLocation = "s3://elsewhere/tables/x"
	if _, err := c.CreateTable(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	rep, err = c.Sync(ctx, tg, infos)
	if err != nil || !strings.Contains(rep.Conflicts["orders_v2"], "s3://elsewhere/tables/x") {
		t.Fatalf("a foreign table of the same name: %+v %v", rep, err)
	}
	if tbl, _ := srv.Table("lake.events.orders_v2"); tbl["storage_location"] != "s3://elsewhere/tables/x" {
		t.Fatalf("sync touched the foreign table: %v", tbl)
	}
}

// TestServerRules: the test server refuses what Unity Catalog OSS refuses,
// and the client reports it as the API's error.
func TestServerRules(t *testing.T) {
	srv := uctest.Start(t, uctest.Options{Token: token})
	ctx := context.Background()
	c, _ := NewClient(srv.URL, token, nil)
	_, infos := topics(t)
	want, err := TableFor(infos.Topics[1], "lake", "events", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, want); !IsNotFound(err) || !strings.Contains(err.Error(), "SCHEMA_NOT_FOUND") {
		t.Fatalf("a table without its schema: %v", err)
	}
	if _, err := c.CreateSchema(ctx, SchemaInfo{Name: "events", CatalogName: "lake"}); !IsNotFound(err) || !strings.Contains(err.Error(), "CATALOG_NOT_FOUND") {
		t.Fatalf("a schema without its catalog: %v", err)
	}
	if _, _, err := c.EnsureSchema(ctx, Target{Catalog: "lake", Schema: "events"}); err != nil {
		t.Fatal(err)
	}
	bad := want
	bad.Columns = append([]ColumnInfo(nil), want.Columns...)
	bad.Columns[0].TypeJSON = `{"name":"event_id","type":"string","nullable":false}`
	if _, err := c.CreateTable(ctx, bad); err == nil || !strings.Contains(err.Error(), "type_json.metadata is required") {
		t.Fatalf("a type_json without metadata: %v", err)
	}
	if _, err := c.CreateTable(ctx, want); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, want); !IsAlreadyExists(err) {
		t.Fatalf("a second create: %v", err)
	}
	if created, conflict, err := c.Register(ctx, Target{Catalog: "lake", Schema: "events"}, infos.Topics[1]); created || conflict != "" || err != nil {
		t.Fatalf("Register of a registered topic: %t %q %v", created, conflict, err)
	}
	wrong, _ := NewClient(srv.URL, "not-the-"+token, nil)
	_, err = wrong.GetCatalog(ctx, "lake")
	if err == nil || !strings.Contains(err.Error(), "401 UNAUTHENTICATED") || strings.Contains(err.Error(), token) {
		t.Fatalf("a wrong token: %v", err)
	}
	if _, err := NewClient("https://user:"+token+"@uc.example.com", "", nil); err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("credentials in the URL: %v", err)
	}
}
