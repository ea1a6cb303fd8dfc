package compat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzDiff: Diff never panics, never errs on two well-formed schemas (but
// for the work budget), answers the same twice, and finds no incompatible
// difference between a schema and itself. The corpus starts from every
// schema of testdata.
func FuzzDiff(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var cases []ruleCase
		if err := json.Unmarshal(b, &cases); err != nil {
			f.Fatal(err)
		}
		for _, c := range cases {
			f.Add([]byte(c.Old), []byte(c.New))
		}
	}
	f.Add([]byte(`{"$ref": "#"}`), []byte(`{"type": ["string", "null"], "maxLength": 1e400}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ds, err := Diff(a, b)
		okA, okB := WellFormed(a) == nil, WellFormed(b) == nil
		if err != nil && okA && okB && !strings.Contains(err.Error(), "too complex") {
			t.Fatalf("Diff of two well-formed schemas: %v", err)
		}
		if err == nil && (!okA || !okB) {
			t.Fatalf("Diff accepted a schema WellFormed refuses")
		}
		if again, err2 := Diff(a, b); (err == nil) != (err2 == nil) || !reflect.DeepEqual(ds, again) {
			t.Fatalf("Diff is not deterministic: %v / %v", ds, again)
		}
		if !okA {
			return
		}
		self, err := Diff(a, a)
		if err != nil {
			if strings.Contains(err.Error(), "too complex") {
				return
			}
			t.Fatalf("Diff(a, a): %v", err)
		}
		for _, d := range self {
			if !d.Compatible() {
				t.Fatalf("Diff(a, a) has an incompatible difference: %v", d)
			}
		}
	})
}
