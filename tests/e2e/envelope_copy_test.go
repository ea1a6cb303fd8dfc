package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/outbox"
)

// TestCopiedEnvelopeDoesNotStopConsumers: a producer that can read a topic
// (no KEK) copies a real envelope into new events: into a field the
// contract does not mark, and into one it marks. A consumer group that
// decrypts (relay consume with the KEK, the subscribe package's path)
// reads past both, gets each producer's payload as written, and its
// checkpoint moves past them; the original event still decrypts.
func TestCopiedEnvelopeDoesNotStopConsumers(t *testing.T) {
	ctx := context.Background()
	db := setup(t)
	dir := t.TempDir()
	schemas := t.TempDir()
	os.MkdirAll(filepath.Join(schemas, "customers", "updated"), 0o755)
	os.WriteFile(filepath.Join(schemas, "customers", "updated", "1.json"), []byte(customerSchema), 0o644)
	kek := filepath.Join(t.TempDir(), "kek.json")
	if code, out, errOut := runCLI(t, nil, "keys", "init", "--kek-file", kek); code != 0 {
		t.Fatalf("relay keys init: %d %s %s", code, out, errOut)
	}
	env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + dir, "DELTABUS_PII_SCHEMAS=" + schemas, "DELTABUS_KEK=file://" + kek}
	if code, out, errOut := runCLI(t, env, "migrate"); code != 0 {
		t.Fatalf("relay migrate: %d\n%s%s", code, out, errOut)
	}
	// A json (or text) payload column keeps a payload's bytes as written,
	// so a copied envelope is stored byte for byte (jsonb would reorder
	// its members).
	db.Exec(t, "ALTER TABLE outbox ALTER COLUMN payload TYPE json")
	conn := db.Conn(t)
	write := func(payload string) string { // by SQL, as a producer in any language writes
		t.Helper()
		id := outbox.NewID()
		if _, err := conn.Exec(ctx, "INSERT INTO outbox (id, topic, key, type, payload) VALUES ($1, 'customers', 'k', 'updated', $2::json)", id, payload); err != nil {
			t.Fatal(err)
		}
		return id
	}
	relay := startRelay(t, env, "--maintenance", "0")
	waitSlotActive(t, db.DSN, "deltabus", relay)
	orig := write(`{"customer_id":"c-1","email":"ada@example.com","profile":{"name":"Ada","tier":"gold"}}`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)

	// The producer reads the topic without the KEK and copies the
	// envelope's bytes as they are stored.
	code, out, errOut := runCLI(t, withoutKEK(env), "consume", "--topic", "customers", "--group", "spy")
	var spied struct {
		Payload map[string]json.RawMessage `json:"payload"`
	}
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &spied) != nil {
		t.Fatalf("relay consume without the KEK: %d\n%s%s", code, out, errOut)
	}
	envelope := spied.Payload["email"]
	if !strings.HasPrefix(string(envelope), `{"x-deltabus-enc":1,`) {
		t.Fatalf("no envelope in %s", out)
	}
	unmarked := fmt.Sprintf(`{"customer_id":"c-2","email":"bob@example.com","note":%s}`, envelope)
	marked := fmt.Sprintf(`{"customer_id":"c-3","email":%s}`, envelope)
	copies := []string{write(unmarked), write(marked)}
	after := write(`{"customer_id":"c-4","email":"eve@example.com"}`)
	waitDrained(t, db.DSN, "deltabus", time.Minute)

	lines := consumeLines(t, env, "customers", "billing") // exits 0: the group is not stuck
	if got := ids(lines); strings.Join(got, ",") != strings.Join(append(append([]string{orig}, copies...), after), ",") {
		t.Fatalf("read %v", got)
	}
	if p := lines[0]["payload"].(map[string]any); p["email"] != "ada@example.com" {
		t.Fatalf("the original event reads %v", p)
	}
	for i, want := range []string{unmarked, marked} {
		l := lines[1+i]
		var got, exp any
		json.Unmarshal([]byte(l.Payload()), &got)
		json.Unmarshal([]byte(want), &exp)
		gb, _ := json.Marshal(got)
		eb, _ := json.Marshal(exp)
		if string(gb) != string(eb) || l["unreadable"] != nil || l["erased"] != nil {
			t.Fatalf("copy %d reads %s (unreadable %v, erased %v), want the producer's %s", i, gb, l["unreadable"], l["erased"], eb)
		}
	}
	if p := lines[3]["payload"].(map[string]any); p["email"] != "eve@example.com" {
		t.Fatalf("the event after the copies reads %v", p)
	}
	// The checkpoint is past them: nothing is read again.
	if again := consumeLines(t, env, "customers", "billing"); len(again) != 0 {
		t.Fatalf("the group read %d events again", len(again))
	}
	if err := relay.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}
