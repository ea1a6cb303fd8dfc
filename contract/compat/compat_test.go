package compat

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	for _, m := range modes {
		for _, s := range []string{string(m), strings.ToLower(string(m)), string(m)[:1] + strings.ToLower(string(m)[1:])} {
			got, err := ParseMode(s)
			if err != nil || got != m {
				t.Errorf("ParseMode(%q) = %q, %v; want %q", s, got, err, m)
			}
		}
	}
	for _, s := range []string{"", "BACKWARDS", "full transitive", " FULL", "FORWARD_TRANSITIVE_"} {
		_, err := ParseMode(s)
		if err == nil {
			t.Errorf("ParseMode(%q) accepted", s)
			continue
		}
		for _, m := range modes {
			if !strings.Contains(err.Error(), string(m)) {
				t.Errorf("ParseMode(%q): %q does not name %s", s, err, m)
			}
		}
	}
}

// history: v1 accepted strings of up to 30 characters, v2 narrowed that to
// 10 (registered under NONE), next widens it to 20. Backward, next reads v2's
// strings but not all of v1's; forward, v1 reads next's but v2 does not.
var (
	v1   = []byte(`{"type": "object", "properties": {"id": {"type": "string", "maxLength": 30}}}`)
	v2   = []byte(`{"type": "object", "properties": {"id": {"type": "string", "maxLength": 10}}}`)
	next = []byte(`{"type": "object", "properties": {"id": {"type": "string", "maxLength": 20}}}`)
)

func TestCheckModes(t *testing.T) {
	const ptr, rule = "#/properties/id/maxLength", "MAX_LENGTH_DECREASED"
	backV1 := Difference{Pointer: ptr, Rule: rule, Old: "30", New: "20", Version: 1}
	fwdV2 := Difference{Pointer: ptr, Rule: rule, Old: "20", New: "10", Version: 2, Forward: true}
	fwdLast := fwdV2
	fwdLast.Version = 0
	for _, tc := range []struct {
		mode Mode
		want []Difference
	}{
		{None, nil},
		{Backward, nil},
		{BackwardTransitive, []Difference{backV1}},
		{Forward, []Difference{fwdLast}},
		{ForwardTransitive, []Difference{fwdV2}},
		{Full, []Difference{fwdLast}},
		{FullTransitive, []Difference{backV1, fwdV2}},
	} {
		got, err := Check(tc.mode, [][]byte{v1, v2}, next)
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got  %v\n want %v", tc.mode, got, tc.want)
		}
	}
}

func TestCheckTransitiveComparesEveryVersion(t *testing.T) {
	// Each version drops a property of an open model, compatible step by
	// step. nextB brings b back as an integer: v1 and v2 declared it a
	// string (TYPE_CHANGED), and v3, open without b, accepted any b
	// (OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL).
	versions := [][]byte{
		[]byte(`{"properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}}`),
		[]byte(`{"properties": {"b": {"type": "string"}, "c": {"type": "string"}}}`),
		[]byte(`{"properties": {"c": {"type": "string"}}}`),
	}
	nextB := []byte(`{"properties": {"b": {"type": "integer"}, "c": {"type": "string"}}}`)
	got, err := Check(BackwardTransitive, versions, nextB)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, d := range got {
		seen = append(seen, fmt.Sprintf("%d %s %s", d.Version, d.Rule, d.Pointer))
	}
	want := []string{
		"1 TYPE_CHANGED #/properties/b",
		"2 TYPE_CHANGED #/properties/b",
		"3 OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/b",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("got %q\nwant %q", seen, want)
	}
	if got, _ := Check(Backward, versions, nextB); len(got) != 1 || got[0].Version != 0 {
		t.Errorf("BACKWARD compares with the last version only: %v", got)
	}
}

func TestCheckEmptyHistory(t *testing.T) {
	for _, m := range modes {
		got, err := Check(m, nil, next)
		if err != nil || got != nil {
			t.Errorf("%s with no previous version: %v, %v", m, got, err)
		}
		if _, err := Check(m, nil, []byte(`{"type": 5}`)); err == nil {
			t.Errorf("%s: a malformed first version was accepted", m)
		}
	}
}

