package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConformanceRows reads every active file of each table row by row (the
// reader path `relay tail` uses) and requires row_count rows.
func TestConformanceRows(t *testing.T) {
	ctx := context.Background()
	for root, exp := range conformanceTables(t) {
		if exp.Expected.Error != "" || exp.Expected.RowCount == nil {
			continue
		}
		t.Run(filepath.Base(root), func(t *testing.T) {
			store := readOnlyStore(t, root)
			snap, err := LoadSnapshot(ctx, store, -1)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, add := range snap.Files {
				key, err := dataKey(add.Path)
				if err != nil {
					t.Fatal(err)
				}
				if err := ReadParquetRows(ctx, store, key, func(map[string]any) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if n != *exp.Expected.RowCount {
				t.Errorf("rows = %d, want %d", n, *exp.Expected.RowCount)
			}
		})
	}
}

// TestConformanceCDF checks cdf_by_version: rows per change type per version.
func TestConformanceCDF(t *testing.T) {
	ctx := context.Background()
	for root, exp := range conformanceTables(t) {
		want := exp.Expected.CDFByVersion
		if want == nil {
			continue
		}
		t.Run(filepath.Base(root), func(t *testing.T) {
			store := readOnlyStore(t, root)
			got := map[string]map[string]int64{}
			for v := range want {
				got[v] = map[string]int64{}
			}
			err := ReadChanges(ctx, store, 0, -1, func(cf ChangeFile) error {
				counts := got[strconv.FormatInt(cf.Version, 10)]
				return ReadParquetRows(ctx, store, cf.Key, func(row map[string]any) error {
					ct := cf.ChangeType
					if cf.CDC {
						ct, _ = row["_change_type"].(string)
					}
					counts[ct]++
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cdf = %v, want %v", got, want)
			}
		})
	}
}

func TestReadChangesErrors(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(conformanceDir(t), "deltars-cdf-table")
	store := readOnlyStore(t, root)
	nop := func(ChangeFile) error { return nil }
	for _, c := range []struct {
		from, to int64
		want     string
	}{{2, 1, "after end version"}, {4, -1, "beyond the latest version 3"}, {-1, 2, "negative"}} {
		if err := ReadChanges(ctx, store, c.from, c.to, nop); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadChanges(%d,%d) = %v, want error containing %q", c.from, c.to, err, c.want)
		}
	}
	nonCDF := readOnlyStore(t, filepath.Join(conformanceDir(t), "deltars-simple_table"))
	if err := ReadChanges(ctx, nonCDF, 0, -1, nop); err == nil || !strings.Contains(err.Error(), "enableChangeDataFeed") {
		t.Errorf("ReadChanges on non-CDF table = %v", err)
	}
}

func tailLines(t *testing.T, root string) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	// Tail needs CDF on; these tables lack it, so read their rows directly.
	store := readOnlyStore(t, root)
	snap, err := LoadSnapshot(context.Background(), store, -1)
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := snap.Schema()
	for _, add := range snap.Files {
		key, _ := dataKey(add.Path)
		cf := ChangeFile{Version: snap.Version, ChangeType: ChangeInsert, Path: add.Path, Key: key,
			PartitionValues: add.PartitionValues, Timestamp: time.UnixMilli(0)}
		w := newBufWriter(&buf)
		err := ReadChangeRows(context.Background(), store, schema, cf, func(r []RowField) error { return writeRow(w, r, nil) })
		if err != nil {
			t.Fatal(err)
		}
		w.Flush()
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestRowsEdgeTimestamps: INT96 year-9999 values must not overflow.
func TestRowsEdgeTimestamps(t *testing.T) {
	rows := tailLines(t, filepath.Join(conformanceDir(t), "deltars-table_with_edge_timestamps"))
	found := false
	for _, r := range rows {
		if s, _ := r["BIG_DATE"].(string); strings.HasPrefix(s, "9999-12-31") {
			found = true
		}
	}
	if !found {
		t.Errorf("no BIG_DATE in year 9999: %v", rows)
	}
}

// TestRowsPartitionValues: partition values come from the log, typed by
// schema; the string "null" stays a string, JSON null is NULL.
func TestRowsPartitionValues(t *testing.T) {
	rows := tailLines(t, filepath.Join(conformanceDir(t), "delta-data-reader-partition-values"))
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	var nulls, litNull int
	for _, r := range rows {
		if r["as_int"] == nil {
			nulls++
			if r["as_string_lit_null"] != nil && r["as_string_lit_null"] != "null" {
				t.Errorf("row %v", r)
			}
			continue
		}
		if r["as_string_lit_null"] == "null" {
			litNull++
		}
		if r["as_timestamp"] != "2021-09-08T11:11:11Z" || r["as_date"] != "2021-09-08" {
			t.Errorf("timestamp/date = %v/%v", r["as_timestamp"], r["as_date"])
		}
		if _, ok := r["as_long"].(float64); !ok {
			t.Errorf("as_long = %T", r["as_long"])
		}
	}
	if nulls != 1 || litNull != 2 {
		t.Errorf("null partitions = %d (want 1), literal \"null\" strings = %d (want 2): %v", nulls, litNull, rows)
	}
}
