// Package duckdbtest finds DuckDB's node client, which tests use as a
// Delta and Parquet implementation other than ours. scripts/install-duckdb.sh
// installs it (make test does); a missing node or package fails the test
// that needs it, and only DELTABUS_SKIP_DUCKDB=1 skips it.
package duckdbtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir returns the directory holding node_modules/@duckdb/node-api:
// DELTABUS_DUCKDB_DIR, else ~/.cache/deltabus/duckdb.
func Dir(t testing.TB) string {
	t.Helper()
	if os.Getenv("DELTABUS_SKIP_DUCKDB") == "1" {
		t.Skip("DELTABUS_SKIP_DUCKDB=1")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is required for the DuckDB check (or set DELTABUS_SKIP_DUCKDB=1): %v", err)
	}
	dir := os.Getenv("DELTABUS_DUCKDB_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "deltabus", "duckdb")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		t.Fatalf("@duckdb/node-api is not installed in %s: run scripts/install-duckdb.sh (or set DELTABUS_SKIP_DUCKDB=1): %v", dir, err)
	}
	return dir
}
