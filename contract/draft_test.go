package contract

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/contract/compat"
	"github.com/deltabus/deltabus/usererr"
)

func TestParseDraft(t *testing.T) {
	for in, want := range map[string]string{
		"draft-04": Draft04, "4": Draft04, "04": Draft04, "draft4": Draft04, "http://json-schema.org/draft-04/schema#": Draft04,
		"draft-06": Draft06, "6": Draft06, "https://json-schema.org/draft-06/schema": Draft06,
		"draft-07": Draft07, "7": Draft07, "Draft-07": Draft07, "http://json-schema.org/draft-07/schema": Draft07,
		"2019-09": Draft2019, "draft2019-09": Draft2019, "https://json-schema.org/draft/2019-09/schema": Draft2019,
		"2020-12": Draft2020, "draft/2020-12": Draft2020, "http://json-schema.org/draft/2020-12/schema#": Draft2020,
	} {
		if got, err := ParseDraft(in); err != nil || got != want {
			t.Errorf("ParseDraft(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "draft-05", "2021-01", "https://json-schema.org/schema", "07x"} {
		if _, err := ParseDraft(in); err == nil || !strings.Contains(err.Error(), "draft-07") || !strings.Contains(err.Error(), "2020-12") {
			t.Errorf("ParseDraft(%q): %v; want an error naming the drafts", in, err)
		}
	}
	for _, d := range drafts {
		if got, _ := ParseDraft(DraftName(d.uri)); got != d.uri {
			t.Errorf("DraftName(%s) = %q does not parse back", d.uri, DraftName(d.uri))
		}
	}
}

func TestWithDraft(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:                           `{"$schema":"http://json-schema.org/draft-07/schema#"}`,
		" { \n}":                       ` {"$schema":"http://json-schema.org/draft-07/schema#" ` + "\n}",
		`{"type":"object"}`:            `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
		"\n{\n  \"type\": \"string\"}": "\n{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\n  \"type\": \"string\"}",
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"string"}`: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"string"}`,
	} {
		got := string(WithDraft([]byte(in), Draft07))
		if got != want {
			t.Errorf("WithDraft(%q) = %q, want %q", in, got, want)
		}
		if _, err := Compile("t", "T", 1, []byte(got)); err != nil {
			t.Errorf("WithDraft(%q) does not compile: %v", in, err)
		}
	}
}

// draftCase is a schema and documents its draft's rules accept and
// refuse, where another draft would answer otherwise.
type draftCase struct {
	name, schema, asked, want string
	valid, invalid            []string
}

var draftCases = []draftCase{
	{name: "no $schema is draft-07: items is a tuple, additionalItems closes it",
		schema: `{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}`,
		want:   Draft07, valid: []string{`["a",1]`, `["a"]`}, invalid: []string{`["a",1,2]`, `[1,"a"]`}},
	{name: "no $schema is draft-07: $ref ignores its siblings",
		schema: `{"definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s","maxLength":1}}}`,
		want:   Draft07, valid: []string{`{"a":"abc"}`}, invalid: []string{`{"a":1}`}},
	{name: "no $schema is draft-07: formats are asserted",
		schema: `{"type":"string","format":"date-time"}`,
		want:   Draft07, valid: []string{`"2026-12-06T10:00:00Z"`}, invalid: []string{`"yesterday"`}},
	{name: "no $schema is draft-07: dependencies",
		schema: `{"dependencies":{"card":["holder"],"iban":{"required":["bic"]}}}`,
		want:   Draft07, valid: []string{`{"card":1,"holder":"x"}`, `{"iban":1,"bic":2}`}, invalid: []string{`{"card":1}`, `{"iban":1}`}},
	{name: "--draft 2020-12: prefixItems, and items past them",
		schema: `{"type":"array","prefixItems":[{"type":"string"}],"items":false}`, asked: Draft2020,
		want: Draft2020, valid: []string{`["a"]`}, invalid: []string{`["a",1]`, `[1]`}},
	{name: "--draft 2020-12: $ref beside other keywords, formats annotate",
		schema: `{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s","maxLength":1},"d":{"format":"date-time"}}}`, asked: Draft2020,
		want: Draft2020, valid: []string{`{"a":"x","d":"yesterday"}`}, invalid: []string{`{"a":"abc"}`}},
	{name: "draft-04: boolean exclusiveMaximum",
		schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","maximum":5,"exclusiveMaximum":true}`,
		want:   Draft04, valid: []string{`4.5`}, invalid: []string{`5`}},
	{name: "draft-06: const and contains",
		schema: `{"$schema":"http://json-schema.org/draft-06/schema#","type":"array","contains":{"const":1}}`,
		want:   Draft06, valid: []string{`[2,1]`}, invalid: []string{`[2,3]`}},
	{name: "draft-07 named: if/then",
		schema: `{"$schema":"http://json-schema.org/draft-07/schema#","if":{"required":["a"]},"then":{"required":["b"]}}`,
		want:   Draft07, valid: []string{`{"a":1,"b":2}`, `{}`}, invalid: []string{`{"a":1}`}},
	{name: "2019-09: a tuple of items and dependentRequired",
		schema: `{"$schema":"https://json-schema.org/draft/2019-09/schema","items":[{"type":"string"}],"additionalItems":false,"dependentRequired":{"a":["b"]}}`,
		want:   Draft2019, valid: []string{`["a"]`, `{"a":1,"b":1}`}, invalid: []string{`["a","b"]`, `{"a":1}`}},
	{name: "2020-12 named, whatever --draft would say for a schema without one",
		schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","prefixItems":[{"type":"integer"}]}`,
		want:   Draft2020, valid: []string{`[1,"x"]`}, invalid: []string{`["x"]`}},
}

