package storagetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/deltabus/deltabus/storage"
)

// listKeys is deliberately unsorted and mixes what a Delta table holds with
// names whose byte order differs from naive expectations.
var listKeys = []string{
	"_delta_log/00000000000000000010.json",
	"_delta_log/00000000000000000009.json",
	"_delta_log/00000000000000000010.checkpoint.parquet",
	"_delta_log/_last_checkpoint",
	"_delta_log/00000000000000000002.json",
	"part-00000-a.snappy.parquet",
	"_change_data/cdc-00000.parquet",
	"a b/with space.json",
	"pct%20encoded%2F.json",
	"k=v/date=2024-01-01/part-0.parquet",
	"ünïcödé/ß.json",
	"日本/語.json",
	"a.b",
	"a/b",
	"a-b",
	"A",
	"a+b",
	"~tilde",
}

func sortedKeys(prefix, startAfter string) []string {
	var out []string
	for _, k := range listKeys {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, k)
		}
	}
	slices.Sort(out) // Go string order is byte order
	return out
}

func putListKeys(t *testing.T, s storage.Store) {
	for i, k := range listKeys {
		mustPut(t, s, k, []byte(strings.Repeat("x", i)))
	}
}

func testListOrder(t *testing.T, s storage.Store) {
	putListKeys(t, s)
	objs, err := s.List(t.Context(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := sortedKeys("", "")
	if len(objs) != len(want) {
		t.Fatalf("List returned %d objects, want %d: %+v", len(objs), len(want), objs)
	}
	sizes := make(map[string]int64)
	for i, k := range listKeys {
		sizes[k] = int64(i)
	}
	for i, o := range objs {
		if o.Key != want[i] {
			t.Fatalf("List[%d] = %q, want %q (full order %q)", i, o.Key, want[i], want)
		}
		if o.Size != sizes[o.Key] {
			t.Errorf("List[%d] %q size = %d, want %d", i, o.Key, o.Size, sizes[o.Key])
		}
		if o.ModTime.IsZero() {
			t.Errorf("List[%d] %q has zero ModTime", i, o.Key)
		}
	}
}

func testListPrefixStartAfter(t *testing.T, s storage.Store) {
	putListKeys(t, s)
	cases := []struct{ prefix, startAfter string }{
		{"_delta_log/", ""},
		{"_delta_log/", "_delta_log/00000000000000000009.json"},
		{"_delta_log/", "_delta_log/00000000000000000009.json.zzz"}, // not a key
		{"_delta_log/0000000000000000001", ""},                      // partial segment
		{"_delta_log", ""},                                          // matches "_delta_log/..." only
		{"_", ""},
		{"a", ""},
		{"a/", ""},
		{"a", "a.b"},
		{"", "a"},
		{"", "_delta_log/00000000000000000010.json"},
		{"_delta_log/", "_"},                 // startAfter before the prefix
		{"_delta_log/", "~"},                 // startAfter after everything
		{"日本/", ""},                          // unicode prefix
		{"k=v/", ""},                         // '=' in prefix
		{"pct%20", ""},                       // '%' in prefix
		{"a b/", ""},                         // space in prefix
		{"nothing/", ""},                     // no match
		{"_delta_log/_last_checkpoint", ""},  // a whole key as prefix
		{"_delta_log/_last_checkpoint/", ""}, // below a file: nothing
	}
	for _, c := range cases {
		wantKeys(t, s, c.prefix, c.startAfter, sortedKeys(c.prefix, c.startAfter)...)
	}
}

func testListEmpty(t *testing.T, s storage.Store) {
	objs, err := s.List(t.Context(), "", "")
	if err != nil {
		t.Fatalf("List of an empty store: %v", err)
	}
	if objs == nil || len(objs) != 0 {
		t.Fatalf("List of an empty store = %#v, want empty non-nil slice", objs)
	}
	wantKeys(t, s, "_delta_log/", "")
	mustPut(t, s, "x/y", []byte("1"))
	wantKeys(t, s, "_delta_log/", "")
	wantKeys(t, s, "", "x/y")
}
