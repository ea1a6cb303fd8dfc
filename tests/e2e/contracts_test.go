package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/contract"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe"
	"github.com/deltabus/deltabus/tests/metricstest"
	"github.com/deltabus/deltabus/verify"
)

// Contracts of the end-to-end test: OrderPlaced v1 is a closed model;
// the breaking v2 adds a required property without a default (refused
// under BACKWARD), the compatible one an optional property (accepted: the
// model is closed, so no v1 document holds it).
const (
	placedV1       = `{"type":"object","additionalProperties":false,"required":["order_id"],"properties":{"order_id":{"type":"integer"},"amount":{"type":"number"}}}`
	placedV2Breaks = `{"type":"object","additionalProperties":false,"required":["order_id","currency"],"properties":{"order_id":{"type":"integer"},"amount":{"type":"number"},"currency":{"type":"string"}}}`
	placedV2       = `{"type":"object","additionalProperties":false,"required":["order_id"],"properties":{"order_id":{"type":"integer"},"amount":{"type":"number"},"currency":{"type":"string"}}}`
	thingV1        = `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`
	thingV2        = `{"type":"object","required":["n"],"properties":{"n":{"type":"integer"},"tag":{"type":"string"}}}`
)

// TestContractsEndToEnd is the "done when", against a real
// PostgreSQL and a real relay process: v1 registered; an incompatible v2
// refused with its differences and a compatible one accepted; the
// producer helper refuses an invalid event and its transaction rolls
// back; SQL-inserted violations and unregistered versions reach
// _dead_letter with their reasons while valid events of v1 and v2 reach
// the topic; a topic that holds on violations is held, says why in `relay
// status`, and resumes once the version it waits for is registered; an
// upcaster turns v1 events into v2 for a consumer; `relay consume
// --validate` passes what the relay let through; the relay counts its
// rejections.
func TestContractsEndToEnd(t *testing.T) {
	ctx := context.Background()
	db := setup(t)
	url, store := localStore(t)
	slot := fmt.Sprintf("contracts_%08x", rand.Uint32())
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + url, "DELTABUS_SLOT=" + slot}
	file, cli := fileWriter(t), cliRunner(t, env)

	// The registry.
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "1", "--schema", file("v1.json", placedV1))
	// BACKWARD, the default: v2 adding a required property is refused
	// with its difference; adding an optional one is accepted.
	out := cli(1, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", file("v2-breaks.json", placedV2Breaks))
	if !strings.Contains(out, "currency") || !strings.Contains(out, "incompatible under BACKWARD") {
		t.Fatalf("the breaking v2 was refused without its differences:\n%s", out)
	}
	cli(0, "contract", "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", file("v2.json", placedV2))
	cli(0, "contract", "register", "--topic", "held", "--type", "Thing", "--version", "1", "--schema", file("thing1.json", thingV1))
	cli(0, "contract", "policy", "--topic", "held", "--on-violation", "hold")

	// The producer helper refuses an invalid event; its transaction rolls
	// back with the state change it carried.
	conn := db.Conn(t)
	db.Exec(t, `CREATE TABLE orders (id int primary key)`)
	w := outbox.Writer{Contracts: contract.New(store, contract.Options{})}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, tx, outbox.NewEvent{Topic: "orders", Key: "1", Type: "OrderPlaced", SchemaVersion: 2, Payload: map[string]any{"order_id": 1, "currency": 978}})
	var v *contract.Violation
	if !errors.As(err, &v) || v.Version != 2 || v.Pointer != "/currency" {
		t.Fatalf("the producer helper wrote an invalid event: %v", err)
	}
	_ = tx.Rollback(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM outbox) + (SELECT count(*) FROM orders)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after the rolled-back transaction (%v)", n, err)
	}

	addr := freeAddr(t)
	p := startRelay(t, env, "--batch-max-delay", "20ms", "--contracts-poll", "500ms", "--metrics-addr", addr)
	waitSlotActive(t, db.DSN, slot, p)

	// Rows written by SQL (old services, other languages).
	insert := func(topic, typ string, version int, payload string) string {
		t.Helper()
		id := outbox.NewID()
		db.Exec(t, fmt.Sprintf(`INSERT INTO outbox (id, topic, key, type, schema_version, payload) VALUES ('%s', '%s', 'k', '%s', %d, '%s')`, id, topic, typ, version, payload))
		return id
	}
	valid1 := insert("orders", "OrderPlaced", 1, `{"order_id": 1, "amount": 9.5}`)
	invalid := insert("orders", "OrderPlaced", 1, `{"order_id": "two"}`)
	valid2 := insert("orders", "OrderPlaced", 2, `{"order_id": 3, "currency": "EUR"}`)
	unregistered := insert("orders", "OrderPlaced", 3, `{"order_id": 4}`)
	closed := insert("orders", "OrderPlaced", 1, `{"order_id": 5, "currency": "EUR"}`) // v1 is closed
	other := insert("orders", "Uncontracted", 1, `[1, 2]`)
	waitDrained(t, db.DSN, slot, time.Minute)
	if got := topicIDsSoFar(t, store, "orders"); !slices.Equal(got, []string{valid1, valid2, other}) {
		t.Fatalf("orders holds %v, want %v", got, []string{valid1, valid2, other})
	}
	reasons := deadLetters(t, env, url)
	for id, want := range map[string]string{
		invalid:      `contract orders/OrderPlaced v1 at "/order_id"`,
		unregistered: `has no contract version 3 (registered: 1, 2)`,
		closed:       `contract orders/OrderPlaced v1 at "/currency"`,
	} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("dead letter %s: reason %q, want %q", id, reasons[id], want)
		}
	}

	// A topic that holds on violations: v2 of Thing is not registered yet.
	held1 := insert("held", "Thing", 2, `{"n": 1, "tag": "new"}`)
	held2 := insert("held", "Thing", 1, `{"n": 2}`)
	after := insert("orders", "OrderPlaced", 1, `{"order_id": 6}`)
	eventually(t, time.Minute, "orders streams while held is held", func() bool {
		return slices.Contains(topicIDsSoFar(t, store, "orders"), after)
	})
	out = cli(0, "status", "--json", "--slot", slot)
	var st struct {
		Topics []struct{ Topic, Problem string } `json:"topics"`
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &st); err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	problem := ""
	for _, ts := range st.Topics {
		if ts.Topic == "held" {
			problem = ts.Problem
		}
	}
	if !strings.Contains(problem, "held since") || !strings.Contains(problem, "no contract version 2") {
		t.Fatalf("relay status does not say why held is held: %q\n%s", problem, out)
	}
	if ids := topicIDsSoFar(t, store, "held"); len(ids) != 0 {
		t.Fatalf("held topic received %v while held", ids)
	}
	cli(0, "contract", "mode", "--topic", "held", "--type", "Thing", "--compatibility", "NONE")
	cli(0, "contract", "register", "--topic", "held", "--type", "Thing", "--version", "2", "--schema", file("thing2.json", thingV2))
	eventually(t, time.Minute, "held resumes after v2 is registered", func() bool {
		return slices.Equal(topicIDsSoFar(t, store, "held"), []string{held1, held2})
	})
	if out := cli(0, "status", "--slot", slot); strings.Contains(out, "held since") {
		t.Fatalf("relay status still says held:\n%s", out)
	}

	// The relay counts its rejections per topic, type and version.
	mfs, err := metricstest.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := metricstest.Value(mfs["deltabus_contract_rejections_total"], "version", "1"); got < 2 {
		t.Errorf("deltabus_contract_rejections_total{version=1} = %v, want 2", got)
	}

	// An upcaster turns v1 events into v2 for a consumer.
	up := subscribe.NewUpcasters().Want("OrderPlaced", 2).Register("OrderPlaced", 1, func(p json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		m["currency"] = "EUR"
		return json.Marshal(m)
	})
	var got []subscribe.Event
	err = subscribe.Subscribe(ctx, store, "orders", "upcast", func(_ context.Context, b *subscribe.Batch) error {
		got = append(got, b.Events...)
		return nil
	}, subscribe.Options{Upcasters: up})
	if err != nil {
		t.Fatal(err)
	}
	v2 := w.Contracts.(*contract.Cache)
	for _, e := range got {
		if e.Type != "OrderPlaced" {
			continue
		}
		if e.SchemaVersion != 2 {
			t.Fatalf("event %s delivered at version %d", e.ID, e.SchemaVersion)
		}
		if viol, err := v2.Check(ctx, "orders", "OrderPlaced", 2, []byte(e.Payload)); viol != nil || err != nil {
			t.Fatalf("event %s (written as v%d) upcast to %s breaks v2: %v %v", e.ID, e.WriterVersion, e.Payload, viol, err)
		}
		if e.ID == valid1 && (e.WriterVersion != 1 || !strings.Contains(e.Payload, `"currency":"EUR"`)) {
			t.Fatalf("v1 event not upcast: %+v", e)
		}
	}

	// relay consume --validate passes what the relay let through.
	cli(0, "consume", "--topic", "orders", "--group", "validate", "--validate")

	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.tail())
	}
}

