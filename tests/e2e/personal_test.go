package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/tests/duckdbtest"
	"github.com/deltabus/deltabus/tests/kmstest"
	"github.com/deltabus/deltabus/tests/pgtest"
)

// The contract of the personal-data test: two personal fields (one a
// Confluent tag), the subject's id in clear, keys pseudonymised.
const customerSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
  "x-deltabus-subject":"/customer_id","required":["customer_id"],
  "properties":{"customer_id":{"type":"string"},
    "email":{"type":"string","x-deltabus-pii":true},
    "profile":{"type":"object","properties":{"name":{"type":"string","confluent:tags":["PII"]},"tier":{"type":"string"}}}}}`

const piiSubjects = 8

func piiEmail(s, n int) string { return fmt.Sprintf("person%d.n%d@example.com", s, n) }
func piiName(s, n int) string  { return fmt.Sprintf("Secret Name %d-%d", s, n) }
func piiKey(s int) string      { return fmt.Sprintf("account-of-person%d@example.com", s) }

// TestPersonalDataErasure is issue 28's "done when", with a KEK file and
// with a KEK in a real KMS (local-kms): events for many subjects are
// bootstrapped, streamed and compacted; no file under the store holds a
// personal value in clear, read as bytes and through DuckDB; a consumer
// with the KEK reads them back; after `relay erase --subject S` S's fields
// are null (and listed as erased) for every reader, every event stays (count
// and order), and the other subjects still read back.
func TestPersonalDataErasure(t *testing.T) {
	t.Run("kek-file", func(t *testing.T) {
		kek := filepath.Join(t.TempDir(), "kek.json")
		if code, out, errOut := runCLI(t, nil, "keys", "init", "--kek-file", kek); code != 0 || !strings.Contains(out, "wrote KEK") {
			t.Fatalf("relay keys init: %d %s %s", code, out, errOut)
		}
		personalDataErasure(t, []string{"DELTABUS_KEK=file://" + kek}, false)
	})
	// The contract registered in the store's registry, as users do, not
	// given as a directory: the relay, the bootstrap, erase and consumers
	// read its marks from there.
	t.Run("kek-file-registry", func(t *testing.T) {
		kek := filepath.Join(t.TempDir(), "kek.json")
		if code, out, errOut := runCLI(t, nil, "keys", "init", "--kek-file", kek); code != 0 || !strings.Contains(out, "wrote KEK") {
			t.Fatalf("relay keys init: %d %s %s", code, out, errOut)
		}
		personalDataErasure(t, []string{"DELTABUS_KEK=file://" + kek}, true)
	})
	t.Run("local-kms", func(t *testing.T) {
		srv := kmstest.Get(t)
		personalDataErasure(t, append(srv.Env(), "DELTABUS_KEK="+srv.KEKURI()), false)
	})
}

type piiEvent struct {
	id          string
	subject, n  int
	email, name string
	hasPersonal bool
}

func personalDataErasure(t *testing.T, kekEnv []string, viaRegistry bool) {
	ctx := context.Background()
	db := pgtest.NewDB(t)
	dir := t.TempDir()
	storeURL := "file://" + dir
	schemas := t.TempDir()
	os.MkdirAll(filepath.Join(schemas, "customers", "updated"), 0o755)
	os.WriteFile(filepath.Join(schemas, "customers", "updated", "1.json"), []byte(customerSchema), 0o644)
	env := append([]string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_STORE=" + storeURL}, kekEnv...)
	if viaRegistry {
		registerCustomerContract(t, env, filepath.Join(schemas, "customers", "updated", "1.json"))
	} else {
		os.WriteFile(filepath.Join(schemas, "customers", "topic.json"), []byte(`{"pseudonymize_key":true}`), 0o644)
		env = append(env, "DELTABUS_PII_SCHEMAS="+schemas)
	}
	if code, out, errOut := runCLI(t, env, "migrate"); code != 0 || !strings.Contains(out, "created key tables") {
		t.Fatalf("relay migrate: %d\n%s%s", code, out, errOut)
	}
	conn := db.Conn(t)
	var evs []piiEvent
	write := func(from, to int) {
		for n := from; n < to; n++ {
			s := n % piiSubjects
			e := piiEvent{id: outbox.NewID(), subject: s, n: n, email: piiEmail(s, n), name: piiName(s, n), hasPersonal: true}
			payload := fmt.Sprintf(`{"customer_id":"c-%d","email":%q,"profile":{"name":%q,"tier":"gold"}}`, s, e.email, e.name)
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				return outbox.Write(ctx, tx, outbox.NewEvent{ID: e.id, Topic: "customers", Key: piiKey(s), Type: "updated", Payload: json.RawMessage(payload)},
					outbox.NewEvent{Topic: "orders", Key: "o", Type: "placed", Payload: json.RawMessage(`{"total":1}`)})
			})
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
	}
	write(0, 40) // before the first start: bootstrapped
	relay := startRelay(t, env, "--maintenance", "0")
	waitSlotActive(t, db.DSN, "deltabus", relay)
	write(40, 120) // streamed
	// A payload whose subject pointer finds nothing: a dead letter, redacted.
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return outbox.Write(ctx, tx, outbox.NewEvent{Topic: "customers", Key: piiKey(0), Type: "updated",
			Payload: json.RawMessage(fmt.Sprintf(`{"email":%q}`, "orphan.secret@example.com"))})
	})
	if err != nil {
		t.Fatal(err)
	}
	waitDrained(t, db.DSN, "deltabus", time.Minute)
	if code, out, errOut := runCLI(t, env, "compact"); code != 0 {
		t.Fatalf("relay compact: %d %s %s", code, out, errOut)
	}
	secrets := []string{"orphan.secret@example.com"}
	for _, e := range evs {
		secrets = append(secrets, e.email, e.name)
	}
	for s := range piiSubjects {
		secrets = append(secrets, piiKey(s))
	}
	noSecretsInStore(t, dir, secrets)
	if out := relay.output(); strings.Contains(out, "example.com") || strings.Contains(out, "Secret Name") {
		t.Fatalf("the relay's log holds a personal value:\n%s", out)
	}
	dls := consumeLines(t, env, "_dead_letter", "dl")
	if len(dls) != 1 || !strings.Contains(dls[0].Payload(), "x-deltabus-redacted") || !strings.HasPrefix(dls[0]["key"].(string), "pk1:") {
		t.Fatalf("dead letters: %v", dls)
	}

	// A consumer with the KEK reads every value back, in order.
	before := consumeLines(t, env, "customers", "with-kek")
	checkRevealed(t, before, evs, -1)
	// One without it sees envelopes.
	noKEK := withoutKEK(env)
	for _, l := range consumeLines(t, noKEK, "customers", "without-kek") {
		if !strings.Contains(l.Payload(), `"x-deltabus-enc":1`) {
			t.Fatalf("a consumer without the KEK got %s", l.Payload())
		}
	}

	// Erase subject 3: its keys, its outbox rows; every event stays.
	const erased = 3
	want := 0
	for _, e := range evs {
		if e.subject == erased {
			want++
		}
	}
	code, out, errOut := runCLI(t, env, "erase", "--subject", fmt.Sprintf("c-%d", erased))
	if code != 0 {
		t.Fatalf("relay erase: %d\n%s%s", code, out, errOut)
	}
	for _, line := range []string{fmt.Sprintf("topic customers: %d stored events made unreadable", want),
		fmt.Sprintf("outbox: %d rows of the subject deleted", want), "recorded in _erasures"} {
		if !strings.Contains(out, line) {
			t.Fatalf("relay erase said:\n%s\nwant a line with %q", out, line)
		}
	}
	var left int
	conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE payload->>'customer_id' = $1`, fmt.Sprintf("c-%d", erased)).Scan(&left)
	if left != 0 {
		t.Fatalf("%d outbox rows of the erased subject left", left)
	}
	after := consumeLines(t, env, "customers", "after-erasure")
	checkRevealed(t, after, evs, erased)
	if !slices.Equal(ids(before), ids(after)) {
		t.Fatal("the events after erasure are not the events before, in the same order")
	}
	// The store still holds no personal value, and the erased subject's
	// ciphertext opens for nobody: the old group re-reads from the start.
	noSecretsInStore(t, dir, secrets)
	if err := relay.stop(30 * time.Second); err != nil {
		t.Fatalf("relay stop: %v\n%s", err, relay.tail())
	}
}