// TestCompileReadsEachDraft: validation follows the draft a schema is
// read in, on the fast path and the library's alike.
func TestCompileReadsEachDraft(t *testing.T) {
	for _, c := range draftCases {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompileAs("t", "T", 1, []byte(c.schema), c.asked)
			if err != nil {
				t.Fatal(err)
			}
			if s.Draft != c.want || s.Declared != (DeclaredDraft([]byte(c.schema)) != "") || s.Legacy {
				t.Fatalf("read as %s (declared %v, legacy %v), want %s", s.Draft, s.Declared, s.Legacy, c.want)
			}
			for _, d := range c.valid {
				if v := s.Validate([]byte(d)); v != nil {
					t.Errorf("%s refused: %v", d, v)
				}
				checkAgreement(t, s, []byte(d))
			}
			for _, d := range c.invalid {
				if s.Validate([]byte(d)) == nil {
					t.Errorf("%s accepted", d)
				}
				checkAgreement(t, s, []byte(d))
			}
		})
	}
}

func TestCompileRefusesWhatItCannotRead(t *testing.T) {
	for _, c := range []struct {
		schema, asked, want string
	}{
		{`{"$schema":"http://json-schema.org/draft-04/schema#"}`, Draft2020, "names $schema draft-04, and draft 2020-12 was asked for"},
		{`{}`, "draft-05", "unknown JSON Schema draft"},
		{`{"$schema":"http://json-schema.org/draft-05/schema#"}`, "", "draft-04"},
		{`{"$schema":"https://json-schema.org/schema"}`, "", "2020-12"},
		{`{"$schema":7}`, "", "draft-07"},
		{`{"items":[{"type":"string"}]}`, Draft2020, "not a valid JSON Schema 2020-12"},
		{`{"type":"array","items":[{"type":"string"}],"additionalItems":3}`, "", "not a valid JSON Schema draft-07"},
	} {
		_, err := CompileAs("t", "T", 1, []byte(c.schema), c.asked)
		var se *SchemaError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s as %q: %v; want a SchemaError with %q", c.schema, c.asked, err, c.want)
		}
	}
}

// TestRegisterRecordsTheDraft: the registry stores a schema naming the
// draft it was read in, judges and enforces it so, and a registration
// again is a no-op only in the same draft.
func TestRegisterRecordsTheDraft(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	r := NewRegistry(st, nil)
	tuple := `{"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"integer"}}`
	out, err := r.Register(ctx, Registration{Topic: "t", Type: "Tuple", Version: 1, Schema: []byte(tuple)})
	if err != nil || !out.New || out.Draft != Draft07 || out.Declared || out.Legacy {
		t.Fatalf("register: %+v %v", out, err)
	}
	if b, _ := r.Schema(ctx, "t", "Tuple", 1); string(b) != string(WithDraft([]byte(tuple), Draft07)) {
		t.Fatalf("stored %s", b)
	}
	for _, draft := range []string{"", Draft07} {
		if out, err := r.Register(ctx, Registration{Topic: "t", Type: "Tuple", Version: 1, Schema: []byte(tuple), Draft: draft}); err != nil || out.New || out.Draft != Draft07 {
			t.Fatalf("again as %q: %+v %v", draft, out, err)
		}
	}
	// The same bytes read as 2020-12 are another schema (and not one:
	// a tuple of items is no 2020-12 schema); so is a prefixItems one.
	_, err = r.Register(ctx, Registration{Topic: "t", Type: "Tuple", Version: 1, Schema: []byte(`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"array","items":[{"type":"string"}],"additionalItems":{"type":"integer"}}`)})
	if !usererr.Is(err) || !strings.Contains(err.Error(), "registered as JSON Schema draft-07, not 2019-09") {
		t.Fatalf("another draft of version 1: %v", err)
	}
	// Confluent's ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL,
	// then _IS_COVERED_, judged in draft-07.
	_, err = r.Register(ctx, Registration{Topic: "t", Type: "Tuple", Version: 2, Schema: []byte(`{"type":"array","items":[{"type":"string"},{"type":"string"}],"additionalItems":{"type":"integer"}}`)})
	var ie *IncompatibleError
	if !errors.As(err, &ie) || !slices.ContainsFunc(ie.Differences, func(d compat.Difference) bool {
		return d.Rule == "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" && d.Pointer == "#/items/1"
	}) {
		t.Fatalf("an item added that additionalItems does not cover: %v", err)
	}
	if out, err := r.Register(ctx, Registration{Topic: "t", Type: "Tuple", Version: 2, Schema: []byte(`{"type":"array","items":[{"type":"string"},{"type":"integer"}]}`)}); err != nil || out.PrevDraft != Draft07 || out.PrevLegacy {
		t.Fatalf("an item added that additionalItems covers: %+v %v", out, err)
	}
	c := New(st, Options{Poll: -1})
	for doc, ok := range map[string]bool{`["a",1,2]`: true, `["a","b"]`: false} {
		if v, err := c.Check(ctx, "t", "Tuple", 2, []byte(doc)); err != nil || (v == nil) != ok {
			t.Errorf("v2 on %s: %v %v, want valid=%v", doc, v, err, ok)
		}
	}
}

