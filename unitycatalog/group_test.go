package unitycatalog

import (
	"context"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
	"github.com/deltabus/deltabus/topicmeta"
	"github.com/deltabus/deltabus/unitycatalog/uctest"
)

// groupListing makes a store with group m (m.*) holding m.a and m.b, m.a
// described and with a personal field, topic orders in its own table and
// m.z described without an event, and returns its listing.
func groupListing(t *testing.T) (storage.Store, topicmeta.Listing) {
	t.Helper()
	ctx := context.Background()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	grouptest.Group(t, store, "m", "m.*")
	grouptest.Batch(t, store, "deltabus-main", 100, "m.a", "m.b", "orders")
	for _, m := range []catalog.TopicMeta{{Topic: "m.a", Owner: "team-metrics", Description: "Samples of a."}, {Topic: "m.z", Owner: "team-z"}} {
		if err := catalog.WriteTopicMeta(ctx, store, m); err != nil {
			t.Fatal(err)
		}
	}
	return store, load(t, store)
}

func load(t *testing.T, store storage.Store) topicmeta.Listing {
	t.Helper()
	l, err := topicmeta.LoadAll(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range l.Topics { // what the personal-data feature's provider fills
		if in.Topic == "m.a" {
			l.Topics[i].PersonalColumns = []topicmeta.PersonalColumn{{Type: "Sample", Version: 2, Column: "payload", Pointer: "/host"}}
		}
	}
	return l
}

// TestSyncGroupTable: a group's table is registered once, as one EXTERNAL
// Delta table at the group's location, named after it, whose comment
// lists its topics and how to read one and whose properties say it is a
// group and gather its topics' owners and personal fields; no topic of it
// is registered on its own. A topic joining the group is a drift Sync
// brings up to date. Every request and response is checked against the
// published API description.
func TestSyncGroupTable(t *testing.T) {
	srv := uctest.Start(t, uctest.Options{Token: token})
	c, err := NewClient(srv.URL, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, l := groupListing(t)
	tg := Target{Catalog: "lake", Schema: "events", Version: "1.2.3"}
	rep, err := c.Sync(ctx, tg, l)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Created, ",") != "_group_m,orders" || len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped["m.z"], "no event yet") {
		t.Fatalf("first sync: %+v", rep)
	}
	for _, n := range []string{"m_a", "m_b", "m_z"} {
		if _, ok := srv.Table("lake.events." + n); ok {
			t.Errorf("grouped topic registered on its own as %s", n)
		}
	}
	tbl, ok := srv.Table("lake.events._group_m")
	if !ok {
		t.Fatal("the group's table is not registered")
	}
	props := tbl["properties"].(map[string]any)
	comment, _ := tbl["comment"].(string)
	if tbl["table_type"] != "EXTERNAL" || tbl["data_source_format"] != "DELTA" || !strings.HasSuffix(tbl["storage_location"].(string), "/_group.m") ||
		len(tbl["columns"].([]any)) != 13 {
		t.Fatalf("the group's table as registered: %v", tbl)
	}
	for _, want := range []string{"DeltaBus topic group m", "Topics: m.a, m.b.", "WHERE topic = 'm.a'"} {
		if !strings.Contains(comment, want) {
			t.Errorf("comment %q lacks %q", comment, want)
		}
	}
	if strings.Contains(comment, "Samples of a.") {
		t.Errorf("a topic's own description in the group's comment: %q", comment)
	}
	for k, want := range map[string]string{PropGroup: "m", PropTopics: "m.a,m.b", PropTopicCount: "2", PropPatterns: "m.*", PropOwner: "team-metrics",
		PropPersonal: "m.a: payload/host (Sample v2)", PropContract: "none", PropSources: "deltabus-main", PropVersion: "1.2.3"} {
		if props[k] != want {
			t.Errorf("property %s = %v, want %q", k, props[k], want)
		}
	}
	if _, ok := props[PropTopic]; ok {
		t.Errorf("a group's table carries %s: %v", PropTopic, props)
	}
	before := len(srv.Calls())
	if rep, err = c.Sync(ctx, tg, l); err != nil || rep.Changed() || strings.Join(rep.Unchanged, ",") != "_group_m,orders" {
		t.Fatalf("second sync: %+v %v", rep, err)
	}
	if w := writes(srv.Calls()[before:]); len(w) != 0 {
		t.Fatalf("second sync wrote: %v", w)
	}

	grouptest.Batch(t, store, "deltabus-main", 200, "m.c")
	l = load(t, store)
	if rep, err = c.Sync(ctx, tg, l); err != nil || rep.Drifted["_group_m"] != "comment, properties" || rep.Changed() {
		t.Fatalf("a topic joined, without Replace: %+v %v", rep, err)
	}
	tg.Replace = true
	if rep, err = c.Sync(ctx, tg, l); err != nil || rep.Replaced["_group_m"] != "comment, properties" {
		t.Fatalf("a topic joined, with Replace: %+v %v", rep, err)
	}
	if tbl, _ := srv.Table("lake.events._group_m"); tbl["properties"].(map[string]any)[PropTopics] != "m.a,m.b,m.c" {
		t.Fatalf("after the replace: %v", tbl["properties"])
	}
}

// TestRegisterGroup: the relay's own registration creates a group's
// table once and changes nothing else; a table of that name elsewhere is
// a conflict, left alone.
func TestRegisterGroup(t *testing.T) {
	srv := uctest.Start(t, uctest.Options{Legacy400: true})
	c, _ := NewClient(srv.URL, "", nil)
	ctx := context.Background()
	tg := Target{Catalog: "lake", Schema: "events", Version: "1"}
	if _, _, err := c.EnsureSchema(ctx, tg); err != nil {
		t.Fatal(err)
	}
	_, l := groupListing(t)
	g := l.Groups[0]
	for i, wantCreated := range []bool{true, false} {
		created, conflict, err := c.RegisterGroup(ctx, tg, g, l.Topics)
		if err != nil || created != wantCreated || conflict != "" {
			t.Fatalf("RegisterGroup #%d: %t %q %v", i+1, created, conflict, err)
		}
	}
	if _, err := TableFor(l.Topics[0], "lake", "events", "1"); err == nil || !strings.Contains(err.Error(), "shares group m's table") {
		t.Fatalf("TableFor of a grouped topic: %v", err)
	}
	if err := c.DeleteTable(ctx, "lake.events._group_m"); err != nil {
		t.Fatal(err)
	}
	foreign, _ := GroupTableFor(g, l.Topics, "lake", "events", "1")
	foreign.StorageLocation = "s3://elsewhere/tables/x"
	if _, err := c.CreateTable(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if created, conflict, err := c.RegisterGroup(ctx, tg, g, l.Topics); created || err != nil || !strings.Contains(conflict, "s3://elsewhere/tables/x") {
		t.Fatalf("RegisterGroup over a foreign table: %t %q %v", created, conflict, err)
	}
}
