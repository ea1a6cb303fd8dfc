package subscribe

import (
	"bytes"
	"context"
	"github.com/deltabus/deltabus/tests/duckdbtest"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestColPagesDuckDBFiles: event files rewritten by DuckDB (its own
// dictionary, PLAIN and, with PARQUET_VERSION V2, DELTA pages; small row
// groups; other codecs) decode to the events of the original, with
// colPages as with arrow-go.
func TestColPagesDuckDBFiles(t *testing.T) {
	pkg := duckdbDir(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.parquet")
	if err := os.WriteFile(src, randomEventFile(t, rand.New(rand.NewPCG(3, 4)), 3000, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(src)
	want, _ := decodeBoth(t, data, 0)
	for i, opts := range []string{
		"FORMAT PARQUET",
		"FORMAT PARQUET, ROW_GROUP_SIZE 1000, COMPRESSION zstd",
		"FORMAT PARQUET, PARQUET_VERSION V2, COMPRESSION snappy",
		"FORMAT PARQUET, ROW_GROUP_SIZE 700, COMPRESSION uncompressed, DICTIONARY_SIZE_LIMIT 2000",
	} {
		dst := filepath.Join(dir, "dst.parquet")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "node", "testdata/duckdb_rewrite.mjs", pkg, src, dst, opts)
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("duckdb_rewrite.mjs (%s): %v\n%s", opts, err, stderr.String())
		}
		data, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		got, fallbacks := decodeBoth(t, data, 0)
		if got == nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: DuckDB's file decodes to %d events, unlike the original's %d", opts, len(got), len(want))
		}
		t.Logf("rewrite %d (%s): %d column chunks handed over to arrow-go", i, opts, fallbacks)
	}
}

// duckdbDir finds DuckDB's node client (duckdbtest.Dir).
func duckdbDir(t *testing.T) string { return duckdbtest.Dir(t) }