func TestCheckErrors(t *testing.T) {
	if _, err := Check("SIDEWAYS", [][]byte{v1}, next); err == nil || !strings.Contains(err.Error(), "SIDEWAYS") {
		t.Errorf("unknown mode: %v", err)
	}
	_, err := Check(BackwardTransitive, [][]byte{v1, []byte(`{"maxLength": "x"}`)}, next)
	if err == nil || !strings.Contains(err.Error(), "previous schema 2 of 2") || !strings.Contains(err.Error(), "#/maxLength") {
		t.Errorf("malformed previous version: %v", err)
	}
	_, err = Check(None, [][]byte{v1}, []byte(`{"properties": {"id": {"$ref": "#/definitions/nope"}}}`))
	if err == nil || !strings.HasPrefix(err.Error(), "new schema: ") {
		t.Errorf("malformed new schema under NONE: %v", err)
	}
}

// TestMalformed: a schema that cannot be judged is an error from WellFormed,
// Diff (on either side) and Check, never a compatible answer.
func TestMalformed(t *testing.T) {
	for _, tc := range []struct{ doc, msg string }{
		{`not json`, "not valid JSON"},
		{`{"type": "string"`, "not valid JSON"},
		{`{"type": "string"} {}`, "after the top-level value"},
		{`{"a": 1, "a": 2}`, `duplicate key "a"`},
		{`{"maximum": 1e999999999}`, "out of range"},
		{`[{"type": "string"}]`, "an object or a boolean"},
		{`"string"`, "an object or a boolean"},
		{`{"type": "strnig"}`, "#/type"},
		{`{"type": ["string", 5]}`, "#/type"},
		{`{"maxLength": "10"}`, "#/maxLength"},
		{`{"maxLength": -1}`, "#/maxLength"},
		{`{"maxLength": 1.5}`, "#/maxLength"},
		{`{"minimum": "0"}`, "#/minimum"},
		{`{"multipleOf": 0}`, "#/multipleOf"},
		{`{"required": "id"}`, "#/required"},
		{`{"required": [1]}`, "#/required"},
		{`{"properties": []}`, "#/properties"},
		{`{"properties": {"id": 5}}`, "#/properties/id"},
		{`{"items": 5}`, "#/items"},
		{`{"enum": {}}`, "#/enum"},
		{`{"allOf": []}`, "#/allOf"},
		{`{"anyOf": {}}`, "#/anyOf"},
		{`{"not": []}`, "#/not"},
		{`{"additionalProperties": "no"}`, "#/additionalProperties"},
		{`{"dependencies": {"a": 5}}`, "#/dependencies/a"},
		{`{"pattern": "(?<=a)b"}`, "#/pattern"},
		{`{"patternProperties": {"(?=x)": {}}}`, `(?=x)`},
		{`{"$ref": "#/definitions/missing"}`, `unresolvable $ref "#/definitions/missing"`},
		{`{"$ref": "#nowhere"}`, "unresolvable $ref"},
		{`{"$ref": "https://example.com/other.json"}`, "other documents are not supported"},
		{`{"$ref": "file:///etc/passwd"}`, "other documents are not supported"},
		{`{"$ref": "#"}`, "leads only to itself"},
		{`{"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}`, "leads only to itself"},
		{`{"$schema": "https://example.com/my-dialect"}`, "not a supported dialect"},
		{`{"$schema": 7}`, "$schema"},
		{`{"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": {}}`, "#/prefixItems"},
		{`{"$schema": "https://json-schema.org/draft/2020-12/schema", "dependentRequired": {"a": "b"}}`, "#/dependentRequired/a"},
	} {
		err := WellFormed([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("WellFormed(%s) = %v, want an error saying %q", tc.doc, err, tc.msg)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("WellFormed(%s): the error is not one line: %q", tc.doc, err)
		}
		if _, err := Diff([]byte(tc.doc), v1); err == nil || !strings.HasPrefix(err.Error(), "original schema: ") {
			t.Errorf("Diff(%s, v1) = %v", tc.doc, err)
		}
		if _, err := Diff(v1, []byte(tc.doc)); err == nil || !strings.HasPrefix(err.Error(), "updated schema: ") {
			t.Errorf("Diff(v1, %s) = %v", tc.doc, err)
		}
		if _, err := Check(Backward, [][]byte{v1}, []byte(tc.doc)); err == nil {
			t.Errorf("Check accepted %s", tc.doc)
		}
	}
}

func TestWellFormedAcceptsEveryDialect(t *testing.T) {
	for _, s := range []string{
		"http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
		"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema",
		"https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema",
	} {
		doc := fmt.Sprintf(`{"$schema": %q, "type": "object", "properties": {"id": {"type": "string"}}}`, s)
		if err := WellFormed([]byte(doc)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, doc := range []string{`true`, `false`, `{}`} {
		if err := WellFormed([]byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func TestDifferenceValues(t *testing.T) {
	ds, err := Diff(
		[]byte(`{"type": "object", "properties": {"email": {"type": "string", "maxLength": 254}}, "additionalProperties": false}`),
		[]byte(`{"type": "object", "properties": {"email": {"type": "string", "maxLength": 100}, "note": {"type": "string", "pattern": "^<b>&"}}, "required": ["email"], "additionalProperties": false}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Difference{
		{Pointer: "#/required/email", Rule: "REQUIRED_ATTRIBUTE_ADDED", New: `"email"`},
		{Pointer: "#/properties/email/maxLength", Rule: "MAX_LENGTH_DECREASED", Old: "254", New: "100"},
		{Pointer: "#/properties/note", Rule: "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", New: `{"type":"string","pattern":"^<b>&"}`},
	}
	if !reflect.DeepEqual(ds, want) {
		t.Errorf("got  %v\nwant %v", ds, want)
	}
}

func TestPointerEscapesNames(t *testing.T) {
	ds, err := Diff([]byte(`{"properties": {"a/b~c": {"type": "string"}}}`), []byte(`{"properties": {"a/b~c": {"type": "number"}}}`))
	if err != nil || len(ds) != 1 || ds[0].Pointer != "#/properties/a~1b~0c" {
		t.Errorf("got %v, %v", ds, err)
	}
}

func TestDifferenceString(t *testing.T) {
	for _, tc := range []struct {
		d    Difference
		want string
	}{
		{Difference{Pointer: "#/properties/email/maxLength", Rule: "MAX_LENGTH_DECREASED", Old: "12", New: "10"},
			"#/properties/email/maxLength MAX_LENGTH_DECREASED 12 → 10"},
		{Difference{Pointer: "#/required/id", Rule: "REQUIRED_ATTRIBUTE_ADDED", New: `"id"`, Version: 3},
			`#/required/id REQUIRED_ATTRIBUTE_ADDED (absent) → "id" (against version 3)`},
		{Difference{Pointer: "#/maxLength", Rule: "MAX_LENGTH_DECREASED", Old: "20", New: "10", Forward: true},
			"#/maxLength MAX_LENGTH_DECREASED 20 → 10 (forward)"},
		{Difference{Pointer: "#/", Rule: "TYPE_CHANGED", Old: `"` + strings.Repeat("é", 60) + `"`, New: "5", Version: 2, Forward: true},
			`#/ TYPE_CHANGED "` + strings.Repeat("é", 38) + `... → 5 (forward, against version 2)`},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestDiffOrderFollowsTheSchemas(t *testing.T) {
	o := []byte(`{"properties": {"z": {"type": "string"}, "a": {"type": "string"}}}`)
	u := []byte(`{"properties": {"y": {}, "a": {"type": "number"}, "z": {"type": "number"}}}`)
	for i := 0; i < 5; i++ {
		ds, err := Diff(o, u)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.Pointer)
		}
		if want := []string{"#/properties/z", "#/properties/a", "#/properties/y"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// TestTooComplex: a schema whose combinations compare a quadratic number of
// member pairs at every level is refused with an error, quickly. The budget
// is lowered to keep the test short; the schema needs 4^10 steps.
func TestTooComplex(t *testing.T) {
	defer func(w int) { maxWork = w }(maxWork)
	maxWork = 50_000
	doc := nested(5, 4, "")
	if _, err := Diff([]byte(nested(2, 4, "")), []byte(nested(2, 4, ""))); err != nil {
		t.Fatalf("a small nesting: %v", err)
	}
	start := time.Now()
	_, err := Diff([]byte(doc), []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("Diff = %v, want an error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusing took %v", d)
	}
}

// nested is an anyOf of width members, depth levels deep, every member
// distinct.
func nested(depth, width int, tag string) string {
	if depth == 0 {
		return fmt.Sprintf(`{"type": "string", "title": %q}`, tag)
	}
	var members []string
	for i := 0; i < width; i++ {
		members = append(members, nested(depth-1, width, fmt.Sprintf("%s%d", tag, i)))
	}
	return `{"anyOf": [` + strings.Join(members, ", ") + `]}`
}
