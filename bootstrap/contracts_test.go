package bootstrap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/pgtest"
	"github.com/deltabus/deltabus/usererr"
)

const (
	placedV1 = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"}}}`
	placedV2 = `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"integer"},"note":{"type":"string"}}}`
)

// register registers OrderPlaced v1 in orders and sets the policies.
func register(t testing.TB, store storage.Store, policies map[string]contract.Policy) {
	t.Helper()
	ctx := context.Background()
	reg := contract.NewRegistry(store, nil)
	if _, err := reg.Register(ctx, contract.Registration{Topic: "orders", Type: "OrderPlaced", Version: 1, Schema: []byte(placedV1), Mode: compat.None}); err != nil {
		t.Fatal(err)
	}
	for name, p := range policies {
		if err := reg.SetPolicy(ctx, name, p); err != nil {
			t.Fatal(err)
		}
	}
}

// insertEvent writes one outbox row and returns its id.
func insertEvent(t testing.TB, db *pgtest.DB, topicName, typ string, version int, payload string) string {
	t.Helper()
	id := outbox.NewID()
	db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ('%s', '%s', 'k', '%s', %d, '%s')`,
		id, topicName, typ, version, payload))
	return id
}

// contractOpts are bootstrap options that judge events against store's
// registry, as the relay's first start and the commands do.
func contractOpts(t testing.TB, store storage.Store) bootstrap.Options {
	return bootstrap.Options{Log: testLog(t), Contracts: contract.New(store, contract.Options{Poll: -1})}
}

// ids returns the event ids of a topic's rows.
func ids(t testing.TB, store storage.Store, name, appID string) []string {
	t.Helper()
	refs, _ := topicRows(t, store, name, appID)
	var out []string
	for _, r := range refs {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

// deadLetters returns _dead_letter's rows: event id -> reasons (one per
// row, so a dead letter written twice shows twice).
func deadLetters(t testing.TB, store storage.Store) map[string][]string {
	t.Helper()
	ctx := context.Background()
	st := storage.Sub(store, outbox.DeadLetterTopic)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, add := range snap.Files {
		if err := topic.ReadDeadLetters(ctx, st, add, func(d outbox.DeadLetter) error {
			out[d.ID] = append(out[d.ID], d.Reason)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// wantDeadLetters requires exactly the given dead letters, once each, with
// reasons containing the given text.
func wantDeadLetters(t testing.TB, store storage.Store, want map[string]string) {
	t.Helper()
	got := deadLetters(t, store)
	if len(got) != len(want) {
		t.Errorf("_dead_letter holds %d events, want %d: %v", len(got), len(want), got)
	}
	for id, reason := range want {
		if rs := got[id]; len(rs) != 1 || !strings.Contains(rs[0], reason) {
			t.Errorf("dead letter %s: %q, want one whose reason has %q", id, rs, reason)
		}
	}
}

// TestSnapshotJudgesEventsAsTheStreamDoes: the first start's snapshot
// checks every event against its contract: valid events and types without
// contracts reach their topics; an invalid event, an unregistered version
// and, in a strict topic, a type without contracts go to _dead_letter with
// the stream's reasons. A snapshot run again (a redo) writes none of them
// twice.
func TestSnapshotJudgesEventsAsTheStreamDoes(t *testing.T) {
	db := newOutbox(t)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	register(t, store, map[string]contract.Policy{"strict": {Strict: true}})
	valid := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": 1}`)
	invalid := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": "one"}`)
	unregistered := insertEvent(t, db, "orders", "OrderPlaced", 2, `{"order_id": 2}`)
	other := insertEvent(t, db, "orders", "Uncontracted", 1, `[1]`)
	uncontracted := insertEvent(t, db, "strict", "Uncontracted", 1, `{}`)
	free := insertEvent(t, db, "free", "Anything", 1, `{}`)
	ctx := testCtx(t, 5*time.Minute)
	if _, err := bootstrap.First(ctx, cfg, store, contractOpts(t, store)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		invalid:      `contract orders/OrderPlaced v1 at "/order_id"`,
		unregistered: "has no contract version 2 (registered: 1)",
		uncontracted: `topic "strict" is strict`,
	}
	check := func() {
		t.Helper()
		if got := ids(t, store, "orders", cfg.AppID); !slices.Equal(got, sorted(valid, other)) {
			t.Errorf("orders holds %v, want %v", got, sorted(valid, other))
		}
		if got := ids(t, store, "strict", cfg.AppID); len(got) != 0 {
			t.Errorf("the strict topic holds %v", got)
		}
		if got := ids(t, store, "free", cfg.AppID); !slices.Equal(got, []string{free}) {
			t.Errorf("free holds %v", got)
		}
		wantDeadLetters(t, store, want)
	}
	check()
	dropSlotWhenFree(t, db, cfg.Slot)
	if _, err := bootstrap.Snapshot(ctx, cfg, store, contractOpts(t, store)); err != nil {
		t.Fatal(err)
	}
	check()
}