// registerCustomerContract registers the personal-data test's contract
// in the store's registry and makes its topic pseudonymise keys.
func registerCustomerContract(t *testing.T, env []string, schema string) {
	t.Helper()
	if code, out, errOut := runCLI(t, env, "contract", "register", "--topic", "customers", "--type", "updated", "--version", "1", "--schema", schema); code != 0 {
		t.Fatalf("relay contract register: %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, env, "contract", "policy", "--topic", "customers", "--pseudonymize-key=true"); code != 0 || !strings.Contains(out, "pseudonymize-key") {
		t.Fatalf("relay contract policy: %d\n%s%s", code, out, errOut)
	}
}

// consumeLine is one line of relay consume.
type consumeLine map[string]any

func (l consumeLine) Payload() string {
	b, _ := json.Marshal(l["payload"])
	return string(b)
}

func consumeLines(t *testing.T, env []string, topic, group string) []consumeLine {
	t.Helper()
	code, out, errOut := runCLI(t, env, "consume", "--topic", topic, "--group", group)
	if code != 0 {
		t.Fatalf("relay consume %s: %d %s", topic, code, errOut)
	}
	var lines []consumeLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l consumeLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("consume line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

func ids(ls []consumeLine) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l["event_id"].(string))
	}
	return out
}

// checkRevealed checks that a consumer with the KEK got every event with
// its values, except the erased subject's (-1: none), whose fields are
// null and listed as erased.
func checkRevealed(t *testing.T, lines []consumeLine, evs []piiEvent, erased int) {
	t.Helper()
	if len(lines) != len(evs) {
		t.Fatalf("%d events read, %d written", len(lines), len(evs))
	}
	byID := map[string]piiEvent{}
	for _, e := range evs {
		byID[e.id] = e
	}
	for _, l := range lines {
		e, ok := byID[l["event_id"].(string)]
		if !ok {
			t.Fatalf("unknown event %v", l)
		}
		p := l["payload"].(map[string]any)
		if key := l["key"].(string); !strings.HasPrefix(key, "pk1:") {
			t.Fatalf("key not pseudonymised: %q", key)
		}
		if p["customer_id"] != fmt.Sprintf("c-%d", e.subject) || p["profile"].(map[string]any)["tier"] != "gold" {
			t.Fatalf("the payload's other fields changed: %v", p)
		}
		if e.subject == erased {
			er, _ := l["erased"].([]any)
			if p["email"] != nil || p["profile"].(map[string]any)["name"] != nil || len(er) != 2 {
				t.Fatalf("an erased subject's event reads %v (erased %v)", p, l["erased"])
			}
			continue
		}
		if p["email"] != e.email || p["profile"].(map[string]any)["name"] != e.name || l["erased"] != nil {
			t.Fatalf("event %s reads %v, want %s / %s", e.id, p, e.email, e.name)
		}
	}
}

