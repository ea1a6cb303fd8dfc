package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
)

// writeCustomer commits one event of the personal-data test's contract
// (subject c-S) and one of a topic without contracts.
func writeCustomer(t *testing.T, conn *pgx.Conn, typ string, version int32, s, n int) {
	t.Helper()
	ctx := context.Background()
	payload := fmt.Sprintf(`{"customer_id":"c-%d","email":%q,"profile":{"name":%q,"tier":"gold"}}`, s, piiEmail(s, n), piiName(s, n))
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return outbox.Write(ctx, tx, outbox.NewEvent{Topic: "customers", Key: "k", Type: typ, SchemaVersion: version, Payload: json.RawMessage(payload)},
			outbox.NewEvent{Topic: "orders", Key: "o", Type: "placed", Payload: json.RawMessage(`{"total":1}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func register(t *testing.T, env []string, typ string, version int, schema string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "schema.json")
	os.WriteFile(f, []byte(schema), 0o644)
	if code, out, errOut := runCLI(t, env, "contract", "register", "--topic", "customers", "--type", typ, "--version", fmt.Sprint(version), "--schema", f); code != 0 {
		t.Fatalf("relay contract register %s v%d: %d\n%s%s", typ, version, code, out, errOut)
	}
}

// TestPersonalContractRegisteredWhileRunning: contracts that mark personal
// data, registered while the relay streams, protect the next events at
// once — a new type's first event and a new version's — and, for a relay
// started without a KEK, make the stream wait (not ready, saying why)
// instead of writing them in clear.
func TestPersonalContractRegisteredWhileRunning(t *testing.T) {
	kek := filepath.Join(t.TempDir(), "kek.json")
	if code, _, errOut := runCLI(t, nil, "keys", "init", "--kek-file", kek); code != 0 {
		t.Fatal(errOut)
	}
	t.Run("with-kek", func(t *testing.T) {
		db := setup(t)
		dir := t.TempDir()
		env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + dir, "DELTABUS_KEK=file://" + kek}
		if code, out, errOut := runCLI(t, env, "migrate"); code != 0 {
			t.Fatalf("relay migrate: %d %s %s", code, out, errOut)
		}
		relay := startRelay(t, env, "--maintenance", "0")
		waitSlotActive(t, db.DSN, "deltabus", relay)
		conn := db.Conn(t)
		writeCustomer(t, conn, "plain", 1, 9, 0) // a type without a contract: in clear, as it should be
		waitDrained(t, db.DSN, "deltabus", time.Minute)

		register(t, env, "updated", 1, customerSchema) // a type the relay has not met
		writeCustomer(t, conn, "updated", 1, 1, 1)
		v2 := strings.Replace(customerSchema, `"tier":{"type":"string"}`, `"tier":{"type":["string","null"]}`, 1) // widened: BACKWARD
		register(t, env, "updated", 2, v2)                                                                        // a version the relay has not met
		writeCustomer(t, conn, "updated", 2, 2, 2)
		waitDrained(t, db.DSN, "deltabus", time.Minute)

		noSecretsInStore(t, dir, []string{piiEmail(1, 1), piiName(1, 1), piiEmail(2, 2), piiName(2, 2)})
		lines := consumeLines(t, env, "customers", "g")
		if len(lines) != 3 {
			t.Fatalf("customers holds %d events, want 3: %v", len(lines), lines)
		}
		if !strings.Contains(lines[0].Payload(), piiEmail(9, 0)) {
			t.Fatalf("the event without a contract: %s", lines[0].Payload())
		}
		for i, want := range []string{piiEmail(1, 1), piiEmail(2, 2)} {
			if p := lines[i+1].Payload(); !strings.Contains(p, want) {
				t.Fatalf("a consumer with the KEK reads %s, want %s in it", p, want)
			}
		}
		if err := relay.stop(30 * time.Second); err != nil {
			t.Fatalf("relay stop: %v\n%s", err, relay.tail())
		}
	})
	t.Run("without-kek", func(t *testing.T) {
		db := setup(t)
		dir := t.TempDir()
		env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + dir}
		if code, out, errOut := runCLI(t, env, "migrate"); code != 0 {
			t.Fatalf("relay migrate: %d %s %s", code, out, errOut)
		}
		addr := freeAddr(t)
		relay := startRelay(t, env, "--maintenance", "0", "--metrics-addr", addr)
		waitSlotActive(t, db.DSN, "deltabus", relay)
		register(t, env, "updated", 1, customerSchema)
		writeCustomer(t, db.Conn(t), "updated", 1, 1, 1)
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(relay.output(), "DELTABUS_KEK is not set") {
			if time.Now().After(deadline) {
				t.Fatalf("the relay did not say why it waits:\n%s", relay.tail())
			}
			time.Sleep(200 * time.Millisecond)
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("/readyz answers 200 while personal data waits for a KEK")
		}
		noSecretBytes(t, dir, []string{piiEmail(1, 1), piiName(1, 1)}) // nothing was written: no table for DuckDB to read
		if err := relay.stop(30 * time.Second); err != nil {
			t.Fatalf("relay stop: %v\n%s", err, relay.tail())
		}
		if out := relay.output(); strings.Contains(out, "example.com") || strings.Contains(out, "Secret Name") {
			t.Fatalf("the relay's log holds a personal value:\n%s", out)
		}
	})
	t.Run("refused-at-start", func(t *testing.T) {
		db := setup(t)
		dir := t.TempDir()
		env := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=file://" + dir}
		register(t, env, "updated", 1, customerSchema)
		before := storeFiles(t, dir)
		code, out, errOut := runCLI(t, env, "run", "--metrics-addr", "")
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "DELTABUS_KEK is not set") ||
			!strings.Contains(errOut, "customers type updated version 1") {
			t.Fatalf("exit %d, want 2 with one line naming the contract and the fix:\n%s%s", code, out, errOut)
		}
		if after := storeFiles(t, dir); after != before {
			t.Fatalf("the store was written:\n%s\nwant\n%s", after, before)
		}
	})
}

// storeFiles lists the files under dir, one per line.
func storeFiles(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return strings.Join(out, "\n")
}