// TestSnapshotRefusesAHeldViolation: in a topic that holds on violations,
// a refused event fails the first start with one line naming the event
// and the ways out, and nothing is written: no topic, no dead letter, no
// marker.
func TestSnapshotRefusesAHeldViolation(t *testing.T) {
	db := newOutbox(t)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	register(t, store, map[string]contract.Policy{"orders": {OnViolation: contract.Hold}})
	insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": 1}`)
	bad := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": false}`)
	_, err := bootstrap.First(testCtx(t, 5*time.Minute), cfg, store, contractOpts(t, store))
	if !usererr.Is(err) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "--on-violation dead-letter") {
		t.Fatalf("first start over a held violation: %v, want one line naming the event and the ways out", err)
	}
	if _, ok, _ := catalog.ReadMarker(t.Context(), store, cfg.AppID); ok {
		t.Error("a marker was written")
	}
	if got := ids(t, store, "orders", cfg.AppID); len(got) != 0 {
		t.Errorf("orders holds %v", got)
	}
	if got := deadLetters(t, store); len(got) != 0 {
		t.Errorf("_dead_letter holds %v", got)
	}
}

// TestRebuildJudgesEventsAndKeepsDeadLettersOut: a rebuild copies the
// topic's events as the stream wrote them: an event the stream
// dead-lettered stays out of the topic (even once the registry admits it:
// an event is in its topic or in _dead_letter, never both), a dead letter
// is not written twice, and an event the registry refuses now (its
// topic turned strict since) goes to _dead_letter, not nowhere.
func TestRebuildJudgesEventsAndKeepsDeadLettersOut(t *testing.T) {
	db := newOutbox(t)
	store, url := localStore(t)
	cfg := testConfig(t, db, url)
	register(t, store, nil)
	valid1 := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": 1}`)
	invalid := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": "one"}`)
	stop := runInProcess(t, cfg, store)
	valid2 := insertEvent(t, db, "orders", "OrderPlaced", 1, `{"order_id": 2}`)
	unregistered := insertEvent(t, db, "orders", "OrderPlaced", 2, `{"order_id": 3, "note": "v2"}`)
	plain := insertEvent(t, db, "orders", "Uncontracted", 1, `{}`)
	deadline := time.Now().Add(2 * time.Minute)
	for len(ids(t, store, "orders", cfg.AppID)) < 3 || len(deadLetters(t, store)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not stream: orders %v, dead letters %v", ids(t, store, "orders", cfg.AppID), deadLetters(t, store))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := ids(t, store, "orders", cfg.AppID); !slices.Equal(got, sorted(valid1, valid2, plain)) {
		t.Fatalf("orders before the rebuild: %v", got)
	}
	// The registry changes: v2 is registered, the topic turns strict.
	ctx := context.Background()
	reg := contract.NewRegistry(store, nil)
	if _, err := reg.Register(ctx, contract.Registration{Topic: "orders", Type: "OrderPlaced", Version: 2, Schema: []byte(placedV2), Mode: compat.None}); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetPolicy(ctx, "orders", contract.Policy{Strict: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(url[len("file://"):], "orders")); err != nil {
		t.Fatal(err)
	}
	res, err := bootstrap.Rebuild(testCtx(t, 5*time.Minute), cfg, store, "orders",
		bootstrap.RebuildOptions{Options: contractOpts(t, store)})
	if err != nil || !res.Committed {
		t.Fatalf("rebuild: %+v, %v", res, err)
	}
	stop()
	if got := ids(t, store, "orders", cfg.AppID); !slices.Equal(got, sorted(valid1, valid2)) {
		t.Errorf("orders after the rebuild holds %v, want %v", got, sorted(valid1, valid2))
	}
	wantDeadLetters(t, store, map[string]string{
		invalid:      `contract orders/OrderPlaced v1 at "/order_id"`,
		unregistered: "has no contract version 2",
		plain:        `topic "orders" is strict`,
	})
}