// fileWriter returns a function that writes a file in a directory of the
// test's and returns its path.
func fileWriter(t *testing.T) func(name, text string) string {
	dir := t.TempDir()
	return func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// cliRunner returns a function that runs `relay args...` with env, fails
// the test unless it exits with want, and returns what it printed.
func cliRunner(t *testing.T, env []string) func(want int, args ...string) string {
	return func(want int, args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t, env, args...)
		if code != want {
			t.Fatalf("relay %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, stdout, stderr)
		}
		return stdout + stderr
	}
}

// topicIDs returns a topic's event ids in log order (none when it has no
// table yet).
// topicIDsSoFar is nil while the topic has no table yet.
func topicIDsSoFar(t testing.TB, store storage.Store, topic string) []string {
	t.Helper()
	rows, err := verify.ReadTopic(context.Background(), store, topic)
	if err != nil {
		return nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// deadLetters reads _dead_letter with `relay tail`: event id -> reason.
func deadLetters(t testing.TB, env []string, storeURL string) map[string]string {
	t.Helper()
	code, stdout, stderr := runCLI(t, env, "tail", strings.TrimSuffix(storeURL, "/")+"/_dead_letter")
	if code != 0 {
		t.Fatalf("relay tail _dead_letter: exit %d: %s", code, stderr)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("tail line %q: %v", sc.Text(), err)
		}
		id, _ := row["event_id"].(string)
		reason, _ := row["dead_letter_reason"].(string)
		out[id] = reason
	}
	return out
}