func withoutKEK(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DELTABUS_KEK=") {
			out = append(out, kv)
		}
	}
	return out
}

// noSecretsInStore reads every file under dir as bytes, and every Parquet
// file and the Delta logs through DuckDB, and fails on any secret in clear.
func noSecretsInStore(t *testing.T, dir string, secrets []string) {
	t.Helper()
	parquet := noSecretBytes(t, dir, secrets)
	duckdbNoSecrets(t, dir, parquet, secrets)
}

// noSecretBytes reads every file under dir as bytes, fails on any secret
// in clear, and returns the Parquet files.
func noSecretBytes(t *testing.T, dir string, secrets []string) (parquet []string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q in clear", path, s)
			}
		}
		if strings.HasSuffix(path, ".parquet") {
			parquet = append(parquet, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return parquet
}

// duckdbNoSecrets reads the Parquet files and the Delta logs under dir
// through DuckDB and fails on any secret in clear.
func duckdbNoSecrets(t *testing.T, dir string, parquet, secrets []string) {
	t.Helper()
	pkg := duckdbtest.Dir(t)
	tmp := t.TempDir()
	os.WriteFile(filepath.Join(tmp, "files.txt"), []byte(strings.Join(parquet, "\n")), 0o600)
	os.WriteFile(filepath.Join(tmp, "secrets.txt"), []byte(strings.Join(secrets, "\n")), 0o600)
	out, err := exec.Command("node", "testdata/duckdb_pii.mjs", pkg, filepath.Join(tmp, "files.txt"), filepath.Join(tmp, "secrets.txt"),
		filepath.Join(dir, "*", "_delta_log", "*.json")).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("duckdb_pii.mjs: %v\n%s", err, stderr)
	}
	var res struct {
		Files, Rows, LogActions int
		Found                   []map[string]string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("duckdb_pii.mjs output %q: %v", out, err)
	}
	if len(res.Found) > 0 {
		t.Fatalf("DuckDB reads personal values in clear: %v", res.Found)
	}
	if res.Files == 0 || res.Rows == 0 || res.LogActions == 0 {
		t.Fatalf("DuckDB read nothing: %+v", res)
	}
	t.Logf("DuckDB read %d Parquet files (%d rows, compacted and removed ones included) and %d log actions: no personal value in clear", res.Files, res.Rows, res.LogActions)
}

