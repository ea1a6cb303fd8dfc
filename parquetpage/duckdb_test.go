package parquetpage

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deltabus/deltabus/tests/duckdbtest"
)

// TestReaderDuckDBRewrites: a file this package writes, rewritten by
// DuckDB (its own dictionary and PLAIN pages, small row groups, other
// codecs, and with PARQUET_VERSION V2 its DELTA pages), reads the same
// with Reader as with arrow-go, or is left to arrow-go where Reader does
// not decode a page; DuckDB's default layout Reader reads whole. The
// rewrite also reads back the values written (DuckDB read our file).
func TestReaderDuckDBRewrites(t *testing.T) {
	pkg := duckdbtest.Dir(t)
	dir := t.TempDir()
	_, s := testSchema(t)
	r := rand.New(rand.NewPCG(3, 4))
	groups := []group{randomGroup(r, shape{rows: 3000, nullPct: 20, distinct: 30, maxLen: 300})}
	for _, vals := range groups[0].vals { // DuckDB reads strings as UTF-8 only
		for i, v := range vals {
			if s, ok := v.(string); ok {
				vals[i] = strings.ToValidUTF8(s, "?")
			}
		}
	}
	src := filepath.Join(dir, "src.parquet")
	if err := os.WriteFile(src, writeGroups(t, s, groups), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, opts := range []string{
		"FORMAT PARQUET",
		"FORMAT PARQUET, ROW_GROUP_SIZE 1000, COMPRESSION zstd",
		"FORMAT PARQUET, PARQUET_VERSION V2, COMPRESSION snappy",
		"FORMAT PARQUET, ROW_GROUP_SIZE 700, COMPRESSION uncompressed, DICTIONARY_SIZE_LIMIT 2000",
		"FORMAT PARQUET, COMPRESSION gzip",
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
		cov := compareFile(t, opts, data, r)
		t.Logf("rewrite %d (%s): %d column chunks read, %d left to arrow-go", i, opts, cov.read, cov.unsupported)
		if i == 0 && cov.unsupported > 0 {
			t.Fatalf("%s: %d column chunks of DuckDB's default layout not read", opts, cov.unsupported)
		}
		if i == 0 {
			checkOurs(t, data, groups[0])
		}
	}
}
