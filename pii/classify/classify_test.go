package classify

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func paths(c *Classification) []string {
	var out []string
	for _, p := range c.Personal {
		out = append(out, p.String())
	}
	return out
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		schema  string
		want    []string
		subject string
		err     string // substring of the error; "" means none
	}{
		{name: "flat properties", schema: `{"x-deltabus-subject":"/customer_id","properties":{
			"customer_id":{"type":"string"},"email":{"type":"string","x-deltabus-pii":true},"total":{"type":"number"}}}`,
			want: []string{"/email"}, subject: "/customer_id"},
		{name: "confluent tags", schema: `{"x-deltabus-subject":"/id","properties":{"name":{"type":"string","confluent:tags":["PII","OTHER"]},
			"note":{"confluent:tags":["OTHER"]}}}`, want: []string{"/name"}, subject: "/id"},
		{name: "nested objects", schema: `{"x-deltabus-subject":"/customer/id","properties":{"customer":{"type":"object","properties":{
			"id":{"type":"string"},"address":{"properties":{"street":{"x-deltabus-pii":true},"city":{"type":"string"}}}}}}}`,
			want: []string{"/customer/address/street"}, subject: "/customer/id"},
		{name: "arrays of objects", schema: `{"x-deltabus-subject":"/id","properties":{"contacts":{"type":"array","items":{
			"properties":{"phone":{"x-deltabus-pii":true}}}}}}`, want: []string{"/contacts/*/phone"}, subject: "/id"},
		{name: "draft-07 tuple items and prefixItems", schema: `{"x-deltabus-subject":"/id","properties":{
			"t":{"items":[{"type":"string"},{"x-deltabus-pii":true}]},"p":{"prefixItems":[{"x-deltabus-pii":true}]}}}`,
			want: []string{"/p/*", "/t/*"}, subject: "/id"},
		{name: "ref into $defs", schema: `{"x-deltabus-subject":"/id","$defs":{"person":{"properties":{"name":{"x-deltabus-pii":true}}}},
			"properties":{"buyer":{"$ref":"#/$defs/person"},"seller":{"$ref":"#/$defs/person"}}}`,
			want: []string{"/buyer/name", "/seller/name"}, subject: "/id"},
		{name: "ref into definitions (draft-07)", schema: `{"x-deltabus-subject":"/id","definitions":{"email":{"type":"string","x-deltabus-pii":true}},
			"properties":{"email":{"$ref":"#/definitions/email"}}}`, want: []string{"/email"}, subject: "/id"},
		{name: "combinations are a union", schema: `{"x-deltabus-subject":"/id","anyOf":[{"properties":{"a":{"x-deltabus-pii":true}}},
			{"properties":{"b":{"confluent:tags":["PII"]}}}],"allOf":[{"properties":{"c":{"x-deltabus-pii":true}}}],
			"if":{"properties":{"d":{"x-deltabus-pii":true}}}}`, want: []string{"/a", "/b", "/c", "/d"}, subject: "/id"},
		{name: "draft-07 schema dependencies", schema: `{"x-deltabus-subject":"/id","dependencies":{"card":{"properties":{"holder":{"x-deltabus-pii":true}}},
			"a":["b"]}}`, want: []string{"/holder"}, subject: "/id"},
		{name: "2019-09 recursive ref with marks", schema: `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,
			"x-deltabus-subject":"/id","properties":{"name":{"x-deltabus-pii":true},"kids":{"items":{"$recursiveRef":"#"}}}}`, err: "recursive $ref"},
		{name: "maps", schema: `{"x-deltabus-subject":"/id","properties":{"m":{"additionalProperties":{"x-deltabus-pii":true}}}}`,
			want: []string{"/m/*"}, subject: "/id"},
		{name: "a marked object is one leaf", schema: `{"x-deltabus-subject":"/id","properties":{"addr":{"x-deltabus-pii":true,
			"properties":{"street":{"x-deltabus-pii":true}}},"m":{"additionalProperties":{"x-deltabus-pii":true},"properties":{"k":{"x-deltabus-pii":true}}}}}`,
			want: []string{"/addr", "/m/*"}, subject: "/id"},
		{name: "escaped names", schema: `{"x-deltabus-subject":"/a~1b","properties":{"a/b":{},"x~y":{"x-deltabus-pii":true}}}`,
			want: []string{"/x~0y"}, subject: "/a~1b"},
		{name: "false mark", schema: `{"properties":{"a":{"x-deltabus-pii":false}}}`},
		{name: "nothing marked", schema: `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{name: "subject alone", schema: `{"x-deltabus-subject":"/id"}`, subject: "/id"},
		{name: "recursive ref without marks", schema: `{"x-deltabus-subject":"/id","$defs":{"node":{"properties":{"kids":{"items":{"$ref":"#/$defs/node"}}}}},
			"properties":{"tree":{"$ref":"#/$defs/node"},"email":{"x-deltabus-pii":true}}}`, want: []string{"/email"}, subject: "/id"},

		{name: "no subject", schema: `{"properties":{"email":{"x-deltabus-pii":true}}}`, err: `names no data subject`},
		{name: "subject not a pointer", schema: `{"x-deltabus-subject":"id","properties":{"email":{"x-deltabus-pii":true}}}`, err: "must start with /"},
		{name: "subject not a string", schema: `{"x-deltabus-subject":3}`, err: "non-empty JSON pointer"},
		{name: "mark not a boolean", schema: `{"x-deltabus-subject":"/id","properties":{"a":{"x-deltabus-pii":"yes"}}}`, err: "must be true or false"},
		{name: "tags not an array", schema: `{"x-deltabus-subject":"/id","properties":{"a":{"confluent:tags":"PII"}}}`, err: "array of strings"},
		{name: "remote ref", schema: `{"x-deltabus-subject":"/id","properties":{"a":{"$ref":"https://example.com/p.json"}}}`, err: "outside the document"},
		{name: "dangling ref", schema: `{"x-deltabus-subject":"/id","properties":{"a":{"$ref":"#/$defs/none"}}}`, err: "finds nothing"},
		{name: "recursive ref with marks", schema: `{"x-deltabus-subject":"/id","$defs":{"node":{"properties":{"name":{"x-deltabus-pii":true},
			"kids":{"items":{"$ref":"#/$defs/node"}}}}},"properties":{"tree":{"$ref":"#/$defs/node"}}}`, err: "recursive $ref"},
		{name: "root marked", schema: `{"x-deltabus-subject":"/id","x-deltabus-pii":true}`, err: "whole document"},
		{name: "not JSON", schema: `{`, err: "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.schema))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil && tc.subject == "" {
				if c != nil {
					t.Fatalf("got %+v, want nil", c)
				}
				return
			}
			if got := paths(c); !slices.Equal(got, tc.want) {
				t.Errorf("personal = %q, want %q", got, tc.want)
			}
			if c.SubjectPointer != tc.subject {
				t.Errorf("subject = %q, want %q", c.SubjectPointer, tc.subject)
			}
		})
	}
}

func TestParsePointer(t *testing.T) {
	got, err := ParsePointer("/a~1b/c~0d/0")
	if err != nil || !slices.Equal(got, []string{"a/b", "c~d", "0"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ParsePointer("/a~2"); err == nil {
		t.Fatal("bad escape accepted")
	}
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("customers/signed_up/1.json", `{"x-deltabus-subject":"/id","properties":{"email":{"x-deltabus-pii":true}}}`)
	write("customers/signed_up/2.json", `{"x-deltabus-subject":"/id","properties":{"email":{"x-deltabus-pii":true},"name":{"x-deltabus-pii":true}}}`)
	write("customers/topic.json", `{"pseudonymize_key":true}`)
	write("orders/placed/1.json", `{"properties":{"total":{"type":"number"}}}`)
	s, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Classify(t.Context(), "customers", "signed_up", 2); err != nil || !slices.Equal(paths(c), []string{"/email", "/name"}) {
		t.Fatalf("v2: %v %v", c, err)
	}
	if _, err := s.Classify(t.Context(), "customers", "signed_up", 3); err == nil || !strings.Contains(err.Error(), "no schema for this version") {
		t.Fatalf("unknown version of a personal type: %v", err)
	}
	if c, err := s.Classify(t.Context(), "orders", "placed", 1); c != nil || err != nil {
		t.Fatalf("orders: %v %v", c, err)
	}
	if c, err := s.Classify(t.Context(), "orders", "placed", 7); c != nil || err != nil {
		t.Fatalf("unknown version of a type without personal data: %v %v", c, err)
	}
	if !s.PseudonymizeKey("customers") || s.PseudonymizeKey("orders") || !s.Any() {
		t.Fatal("topic settings")
	}
	write("bad/t/x.json", `{}`)
	if _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "positive integer") {
		t.Fatalf("bad version file name: %v", err)
	}
	os.Remove(filepath.Join(dir, "bad/t/x.json"))
	write("bad/t/1.json", `{"properties":{"email":{"x-deltabus-pii":true}}}`)
	if _, err := ReadDir(dir); err == nil || !strings.Contains(err.Error(), "bad/t/1.json") {
		t.Fatalf("schema without subject: %v", err)
	}
}