// TestPersonalDataBadInput: a missing or wrong KEK, a key table that is
// missing or unreachable, and a schema that marks personal data without a
// subject each stop `relay run` with one line naming the fix (exit 2), and
// nothing is written to the store.
func TestPersonalDataBadInput(t *testing.T) {
	db := setup(t)
	schemas := t.TempDir()
	os.MkdirAll(filepath.Join(schemas, "customers", "updated"), 0o755)
	os.WriteFile(filepath.Join(schemas, "customers", "updated", "1.json"), []byte(customerSchema), 0o644)
	noSubject := t.TempDir()
	os.MkdirAll(filepath.Join(noSubject, "customers", "updated"), 0o755)
	os.WriteFile(filepath.Join(noSubject, "customers", "updated", "1.json"), []byte(`{"properties":{"email":{"x-deltabus-pii":true}}}`), 0o644)
	kek, other := filepath.Join(t.TempDir(), "kek.json"), filepath.Join(t.TempDir(), "other.json")
	for _, f := range []string{kek, other} {
		if code, _, errOut := runCLI(t, nil, "keys", "init", "--kek-file", f); code != 0 {
			t.Fatal(errOut)
		}
	}
	// The key tables exist, and their root is wrapped by kek.
	base := []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_PII_SCHEMAS=" + schemas}
	if code, _, errOut := runCLI(t, append(base, "DELTABUS_KEK=file://"+kek), "migrate"); code != 0 {
		t.Fatal(errOut)
	}
	if code, out, errOut := runCLI(t, append(base, "DELTABUS_KEK=file://"+kek), "consume", "--topic", "x", "--group", "g", "--store", "file://"+t.TempDir()); code == 0 ||
		!strings.Contains(errOut, "no root key yet") {
		t.Fatalf("a consumer before the relay made the root: %d %s %s", code, out, errOut)
	}
	bare := pgtest.NewDB(t)
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"no KEK", base, []string{"DELTABUS_KEK is not set", "relay keys init"}},
		{"KEK file missing", append(base, "DELTABUS_KEK=file:///nonexistent/kek.json"), []string{"cannot be read", "relay keys init"}},
		{"no subject", []string{"DELTABUS_SOURCE=" + db.DSN, "DELTABUS_PII_SCHEMAS=" + noSubject, "DELTABUS_KEK=file://" + kek}, []string{"names no data subject", "x-deltabus-subject"}},
		{"key table missing", append(base, "DELTABUS_KEK=file://"+kek, "DELTABUS_KEYS="+bare.DSN), []string{"key table", "run `relay migrate`"}},
		{"key table unreachable", append(base, "DELTABUS_KEK=file://"+kek, "DELTABUS_KEYS=postgres://postgres@127.0.0.1:1/x?connect_timeout=2"), []string{"unreachable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			code, out, errOut := runCLI(t, append(tc.env, "DELTABUS_STORE=file://"+dir), "run", "--metrics-addr", "")
			if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d, want 2 with one line:\n%s%s", code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Fatalf("%q lacks %q", errOut, w)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("the store was written: %v", entries)
			}
		})
	}
	// The root exists now (a relay made it): another KEK is refused by name.
	first := startRelay(t, append(base, "DELTABUS_KEK=file://"+kek, "DELTABUS_STORE=file://"+t.TempDir()))
	waitSlotActive(t, db.DSN, "deltabus", first)
	first.stop(30 * time.Second)
	dir := t.TempDir()
	code, _, errOut := runCLI(t, append(base, "DELTABUS_KEK=file://"+other, "DELTABUS_STORE=file://"+dir), "run", "--metrics-addr", "", "--slot", "other")
	if code != 2 || !strings.Contains(errOut, "cannot decrypt the key table's root key") || !strings.Contains(errOut, "set DELTABUS_KEK to that KEK") {
		t.Fatalf("wrong KEK: %d %s", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the store was written with a wrong KEK: %v", entries)
	}
}
