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
