package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContractRegisterKeepsTheMode: register naming another mode than the
// type's is refused with one line naming relay contract mode, and nothing
// is registered; relay contract mode changes it and says from what.
func TestContractRegisterKeepsTheMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o755); err != nil {
		t.Fatal(err)
	}
	store := "file://" + filepath.Join(dir, "store")
	v1 := writeFile(t, filepath.Join(dir, "v1.json"), cliV1)
	v2 := writeFile(t, filepath.Join(dir, "v2.json"), cliV2Breaking)
	if code, _, errOut := runContract(t, store, "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "1", "--schema", v1, "--compatibility", "BACKWARD_TRANSITIVE"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runContract(t, store, "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", v2, "--compatibility", "NONE")
	if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "relay contract mode --topic orders --type OrderPlaced --compatibility NONE") {
		t.Fatalf("a weaker mode at registration: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := runContract(t, store, "show", "--topic", "orders", "--type", "OrderPlaced", "--version", "2"); strings.Contains(out, "qty") {
		t.Fatal("version 2 was registered")
	}
	code, out, errOut = runContract(t, store, "mode", "--topic", "orders", "--type", "OrderPlaced", "--compatibility", "NONE")
	if code != 0 || !strings.Contains(out, "changed from BACKWARD_TRANSITIVE to NONE") {
		t.Fatalf("contract mode: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runContract(t, store, "register", "--topic", "orders", "--type", "OrderPlaced", "--version", "2", "--schema", v2); code != 0 {
		t.Fatalf("register under the mode set: exit %d\n%s%s", code, out, errOut)
	}
}
