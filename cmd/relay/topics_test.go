package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/grouptest"
	"github.com/deltabus/deltabus/unitycatalog/uctest"
)

func runWithEnv(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	code := runCLI(context.Background(), env, args)
	return code, out.String(), errOut.String()
}

// refusedWhole checks that args are refused as bad input: exit 2, one line
// on stderr, nothing on stdout.
func refusedWhole(t *testing.T, vars map[string]string, args ...string) {
	t.Helper()
	code, out, errOut := runWithEnv(t, vars, args...)
	if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "relay: ") {
		t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
}

// nothingWritten checks that dir holds no file.
func nothingWritten(t *testing.T, dir string) {
	t.Helper()
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			t.Errorf("bad input wrote %s", p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestTopicsDescribeBadInput: bad input is one line, exit 2, nothing
// written.
func TestTopicsDescribeBadInput(t *testing.T) {
	dir := t.TempDir()
	vars := map[string]string{"DELTABUS_STORE": "file://" + dir}
	for _, args := range [][]string{
		{"topics", "describe", "--owner", "x"},
		{"topics", "describe", "--topic", "orders"},
		{"topics", "describe", "--topic", "../etc", "--owner", "x"},
		{"topics", "describe", "--topic", "orders", "--description", "bell\a"},
		{"topics", "describe", "--topic", "orders", "--owner", strings.Repeat("o", 300)},
		{"catalog", "sync", "--unity-catalog", "http://127.0.0.1:1", "--catalog", "my.lake", "--schema", "s"},
		{"catalog", "sync", "--unity-catalog", "ftp://uc", "--catalog", "lake", "--schema", "s"},
	} {
		refusedWhole(t, vars, args...)
	}
	nothingWritten(t, dir)
}

// TestTopicsDescribeBeforeTheTable: a topic may be described before its
// first event; relay topics shows it; relay catalog sync skips it (no
// table yet) and never prints the token, even when it is refused.
func TestTopicsDescribeBeforeTheTable(t *testing.T) {
	srv := uctest.Start(t, uctest.Options{Token: "right-token"})
	vars := map[string]string{"DELTABUS_STORE": "file://" + t.TempDir(), envUCToken: "wrong-token-value"}
	code, out, errOut := runWithEnv(t, vars, "topics", "describe", "--topic", "orders", "--owner", "team-checkout", "--description", "Orders.")
	if code != 0 || !strings.Contains(out, "it has no table yet") {
		t.Fatalf("describe: %d %q %q", code, out, errOut)
	}
	code, out, _ = runWithEnv(t, vars, "topics")
	if code != 0 || !strings.Contains(out, "team-checkout") || !strings.Contains(out, "[no table yet]") {
		t.Fatalf("topics before any table: %d %q", code, out)
	}
	code, out, errOut = runWithEnv(t, vars, "catalog", "sync", "--unity-catalog", srv.URL, "--catalog", "lake", "--schema", "events")
	if code != exitFailure || !strings.Contains(errOut, "401 UNAUTHENTICATED") || strings.Contains(out+errOut, "wrong-token-value") {
		t.Fatalf("sync with a wrong token: %d %q %q", code, out, errOut)
	}
	vars[envUCToken] = "right-token"
	code, out, errOut = runWithEnv(t, vars, "catalog", "sync", "--unity-catalog", srv.URL, "--catalog", "lake", "--schema", "events")
	if code != 0 || !strings.Contains(out, "created catalog lake") || !strings.Contains(out, "0 created, 0 replaced, 0 unchanged, 0 differing, 0 conflicts, 1 skipped") {
		t.Fatalf("sync of a store without tables: %d %q %q", code, out, errOut)
	}
}

// TestTopicsListPersonalColumns: relay topics lists each topic's personal
// columns from --pii-schemas (DELTABUS_PII_SCHEMAS), in text and JSON; a
// bad schema directory is one line, exit 2.
func TestTopicsListPersonalColumns(t *testing.T) {
	schemas := t.TempDir()
	if err := os.MkdirAll(filepath.Join(schemas, "orders", "OrderCreated"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := `{"x-deltabus-subject":"/customer/id","properties":{"customer":{"properties":{"id":{"type":"string"},` +
		`"email":{"type":"string","x-deltabus-pii":true},"name":{"confluent:tags":["PII"]}}}}}`
	if err := os.WriteFile(filepath.Join(schemas, "orders", "OrderCreated", "1.json"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"DELTABUS_STORE": "file://" + t.TempDir()}
	if code, out, errOut := runWithEnv(t, vars, "topics", "describe", "--topic", "orders", "--owner", "team-checkout"); code != 0 {
		t.Fatalf("describe: %d %q %q", code, out, errOut)
	}
	want := "payload/customer/email (OrderCreated v1), payload/customer/name (OrderCreated v1)"
	code, out, errOut := runWithEnv(t, vars, "topics", "--pii-schemas", schemas)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("topics --pii-schemas: %d %q %q", code, out, errOut)
	}
	vars["DELTABUS_PII_SCHEMAS"] = schemas
	code, out, errOut = runWithEnv(t, vars, "topics", "--json")
	if code != 0 || !strings.Contains(out, `"pointer": "/customer/email"`) || !strings.Contains(out, `"column": "payload"`) {
		t.Fatalf("topics --json: %d %q %q", code, out, errOut)
	}
	delete(vars, "DELTABUS_PII_SCHEMAS")
	if code, out, _ = runWithEnv(t, vars, "topics"); code != 0 || strings.Contains(out, "customer/email") {
		t.Fatalf("topics without schemas still lists the last command's: %q", out)
	}
	code, out, errOut = runWithEnv(t, vars, "topics", "--pii-schemas", filepath.Join(schemas, "missing"))
	if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("a missing schema directory: %d %q %q", code, out, errOut)
	}
	// Registered in the store's registry, the contract's marks are listed
	// with no flag, and so is the topic's pseudonymised key.
	file := filepath.Join(schemas, "orders", "OrderCreated", "1.json")
	if code, out, errOut := runWithEnv(t, vars, "contract", "register", "--topic", "orders", "--type", "OrderCreated", "--version", "1", "--schema", file); code != 0 {
		t.Fatalf("contract register: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runWithEnv(t, vars, "contract", "policy", "--topic", "orders", "--pseudonymize-key=true"); code != 0 {
		t.Fatalf("contract policy: %d %q %q", code, out, errOut)
	}
	if code, out, errOut = runWithEnv(t, vars, "topics"); code != 0 || !strings.Contains(out, "key (keyed hash), "+want) {
		t.Fatalf("topics with the contract registered: %d %q %q", code, out, errOut)
	}
}

// TestTopicsListGroupedTopics: relay topics lists each topic of a group
// with its group, its own owner and description, and its own records
// (a number where its files hold it alone, "shared" otherwise); describe
// keeps a grouped topic's description in the catalog and writes the
// group's own into the shared table; relay catalog sync registers the
// group's table once.
func TestTopicsListGroupedTopics(t *testing.T) {
	dir := t.TempDir()
	store, err := storage.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	grouptest.Group(t, store, "m", "m.*")
	grouptest.Batch(t, store, "deltabus-main", 100, "m.a", "m.b", "orders")
	grouptest.Batch(t, store, "deltabus-main", 200, "m.c", "m.c")
	vars := map[string]string{"DELTABUS_STORE": "file://" + dir}
	code, out, errOut := runWithEnv(t, vars, "topics", "describe", "--topic", "m.a", "--owner", "team-m", "--description", "Own words of m.a.")
	if code != 0 || !strings.Contains(out, "shares group m's table _group.m") || !strings.Contains(out, "group m's table carries the group's description and column comments from version 3") {
		t.Fatalf("describe a grouped topic: %d %q %q", code, out, errOut)
	}
	snap, err := delta.LoadSnapshot(context.Background(), storage.Sub(store, "_group.m"), -1)
	if err != nil || snap.Metadata.Description == nil || strings.Contains(*snap.Metadata.Description, "Own words") ||
		!strings.Contains(*snap.Metadata.Description, "Topics: m.a, m.b, m.c.") {
		t.Fatalf("the group table's description: %v %v", snap.Metadata.Description, err)
	}
	code, out, errOut = runWithEnv(t, vars, "topics")
	if code != 0 {
		t.Fatalf("topics: %d %q %q", code, out, errOut)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		rows[f[0]] = f
	}
	for topic, want := range map[string]string{"TOPIC": "TOPIC OWNER GROUP VERSION RECORDS", "m.a": "m.a team-m m 3 shared",
		"m.b": "m.b - m 3 shared", "m.c": "m.c - m 3 2", "orders": "orders - - 1 1"} {
		if got := strings.Join(rows[topic][:min(5, len(rows[topic]))], " "); got != want {
			t.Errorf("row %s: %q, want %q\n%s", topic, got, want, out)
		}
	}
	if !strings.HasSuffix(strings.Join(rows["m.a"], " "), "Own words of m.a.") {
		t.Errorf("m.a's own description is not listed: %q", rows["m.a"])
	}
	code, out, _ = runWithEnv(t, vars, "topics", "--json")
	var l struct {
		Topics []struct {
			Topic, Group, Table string
			Records             int64
			SharedRecords       int64 `json:"sharedRecords"`
			Sources             []struct{ AppID, TxnLSN string }
		}
		Groups []struct {
			Group  string
			Topics []string
		}
	}
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Topics) != 4 || len(l.Groups) != 1 || strings.Join(l.Groups[0].Topics, ",") != "m.a,m.b,m.c" {
		t.Fatalf("topics --json: %d %v %s", code, err, out)
	}
	if a := l.Topics[0]; a.Topic != "m.a" || a.Table != "_group.m" || a.Records != 0 || a.SharedRecords != 2 || len(a.Sources) != 1 || a.Sources[0].AppID != "deltabus-main" || a.Sources[0].TxnLSN != "0/64" {
		t.Fatalf("m.a in JSON: %+v", a)
	}
	srv := uctest.Start(t, uctest.Options{})
	code, out, errOut = runWithEnv(t, vars, "catalog", "sync", "--unity-catalog", srv.URL, "--catalog", "lake", "--schema", "events")
	if code != 0 || !strings.Contains(out, "created lake.events._group_m\n") || strings.Contains(out, "lake.events.m_") || !strings.Contains(out, "2 created, 0 replaced") {
		t.Fatalf("catalog sync of a group: %d %q %q", code, out, errOut)
	}
}
