package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/metricstest"
)

// TestBreakerHoldsAFloodAndIsReleased: a producer starts writing events
// of a version that has no contract, 150 in one transaction and 60 more
// in small ones. The topic's circuit breaker (20% of a minute's rows, at
// least 20) trips: the topic is held instead of filling _dead_letter
// (none of the flood is there), the relay says why in `relay status` and
// a metric, stays ready, and another topic streams on. The hold survives
// a SIGKILL. Once the version is registered, `relay deadletter release`
// resumes the topic: every held event reaches it once, in commit order,
// and none reaches _dead_letter. A second flood of events that still
// fail, released with --disarm, goes to _dead_letter as before.
func TestBreakerHoldsAFloodAndIsReleased(t *testing.T) {
	ctx := context.Background()
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("breaker_%08x", rand.Uint32())
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}
	file, cli := fileWriter(t), cliRunner(t, env)
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "1", "--schema", file("v1.json", placedV1))
	addr := freeAddr(t)
	args := []string{"--batch-max-delay", "20ms", "--contracts-poll", "500ms", "--breaker-min", "20", "--metrics-addr", addr}
	p := startRelay(t, env, args...)
	waitSlotActive(t, db.DSN, slot, p)

	// insert writes n events of version in one transaction; with currency
	// (which the closed v1 refuses) unless plain.
	insert := func(topic string, version, n int, plain ...bool) []string {
		t.Helper()
		payload := "json_build_object('order_id', g, 'currency', 'EUR')"
		if len(plain) > 0 {
			payload = "json_build_object('order_id', g)"
		}
		return insertedIDs(t, db, fmt.Sprintf(`INSERT INTO outbox (topic, key, type, schema_version, payload)
			SELECT '%s', 'k' || g, 'OrderPlaced', %d, %s FROM generate_series(1, %d) g RETURNING id::text`, topic, version, payload, n))
	}
	valid := func(n int) []string { return insert("orders", 1, n, true) }
	insert("orders", 1, 10) // a currency breaks the closed v1: a few refusals, below the breaker's minimum
	before := valid(10)
	waitDrained(t, db.DSN, slot, time.Minute)
	deadBefore := len(storedDeadLetters(t, store))
	if got := topicIDsSoFar(t, store, "orders"); !slices.Equal(got, before) || deadBefore != 10 {
		t.Fatalf("before the flood: orders %d events, _dead_letter %d rows; want 10 and 10", len(before), deadBefore)
	}

	// The flood: version 2 has no contract yet.
	flood := insert("orders", 2, 150)
	for range 6 {
		flood = append(flood, insert("orders", 2, 10)...)
	}
	other := insert("payments", 1, 5)
	eventually(t, time.Minute, "payments streams while orders is held", func() bool {
		return len(topicIDsSoFar(t, store, "payments")) == 5
	})
	eventually(t, time.Minute, "orders is held by its breaker", func() bool {
		return heldState(ctx, store, "orders").Paused == catalog.HoldDeadLetterRate
	})
	st := heldState(ctx, store, "orders")
	if !strings.Contains(st.Last, "circuit breaker") || !strings.Contains(st.Last, "no contract version 2") {
		t.Fatalf("the hold does not say why: %+v", st)
	}
	if got := len(storedDeadLetters(t, store)); got != deadBefore {
		t.Fatalf("_dead_letter went from %d to %d rows: the breaker let the flood in", deadBefore, got)
	}
	if got := topicIDsSoFar(t, store, "orders"); len(got) != 10 {
		t.Fatalf("orders holds %d events while held", len(got))
	}
	if out := cli(0, "status", "--slot", slot); !strings.Contains(out, "circuit breaker") {
		t.Fatalf("relay status does not show the breaker's hold:\n%s", out)
	}
	mfs, err := metricstest.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := metricstest.Value(mfs["deltabus_breaker_trips_total"], "topic", "orders"); got < 1 {
		t.Fatalf("deltabus_breaker_trips_total{topic=orders} = %v", got)
	}
	if resp, err := http.Get("http://" + addr + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz while a topic is held by its breaker: %v %v", resp, err)
	}

	// The hold survives a crash: nothing of the flood is dead-lettered.
	p.kill()
	p = startRelay(t, env, args...)
	waitSlotActive(t, db.DSN, slot, p)
	held := valid(5) // valid events after the flood wait with it
	time.Sleep(2 * time.Second)
	if got := len(storedDeadLetters(t, store)); got != deadBefore {
		t.Fatalf("after a restart _dead_letter went from %d to %d rows", deadBefore, got)
	}
	if heldState(ctx, store, "orders").Paused != catalog.HoldDeadLetterRate {
		t.Fatal("the breaker's hold did not survive a restart")
	}

	// The fix, then the release: the held events arrive, once, in order.
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", file("v2.json", placedV2))
	cli(0, "deadletter", "release", "--topic", "orders", "--actor", "oncall")
	want := slices.Concat(before, flood, held)
	eventually(t, time.Minute, "orders receives the held events", func() bool {
		return len(topicIDsSoFar(t, store, "orders")) >= len(want)
	})
	if got := topicIDsSoFar(t, store, "orders"); !slices.Equal(got, want) {
		t.Fatalf("orders after the release: %d events, want %d in commit order", len(got), len(want))
	}
	if st := heldState(ctx, store, "orders"); st.Paused != "" || !strings.Contains(st.Last, "released by oncall") {
		t.Fatalf("state after the release: %+v", st)
	}
	if got := len(storedDeadLetters(t, store)); got != deadBefore {
		t.Fatalf("_dead_letter went from %d to %d rows after the release", deadBefore, got)
	}
	checkOnce(t, store, "payments", other)

	// Events that still fail, released with --disarm, are dead-lettered.
	bad := insert("orders", 3, 60)
	eventually(t, time.Minute, "orders is held again", func() bool {
		return heldState(ctx, store, "orders").Paused == catalog.HoldDeadLetterRate
	})
	cli(0, "deadletter", "release", "--topic", "orders", "--disarm", "1h")
	eventually(t, time.Minute, "the failing events reach _dead_letter", func() bool {
		dl := storedDeadLetters(t, store)
		return !slices.ContainsFunc(bad, func(id string) bool { _, ok := dl[id]; return !ok })
	})
	dl := storedDeadLetters(t, store)
	if len(dl) != deadBefore+len(bad) {
		t.Fatalf("_dead_letter holds %d rows, want %d", len(dl), deadBefore+len(bad))
	}
	for _, id := range bad {
		if !strings.Contains(dl[id].Reason, "no contract version 3") || dl[id].Topic != "orders" {
			t.Fatalf("dead letter %s: %+v", id, dl[id])
		}
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

// TestBreakerHoldInsideABatch: the breaker trips while the open batch (a
// long batch delay) holds the topic's earlier events and the dead letters
// of earlier refusals. They commit below the hold, so once the cause is
// fixed and the topic released, every event is in the topic or in
// _dead_letter, exactly once.
func TestBreakerHoldInsideABatch(t *testing.T) {
	ctx := context.Background()
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("breakerb_%08x", rand.Uint32())
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}
	file, cli := fileWriter(t), cliRunner(t, env)
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "1", "--schema", file("v1.json", placedV1))
	p := startRelay(t, env, "--batch-max-delay", "3s", "--contracts-poll", "500ms", "--breaker-min", "20")
	waitSlotActive(t, db.DSN, slot, p)
	conn := db.Conn(t)
	one := func(version int, payload string) string {
		t.Helper()
		id := outbox.NewID()
		if _, err := conn.Exec(ctx, `INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ($1, 'orders', 'k', 'OrderPlaced', $2, $3)`, id, version, payload); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var good, bad []string
	for i := range 5 {
		good = append(good, one(1, fmt.Sprintf(`{"order_id": %d}`, i)))
	}
	for i := range 60 { // one transaction each
		bad = append(bad, one(2, fmt.Sprintf(`{"order_id": %d, "currency": "EUR"}`, i)))
	}
	eventually(t, time.Minute, "orders is held by its breaker", func() bool {
		return heldState(ctx, store, "orders").Paused == catalog.HoldDeadLetterRate
	})
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", file("v2.json", placedV2))
	cli(0, "deadletter", "release", "--topic", "orders")
	eventually(t, time.Minute, "orders is released", func() bool {
		return heldState(ctx, store, "orders").Paused == ""
	})
	waitDrained(t, db.DSN, slot, time.Minute)
	inTopic := map[string]int{}
	for _, id := range topicIDsSoFar(t, store, "orders") {
		inTopic[id]++
	}
	dead := storedDeadLetters(t, store)
	for _, id := range good {
		if inTopic[id] != 1 {
			t.Fatalf("valid event %s is in orders %d times", id, inTopic[id])
		}
	}
	deadN := 0
	for _, id := range bad {
		_, isDead := dead[id]
		if isDead {
			deadN++
		}
		if n := inTopic[id]; n+btoi(isDead) != 1 {
			t.Fatalf("event %s: %d times in orders, dead-lettered %v; want exactly one of them", id, n, isDead)
		}
	}
	if deadN >= 60 || deadN < 19 {
		t.Fatalf("%d of the flood's 60 rows were dead-lettered: the breaker should have held the rest", deadN)
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
