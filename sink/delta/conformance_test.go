package delta

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// expectedFile is the part of a conformance table's EXPECTED.json we check.
type expectedFile struct {
	Expected struct {
		Error            string                      `json:"error"`
		Version          *int64                      `json:"version"`
		Protocol         Protocol                    `json:"protocol"`
		PartitionColumns []string                    `json:"partitionColumns"`
		Configuration    map[string]string           `json:"configuration"`
		SchemaColumns    []string                    `json:"schema_columns"`
		NumActiveFiles   int64                       `json:"num_active_files"`
		Txns             map[string]int64            `json:"txns"`
		RowCount         *int64                      `json:"row_count"`
		CDFByVersion     map[string]map[string]int64 `json:"cdf_by_version"`
	} `json:"expected"`
}

// conformanceDir locates the conformance tables: the repository's copy
// (testdata/conformance), or DELTABUS_DELTA_TABLES.
func conformanceDir(t *testing.T) string {
	dir := os.Getenv("DELTABUS_DELTA_TABLES")
	if dir == "" {
		dir = filepath.Join("testdata", "conformance")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("conformance tables not found at %s (set DELTABUS_DELTA_TABLES): %v", dir, err)
	}
	return dir
}

func conformanceTables(t *testing.T) map[string]expectedFile {
	dir := conformanceDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]expectedFile{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "EXPECTED.json"))
		if err != nil {
			continue
		}
		var exp expectedFile
		if err := json.Unmarshal(data, &exp); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[filepath.Join(dir, e.Name())] = exp
	}
	if len(out) == 0 {
		t.Fatalf("no tables with EXPECTED.json in %s", dir)
	}
	return out
}

// readOnlyStore opens a conformance table in place.
func readOnlyStore(t *testing.T, root string) *dirStore { return newDirStore(t, root) }

func TestConformanceInspect(t *testing.T) {
	for root, exp := range conformanceTables(t) {
		t.Run(filepath.Base(root), func(t *testing.T) {
			e := exp.Expected
			res, err := Inspect(context.Background(), readOnlyStore(t, root))
			if e.Error != "" {
				checkExpectedError(t, err, e.Error)
				return
			}
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if res.Version != *e.Version {
				t.Errorf("version = %d, want %d", res.Version, *e.Version)
			}
			checkProtocol(t, res.Protocol, e.Protocol)
			if !reflect.DeepEqual(res.Metadata.PartitionColumns, nonNil(e.PartitionColumns)) {
				t.Errorf("partitionColumns = %v, want %v", res.Metadata.PartitionColumns, e.PartitionColumns)
			}
			if e.Configuration == nil {
				e.Configuration = map[string]string{}
			}
			if !reflect.DeepEqual(res.Metadata.Configuration, e.Configuration) {
				t.Errorf("configuration = %v, want %v", res.Metadata.Configuration, e.Configuration)
			}
			checkSchema(t, res.Metadata.Schema, e.SchemaColumns)
			if res.NumFiles != e.NumActiveFiles {
				t.Errorf("numFiles = %d, want %d", res.NumFiles, e.NumActiveFiles)
			}
			if e.Txns == nil {
				e.Txns = map[string]int64{}
			}
			if !reflect.DeepEqual(res.Txns, e.Txns) {
				t.Errorf("txns = %v, want %v", res.Txns, e.Txns)
			}
			if e.RowCount != nil {
				if res.NumRecords == nil || *res.NumRecords != *e.RowCount {
					t.Errorf("numRecords = %v, want %d", res.NumRecords, *e.RowCount)
				}
			}
		})
	}
}

// checkExpectedError requires an error naming the cause the table exercises.
func checkExpectedError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Inspect succeeded, want error %q", want)
	}
	msg := err.Error()
	switch {
	case strings.Contains(want, "reader version"):
		n := strings.Fields(strings.SplitAfter(want, "reader version")[1])[0]
		if !strings.Contains(msg, "reader version "+strings.TrimSuffix(n, ":")) {
			t.Errorf("error %q does not name the reader version (%s)", msg, want)
		}
	case strings.Contains(want, "not contiguous"):
		if !strings.Contains(msg, "version 1 is missing") {
			t.Errorf("error %q does not name the missing version 1", msg)
		}
	default:
		t.Logf("error %q (expected: %s)", msg, want)
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
}

func checkProtocol(t *testing.T, got InspectProtocol, want Protocol) {
	t.Helper()
	if got.MinReaderVersion != want.MinReaderVersion || got.MinWriterVersion != want.MinWriterVersion {
		t.Errorf("protocol = %d/%d, want %d/%d", got.MinReaderVersion, got.MinWriterVersion,
			want.MinReaderVersion, want.MinWriterVersion)
	}
	if !slices.Equal(got.ReaderFeatures, nonNil(want.ReaderFeatures)) {
		t.Errorf("readerFeatures = %v, want %v", got.ReaderFeatures, want.ReaderFeatures)
	}
	if !slices.Equal(got.WriterFeatures, nonNil(want.WriterFeatures)) {
		t.Errorf("writerFeatures = %v, want %v", got.WriterFeatures, want.WriterFeatures)
	}
}

// checkSchema compares "name:type" columns. EXPECTED.json renders nested
// types as truncated JSON ending in "..."; for those the name and the kind
// of nested type must match.
func checkSchema(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("schema = %v, want %v", got, want)
	}
	for i := range want {
		if !strings.HasSuffix(want[i], "...") {
			if got[i] != want[i] {
				t.Errorf("schema[%d] = %q, want %q", i, got[i], want[i])
			}
			continue
		}
		name, typ, _ := strings.Cut(want[i], ":")
		kind := "struct<"
		if strings.Contains(typ, `"elementType"`) {
			kind = "array<"
		}
		if !strings.HasPrefix(got[i], name+":"+kind) {
			t.Errorf("schema[%d] = %q, want %s:%s...", i, got[i], name, kind)
		}
	}
}

var _ = strconv.Itoa
