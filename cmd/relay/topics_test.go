package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/unitycatalog/uctest"
)

func runWithEnv(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	code := runCLI(context.Background(), env, args)
	return code, out.String(), errOut.String()
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
		code, out, errOut := runWithEnv(t, vars, args...)
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "relay: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			t.Errorf("bad input wrote %s", p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
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
