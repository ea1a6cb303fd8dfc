package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/unitycatalog/uctest"
	"github.com/deltabus/deltabus/verify"
)

const ucToken = "uc-e2e-token-s3cr3t"

// streamer inserts one event per transaction into topic until stopped and
// returns how many it wrote.
func streamer(t *testing.T, dsn, topic string) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			// Each transaction runs to its end, not cut by stop: one cancelled
			// mid-COMMIT may have committed with an error returned, and n
			// would miss it. Its own deadline keeps a silent server from
			// hanging the test.
			ev := outbox.NewEvent{Topic: topic, Key: fmt.Sprintf("k%d", n%7), Type: "Streamed", Payload: map[string]int{"n": n}}
			txCtx, txCancel := context.WithTimeout(context.Background(), 30*time.Second)
			if pgx.BeginFunc(txCtx, conn, func(tx pgx.Tx) error { return outbox.Write(txCtx, tx, ev) }) == nil {
				n++
			}
			txCancel()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() int { cancel(); wg.Wait(); return n }
}

func distinctEvents(t *testing.T, root storage.Store, topic string) int {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), root, topic)
	if err != nil {
		t.Fatalf("read %s: %v", topic, err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.ID] {
			t.Fatalf("topic %s holds %s twice", topic, r.ID)
		}
		seen[r.ID] = true
	}
	return len(rows)
}

// TestGovernedTopics is issue 29's end-to-end: a topic described while the
// relay streams into it (the metaData commit under the relay is followed,
// nothing is held, lost or doubled); relay run registering topics in
// Unity Catalog by itself, a new one within seconds; relay catalog sync
// twice (the second a no-op); an outage of the catalog that the stream
// does not notice, shown by relay status and logged once; every request
// and answer valid against the vendored API description; the token
// printed nowhere.
func TestGovernedTopics(t *testing.T) {
	db := setup(t)
	url, store := localStore(t)
	uc := uctest.Start(t, uctest.Options{Token: ucToken})
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('orders', 'o0', 'Created', '{}'), ('payments', 'p0', 'Paid', '{}')`)
	addr := freeAddr(t)
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url,
		"DELTABUS_UNITY_CATALOG=" + uc.URL, "DELTABUS_UNITY_CATALOG_CATALOG=lake", "DELTABUS_UNITY_CATALOG_SCHEMA=events",
		"DELTABUS_UNITY_CATALOG_TOKEN=" + ucToken}
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--metrics-addr", addr)
	waitSlotActive(t, db.DSN, "deltabus", p)
	registered := func(names ...string) func() bool {
		return func() bool {
			have := strings.Join(uc.Tables(), " ")
			for _, n := range names {
				if !strings.Contains(have, "lake.events."+n) {
					return false
				}
			}
			return true
		}
	}
	eventually(t, 30*time.Second, "the relay registers the bootstrapped topics", registered("orders", "payments"))

	// Describe orders while events stream into it.
	stop := streamer(t, db.DSN, "orders")
	time.Sleep(300 * time.Millisecond)
	out, errOut, code := runRelayCmd(t, env, "topics", "describe", "--topic", "orders", "--owner", "team-checkout",
		"--description", "Every order's lifecycle, authoritative.")
	if code != 0 || !strings.Contains(out, "carries the description and column comments from version") {
		t.Fatalf("describe: %d %s %s", code, out, errOut)
	}
	time.Sleep(500 * time.Millisecond)
	written := stop()
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if got := distinctEvents(t, store, "orders"); got != written+1 {
		t.Fatalf("orders holds %d events, %d were written", got, written+1)
	}
	if strings.Contains(p.output(), "held") || strings.Contains(p.output(), "incompatible") {
		t.Fatalf("the relay held a topic after the describe:\n%s", p.tail())
	}
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(store, "orders"), -1)
	if err != nil || snap.Metadata.Description == nil || *snap.Metadata.Description != "Every order's lifecycle, authoritative." ||
		!strings.Contains(snap.Metadata.SchemaString, `"comment":"Unique id of the event`) {
		t.Fatalf("orders metaData after describe: %+v %v", snap.Metadata, err)
	}
	out, _, code = runRelayCmd(t, env, "topics", "--json")
	var listed struct {
		Topics []struct{ Topic, Owner, Description string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Topics) != 2 || listed.Topics[0].Owner != "team-checkout" {
		t.Fatalf("topics --json: %d %s", code, out)
	}

	// A new topic is registered by the relay itself, within seconds.
	began := time.Now()
	db.Exec(t, `INSERT INTO outbox (topic, key, type, payload) VALUES ('tenants', 't1', 'Joined', '{}')`)
	eventually(t, 20*time.Second, "the relay registers a new topic", registered("tenants"))
	t.Logf("new topic registered %v after its first event", time.Since(began).Round(time.Millisecond))

	// relay catalog sync twice: the first brings orders' description up
	// to date, the second writes nothing.
	sync := []string{"catalog", "sync", "--unity-catalog", uc.URL, "--catalog", "lake", "--schema", "events"}
	out, errOut, code = runRelayCmd(t, env, sync...)
	if code != 0 || !strings.Contains(out, "replaced lake.events.orders (comment, properties changed)") {
		t.Fatalf("first sync: %d %s %s", code, out, errOut)
	}
	before := len(uc.Calls())
	out, errOut, code = runRelayCmd(t, env, sync...)
	if code != 0 || !strings.Contains(out, "0 created, 0 replaced, 3 unchanged") {
		t.Fatalf("second sync: %d %s %s", code, out, errOut)
	}
	for _, c := range uc.Calls()[before:] {
		if c.Method != http.MethodGet {
			t.Fatalf("the second sync wrote: %+v", c)
		}
	}
	if tbl, _ := uc.Table("lake.events.orders"); tbl["comment"] != "Every order's lifecycle, authoritative." {
		t.Fatalf("orders in Unity Catalog: %v", tbl)
	}

	// An outage of the catalog: the stream does not notice.
	uc.SetDown(true)
	stop = streamer(t, db.DSN, "quality")
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the relay is not ready during the catalog outage: %v %v", resp, err)
		}
		resp.Body.Close()
		time.Sleep(500 * time.Millisecond)
	}
	written = stop()
	drained := time.Now()
	waitDrained(t, db.DSN, "deltabus", 20*time.Second)
	if d := time.Since(drained); d > 5*time.Second {
		t.Fatalf("draining took %v during the catalog outage", d)
	}
	if got := distinctEvents(t, store, "quality"); got != written {
		t.Fatalf("quality holds %d events during the outage, %d were written", got, written)
	}
	eventually(t, 20*time.Second, "relay status shows the failure", func() bool {
		out, _, _ := runRelayCmd(t, env, "status")
		return strings.Contains(out, "FAILING since") && strings.Contains(out, "503 UNAVAILABLE")
	})
	if n := strings.Count(p.output(), "Unity Catalog registration failed"); n != 1 {
		t.Fatalf("the failure was logged %d times, want once:\n%s", n, p.tail())
	}
	uc.SetDown(false)
	eventually(t, time.Minute, "the new topic is registered after the outage", registered("quality"))
	eventually(t, 20*time.Second, "relay status shows recovery", func() bool {
		out, _, _ := runRelayCmd(t, env, "status")
		return strings.Contains(out, ": registering; 4 topics registered, 0 pending")
	})
	statusOut, _, _ := runRelayCmd(t, env, "status", "--json")
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
	for what, s := range map[string]string{"relay log": p.output(), "status": statusOut, "sync": out} {
		if strings.Contains(s, ucToken) {
			t.Errorf("the %s prints the Unity Catalog token", what)
		}
	}
}
