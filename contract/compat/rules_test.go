package compat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ruleCase is one case of testdata/*.json: two schemas and what Confluent
// Schema Registry answers for them (its difference types, each with the
// pointer where it is found, and the verdict under its STRICT policy). Where
// this checker answers otherwise on purpose, "confluent" holds Confluent's
// answer and "why" the reason (see the package doc). "source" names the
// Confluent example or test a case was taken from, in
// confluentinc/schema-registry's json-schema-provider/src/test.
type ruleCase struct {
	Name       string          `json:"name"`
	Source     string          `json:"source"`
	Old        json.RawMessage `json:"old"`
	New        json.RawMessage `json:"new"`
	Compatible bool            `json:"compatible"`
	Rules      []string        `json:"rules"`
	Confluent  json.RawMessage `json:"confluent"`
	Why        string          `json:"why"`
}

func loadCases(t *testing.T) map[string][]ruleCase {
	t.Helper()
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test data: %v", err)
	}
	out := map[string][]ruleCase{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []ruleCase
		if err := json.Unmarshal(b, &cases); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = cases
	}
	return out
}

func TestRules(t *testing.T) {
	total := 0
	for file, cases := range loadCases(t) {
		for _, tc := range cases {
			total++
			t.Run(strings.TrimSuffix(file, ".json")+"/"+tc.Name, func(t *testing.T) {
				checkCase(t, tc)
			})
		}
	}
	// The issue asks for at least a hundred cases; the brief for 120.
	if total < 120 {
		t.Errorf("%d cases in testdata, want at least 120", total)
	}
}

func checkCase(t *testing.T, tc ruleCase) {
	if tc.Confluent != nil && tc.Why == "" {
		t.Errorf("the case differs from Confluent without saying why")
	}
	for _, r := range tc.Rules {
		if name, _, _ := strings.Cut(r, " "); !slices.Contains(confluentRules, name) {
			t.Errorf("expected rule %q is not one of Confluent's difference types", name)
		}
	}
	ds, err := Diff(tc.Old, tc.New)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	var got []string
	compatible := true
	for _, d := range ds {
		got = append(got, d.Rule+" "+d.Pointer)
		compatible = compatible && d.Compatible()
	}
	want := slices.Clone(tc.Rules)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("differences\n got  %q\n want %q", got, want)
	}
	if compatible != tc.Compatible {
		t.Errorf("compatible = %v, want %v (differences %q)", compatible, tc.Compatible, got)
	}
	for _, doc := range []json.RawMessage{tc.Old, tc.New} {
		self, err := Diff(doc, doc)
		if err != nil {
			t.Fatalf("Diff of a schema with itself: %v", err)
		}
		for _, d := range self {
			if !d.Compatible() {
				t.Errorf("Diff of %s with itself: %v", doc, d)
			}
		}
	}
}

// TestRuleNamesAreConfluents checks the rules this package can emit against
// Confluent's list, and its compatible set against COMPATIBLE_CHANGES_STRICT.
func TestRuleNamesAreConfluents(t *testing.T) {
	for r := range compatibleRules {
		if !slices.Contains(confluentRules, r) {
			t.Errorf("compatible rule %q is not one of Confluent's", r)
		}
	}
	if len(compatibleRules) != 65 {
		t.Errorf("%d compatible rules, want COMPATIBLE_CHANGES_STRICT's 65", len(compatibleRules))
	}
	for _, b := range []string{"maxLength", "minLength", "maximum", "minimum", "exclusiveMaximum",
		"exclusiveMinimum", "maxProperties", "minProperties", "maxItems", "minItems", "maxContains", "minContains"} {
		for _, change := range []string{"ADDED", "REMOVED", "INCREASED", "DECREASED"} {
			if r := (bounded{keyword: b}).rule(change); !slices.Contains(confluentRules, r) {
				t.Errorf("bound %s gives %q, not one of Confluent's rules", b, r)
			}
		}
	}
}

// confluentRules are the names of Confluent's Difference.Type.
var confluentRules = strings.Fields(`
ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_ADDED SCHEMA_REMOVED
TYPE_EXTENDED TYPE_NARROWED TYPE_CHANGED
MAX_LENGTH_ADDED MAX_LENGTH_REMOVED MAX_LENGTH_INCREASED MAX_LENGTH_DECREASED
MIN_LENGTH_ADDED MIN_LENGTH_REMOVED MIN_LENGTH_INCREASED MIN_LENGTH_DECREASED
PATTERN_ADDED PATTERN_REMOVED PATTERN_CHANGED
MAXIMUM_ADDED MAXIMUM_REMOVED MAXIMUM_INCREASED MAXIMUM_DECREASED
MINIMUM_ADDED MINIMUM_REMOVED MINIMUM_INCREASED MINIMUM_DECREASED
EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_DECREASED
EXCLUSIVE_MINIMUM_ADDED EXCLUSIVE_MINIMUM_REMOVED EXCLUSIVE_MINIMUM_INCREASED EXCLUSIVE_MINIMUM_DECREASED
MULTIPLE_OF_ADDED MULTIPLE_OF_REMOVED MULTIPLE_OF_EXPANDED MULTIPLE_OF_REDUCED MULTIPLE_OF_CHANGED
REQUIRED_ATTRIBUTE_ADDED REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED
MAX_PROPERTIES_ADDED MAX_PROPERTIES_REMOVED MAX_PROPERTIES_INCREASED MAX_PROPERTIES_DECREASED
MIN_PROPERTIES_ADDED MIN_PROPERTIES_REMOVED MIN_PROPERTIES_INCREASED MIN_PROPERTIES_DECREASED
ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_REMOVED ADDITIONAL_PROPERTIES_EXTENDED ADDITIONAL_PROPERTIES_NARROWED
DEPENDENCY_ARRAY_ADDED DEPENDENCY_ARRAY_REMOVED DEPENDENCY_ARRAY_EXTENDED DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_CHANGED
DEPENDENCY_SCHEMA_ADDED DEPENDENCY_SCHEMA_REMOVED
PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
RESERVED_PROPERTY_REMOVED RESERVED_PROPERTY_CONFLICTS_WITH_PROPERTY
UNEVALUATED_PROPERTIES_ADDED UNEVALUATED_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_NARROWED
MAX_ITEMS_ADDED MAX_ITEMS_REMOVED MAX_ITEMS_INCREASED MAX_ITEMS_DECREASED
MIN_ITEMS_ADDED MIN_ITEMS_REMOVED MIN_ITEMS_INCREASED MIN_ITEMS_DECREASED
MAX_CONTAINS_ADDED MAX_CONTAINS_REMOVED MAX_CONTAINS_INCREASED MAX_CONTAINS_DECREASED
MIN_CONTAINS_ADDED MIN_CONTAINS_REMOVED MIN_CONTAINS_INCREASED MIN_CONTAINS_DECREASED
UNIQUE_ITEMS_ADDED UNIQUE_ITEMS_REMOVED
ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED ADDITIONAL_ITEMS_EXTENDED ADDITIONAL_ITEMS_NARROWED
UNEVALUATED_ITEMS_ADDED UNEVALUATED_ITEMS_REMOVED UNEVALUATED_ITEMS_EXTENDED UNEVALUATED_ITEMS_NARROWED
ITEM_ADDED_TO_OPEN_CONTENT_MODEL ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL
ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ENUM_ARRAY_EXTENDED ENUM_ARRAY_NARROWED ENUM_ARRAY_CHANGED
COMBINED_TYPE_EXTENDED COMBINED_TYPE_CHANGED PRODUCT_TYPE_EXTENDED PRODUCT_TYPE_NARROWED
SUM_TYPE_EXTENDED SUM_TYPE_NARROWED COMBINED_TYPE_SUBSCHEMAS_CHANGED NOT_TYPE_EXTENDED NOT_TYPE_NARROWED
`)