// legacyPut writes a schema as a registry of a version before draft-07
// was the default holds it: as given, without "$schema".
func legacyPut(t *testing.T, st *countingStore, topic, typ string, v int32, schema string) {
	t.Helper()
	key, err := catalog.Key(catalog.KindContract, topic, typ, itoa(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Store.PutIfAbsent(context.Background(), key, []byte(schema)); err != nil {
		t.Fatal(err)
	}
}

// TestLegacySchemasKeepTheirDraft: a schema a registry holds without
// "$schema" is read as 2020-12, as when it was registered: by the relay
// (which says so once), by the checker judging a new version, by show; the
// same schema registered again is a no-op; a new version without
// "$schema" is draft-07, unless asked otherwise.
func TestLegacySchemasKeepTheirDraft(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	legacy := `{"type":"object","properties":{"tags":{"type":"array","prefixItems":[{"type":"string"}],"items":false}},"dependentRequired":{"a":["b"]}}`
	legacyPut(t, st, "t", "Old", 1, legacy)
	legacyPut(t, st, "t", "Old2", 1, legacy)

	var logs bytes.Buffer
	c := New(st, Options{Poll: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, typ := range []string{"Old", "Old2"} {
		for doc, ok := range map[string]bool{`{"tags":["x"]}`: true, `{"tags":[1]}`: false, `{"tags":["x","y"]}`: false, `{"a":1}`: false} {
			if v, err := c.Check(ctx, "t", typ, 1, []byte(doc)); err != nil || (v == nil) != ok {
				t.Errorf("%s v1 on %s: %v %v, want valid=%v", typ, doc, v, err, ok)
			}
		}
	}
	if n := strings.Count(logs.String(), "read as JSON Schema draft 2020-12"); n != 1 {
		t.Errorf("the operator was told %d times, want once:\n%s", n, logs.String())
	}

	r := NewRegistry(st, nil)
	s, err := r.Contract(ctx, "t", "Old", 0)
	if err != nil || s.Draft != Draft2020 || !s.Legacy || s.Declared {
		t.Fatalf("contract: %+v %v", s, err)
	}
	out, err := r.Register(ctx, Registration{Topic: "t", Type: "Old", Version: 1, Schema: []byte(legacy)})
	if err != nil || out.New || !out.Legacy || out.Draft != Draft2020 {
		t.Fatalf("the legacy schema registered again: %+v %v", out, err)
	}
	if _, err := r.Register(ctx, Registration{Topic: "t", Type: "Old", Version: 1, Schema: []byte(legacy), Draft: Draft07}); err == nil || !strings.Contains(err.Error(), "registered as JSON Schema 2020-12, not draft-07") {
		t.Fatalf("the legacy schema registered again as draft-07: %v", err)
	}
	// v1 is judged as 2020-12: its dependentRequired is draft-07's
	// dependencies, unchanged (read as draft-07, v1 would have none, and
	// adding one is DEPENDENCY_ARRAY_ADDED).
	next := `{"type":"object","properties":{"tags":{"type":"array","items":[{"type":"string"}],"additionalItems":false}},"dependencies":{"a":["b"]}}`
	out, err = r.Register(ctx, Registration{Topic: "t", Type: "Old", Version: 2, Schema: []byte(next)})
	if err != nil || !out.New || out.Draft != Draft07 || !out.PrevLegacy || out.PrevDraft != Draft2020 {
		t.Fatalf("v2 without $schema: %+v %v", out, err)
	}
	out, err = r.Register(ctx, Registration{Topic: "t", Type: "Old2", Version: 2, Schema: []byte(legacy), Draft: Draft2020})
	if err != nil || !out.New || out.Draft != Draft2020 || out.Legacy {
		t.Fatalf("v2 of the legacy schema, asked as 2020-12: %+v %v", out, err)
	}
	if b, _ := r.Schema(ctx, "t", "Old2", 2); DeclaredDraft(b) != Draft2020 {
		t.Fatalf("v2 stored as %s", b)
	}
}

// TestCheckDirDrafts: a directory's file without "$schema" is read as
// draft-07, as register reads it; the registry's legacy version of the
// same schema is 2020-12, which check says, and the fix (naming the draft
// in the file) makes them agree.
func TestCheckDirDrafts(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	legacy := `{"type":"array","prefixItems":[{"type":"string"}]}`
	legacyPut(t, st, "t", "Old", 1, legacy)
	r := NewRegistry(st, nil)
	tuple := `{"type":"array","items":[{"type":"string"}],"additionalItems":false}`
	register(t, r, "t", "New", 1, tuple)

	check := func(files map[string]string) map[string]DirResult {
		t.Helper()
		fsys := fstest.MapFS{}
		for p, s := range files {
			fsys[p] = &fstest.MapFile{Data: []byte(s)}
		}
		cs, _, err := ReadDir(fsys)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.CheckDir(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]DirResult{}
		for _, x := range res {
			out[x.Path] = x
		}
		return out
	}
	res := check(map[string]string{"t/Old/1.json": legacy, "t/New/1.json": tuple})
	if x := res["t/Old/1.json"]; x.Status != DirDraftDiffers || x.OK() || x.RegistryDraft != Draft2020 || !strings.Contains(x.String(), `"$schema": "https://json-schema.org/draft/2020-12/schema"`) {
		t.Errorf("legacy: %+v %s", x, x.String())
	}
	if x := res["t/New/1.json"]; x.Status != DirRegistered {
		t.Errorf("draft-07: %+v", x)
	}
	res = check(map[string]string{
		"t/Old/1.json": `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","prefixItems":[{"type":"string"}]}`,
		"t/New/1.json": `{"$schema":"https://json-schema.org/draft-07/schema","type":"array","items":[{"type":"string"}],"additionalItems":false}`,
		"t/New/2.json": `{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}`,
	})
	for p, want := range map[string]DirStatus{"t/Old/1.json": DirRegistered, "t/New/1.json": DirRegistered, "t/New/2.json": DirNew} {
		if x := res[p]; x.Status != want {
			t.Errorf("%s: %+v, want %s", p, x, want)
		}
	}

	// FromDir reads a file without "$schema" as draft-07.
	c, err := FromDir(fstest.MapFS{"t/New/1.json": &fstest.MapFile{Data: []byte(tuple)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Check(ctx, "t", "New", 1, []byte(`["a","b"]`)); v == nil || err != nil {
		t.Fatalf("FromDir accepted an item past a closed tuple: %v", err)
	}
}

// TestMarksFollowTheDraft: a mark under draft-07's dependencies is seen,
// and dropping it is refused like any other.
func TestMarksFollowTheDraft(t *testing.T) {
	ctx := context.Background()
	r := NewRegistry(newStore(t), nil)
	v1 := `{"x-deltabus-subject":"/id","properties":{"id":{"type":"string"}},"dependencies":{"card":{"properties":{"holder":{"type":"string","x-deltabus-pii":true}}}}}`
	register(t, r, "t", "Paid", 1, v1)
	s, err := r.Contract(ctx, "t", "Paid", 1)
	if err != nil || s.Draft != Draft07 || !s.Personal().HasPersonal() || s.Personal().Personal[0].String() != "/holder" {
		t.Fatalf("marks of a draft-07 schema: %+v %v", s, err)
	}
	_, err = r.Register(ctx, Registration{Topic: "t", Type: "Paid", Version: 2, Mode: compat.None,
		Schema: []byte(`{"x-deltabus-subject":"/id","properties":{"id":{"type":"string"}},"dependencies":{"card":{"properties":{"holder":{"type":"string"}}}}}`)})
	var ie *IncompatibleError
	if !errors.As(err, &ie) || ie.Differences[0].Rule != RulePersonalMarkRemoved {
		t.Fatalf("a mark dropped: %v", err)
	}
}
