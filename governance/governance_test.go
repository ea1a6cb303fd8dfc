package governance

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
	"github.com/deltabus/deltabus/unitycatalog"
	"github.com/deltabus/deltabus/unitycatalog/uctest"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newTopic(t *testing.T, store storage.Store, name string) {
	t.Helper()
	md, proto := topic.NewTableMetadata(name)
	if err := delta.CreateTable(context.Background(), storage.Sub(store, name), md, proto, nil); err != nil {
		t.Fatal(err)
	}
	if err := catalog.RegisterTopic(context.Background(), store, name); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGovernorRegistersAndRidesOutAnOutage: new topics get their comments
// and their registration; while Unity Catalog is down the failure is
// logged once, recorded in the store and retried; afterwards the pending
// topic is registered and the status is clean again.
func TestGovernorRegistersAndRidesOutAnOutage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := uctest.Start(t, uctest.Options{Token: "tok"})
	c, err := unitycatalog.NewClient(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	g := New(Config{Store: store, AppID: "deltabus-main", Log: slog.New(slog.NewTextHandler(&logs, nil)), Interval: 20 * time.Millisecond,
		UC: c, Target: unitycatalog.Target{Catalog: "lake", Schema: "events", Version: "t"}})
	newTopic(t, store, "orders")
	go g.Run(ctx)
	registered := func(n string) func() bool {
		return func() bool { _, ok := srv.Table("lake.events." + n); return ok }
	}
	eventually(t, "orders registered", registered("orders"))
	if tbl, _ := srv.Table("lake.events.orders"); !strings.Contains(tbl["columns"].([]any)[0].(map[string]any)["type_json"].(string), `"comment":"Unique id`) {
		t.Fatalf("orders registered before its comments: %v", tbl["columns"].([]any)[0])
	}

	srv.SetDown(true)
	newTopic(t, store, "payments")
	eventually(t, "the failure recorded in the store", func() bool {
		st, ok, err := ReadStatus(ctx, store, "deltabus-main")
		return err == nil && ok && !st.OK && strings.Contains(st.LastError, "503") && st.Pending["payments"] != ""
	})
	time.Sleep(2500 * time.Millisecond) // retries at 1 s and 2 s
	if n := strings.Count(logs.String(), "registration failed"); n != 1 {
		t.Fatalf("the failure was logged %d times:\n%s", n, logs.String())
	}
	if ucs := g.UnityCatalog(); ucs.OK || ucs.NextRetry.IsZero() {
		t.Fatalf("status during the outage: %+v", ucs)
	}
	srv.SetDown(false)
	eventually(t, "payments registered after the outage", registered("payments"))
	eventually(t, "a clean status in the store", func() bool {
		st, ok, _ := ReadStatus(ctx, store, "deltabus-main")
		return ok && st.OK && len(st.Registered) == 2 && len(st.Pending) == 0
	})
	if !strings.Contains(logs.String(), "Unity Catalog answers again") {
		t.Errorf("no recovery logged:\n%s", logs.String())
	}
}

// TestGovernorGroupTable: a topic group's table carries the group's own
// description (its topics), written again when a topic joins and never a
// topic's own; it is registered in Unity Catalog once, as the group's
// table, and each of its topics counts as registered; a relay writing
// into the table goes on.
func TestGovernorGroupTable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := storage.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := uctest.Start(t, uctest.Options{})
	c, err := unitycatalog.NewClient(srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.Group(t, store, "m", "m.*")
	grouptest.Batch(t, store, "deltabus-main", 100, "m.a", "m.b", "orders")
	if err := catalog.WriteTopicMeta(ctx, store, catalog.TopicMeta{Topic: "m.a", Owner: "team-m", Description: "The own words of m.a."}); err != nil {
		t.Fatal(err)
	}
	g := New(Config{Store: store, AppID: "deltabus-main", Interval: 20 * time.Millisecond,
		UC: c, Target: unitycatalog.Target{Catalog: "lake", Schema: "events", Version: "t"}})
	go g.Run(ctx)
	description := func() string {
		snap, err := delta.LoadSnapshot(ctx, storage.Sub(store, "_group.m"), -1)
		if err != nil || snap.Metadata.Description == nil {
			return ""
		}
		return *snap.Metadata.Description
	}
	registered := func(want string) func() bool {
		return func() bool {
			st := g.UnityCatalog()
			return strings.Join(st.Registered, ",") == want && len(st.Pending) == 0
		}
	}
	eventually(t, "the group's table registered for its topics", registered("m.a,m.b,orders"))
	eventually(t, "the group's description in its table", func() bool { return strings.Contains(description(), "Topics: m.a, m.b.") })
	if _, ok := srv.Table("lake.events._group_m"); !ok {
		t.Fatal("the group's table is not in Unity Catalog")
	}
	for _, n := range []string{"m_a", "m_b"} {
		if _, ok := srv.Table("lake.events." + n); ok {
			t.Errorf("grouped topic %s registered on its own", n)
		}
	}
	grouptest.Batch(t, store, "deltabus-main", 200, "m.a", "m.c") // a relay goes on; m.c joins
	eventually(t, "m.c in the description", func() bool { return strings.Contains(description(), "Topics: m.a, m.b, m.c.") })
	eventually(t, "m.c registered through its group's table", registered("m.a,m.b,m.c,orders"))
	if d := description(); strings.Contains(d, "own words") || strings.Contains(d, "team-m") {
		t.Fatalf("a topic's own description reached the shared table: %q", d)
	}
	if tbl, _ := srv.Table("lake.events._group_m"); tbl["properties"].(map[string]any)[unitycatalog.PropTopics] != "m.a,m.b" {
		t.Fatalf("the relay replaced the group's registration (relay catalog sync's job): %v", tbl["properties"])
	}
	grouptest.Batch(t, store, "deltabus-main", 300, "m.b")
}
