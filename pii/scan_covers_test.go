package pii

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/deltabus/deltabus/pii/classify"
)

// The scanner must find exactly the values the classification's own
// reading (Classification.Covers) calls personal: every covered, non-null
// value not inside another covered value is one leaf, and nothing else is.
// The reference below walks the payload with encoding/json's tokens, so it
// shares no code with the scanner but the classification.

// refScan is the reference: the personal leaves (start, end, pointer) in
// document order, and the texts of the values the subject pointer finds.
func refScan(t testing.TB, c *classify.Classification, b []byte) (leaves []span, subjects []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func(path classify.Path, toks []string, inLeaf bool)
	walk = func(path classify.Path, toks []string, inLeaf bool) {
		start := valueStart(b, int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reference walk of valid JSON: %v", err)
		}
		personal := !inLeaf && c.Covers(path)
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				name := k.(string)
				walk(append(slices.Clip(path), classify.Seg{Kind: classify.Name, Name: name}), append(slices.Clip(toks), name), inLeaf || personal)
			}
			dec.Token() // }
		case json.Delim('['):
			for k := 0; dec.More(); k++ {
				walk(append(slices.Clip(path), classify.Seg{Kind: classify.AnyIndex}), append(slices.Clip(toks), strconv.Itoa(k)), inLeaf || personal)
			}
			dec.Token() // ]
		}
		end := int(dec.InputOffset())
		if personal && tok != nil {
			leaves = append(leaves, span{start: start, end: end, pointer: pointerOf(toks)})
		}
		if slices.Equal(toks, c.Subject) && len(c.Subject) > 0 {
			subjects = append(subjects, string(b[start:end]))
		}
	}
	walk(nil, nil, false)
	return leaves, subjects
}

// valueStart is where the value after offset i begins: past whitespace
// and the separator the decoder has not returned.
func valueStart(b []byte, i int) int {
	for i < len(b) && strings.IndexByte(" \t\r\n:,", b[i]) >= 0 {
		i++
	}
	return i
}

func pointerOf(toks []string) string {
	var sb strings.Builder
	for _, t := range toks {
		sb.WriteString("/" + classify.EscapeToken(t))
	}
	return sb.String()
}

// checkScanAgrees fails when the scanner and Covers disagree on payload.
func checkScanAgrees(t testing.TB, schema string, c *classify.Classification, payload []byte) {
	t.Helper()
	want, subjects := refScan(t, c, payload)
	f, err := scan(payload, compile(c).all)
	if err != nil {
		t.Fatalf("scan of valid JSON: %v\nschema %s\npayload %s", err, schema, payload)
	}
	got := slices.Clone(f.spans)
	if !slices.Equal(got, want) {
		t.Fatalf("the scanner's personal leaves differ from the classification's (%v)\nschema  %s\npayload %s\nscanner %v\nCovers  %v",
			c.Personal, schema, payload, texts(payload, got), texts(payload, want))
	}
	if f.subjects != len(subjects) {
		t.Fatalf("subject %s: the scanner found %d values, the pointer finds %d\nschema %s\npayload %s", c.SubjectPointer, f.subjects, len(subjects), schema, payload)
	}
	if len(subjects) == 1 && f.badKind == "" {
		v := subjects[0]
		if v[0] == '"' {
			var s string
			json.Unmarshal([]byte(v), &s)
			v = s
		}
		if string(f.subject) != v {
			t.Fatalf("subject %s: the scanner read %q, the pointer finds %q\npayload %s", c.SubjectPointer, f.subject, v, payload)
		}
	}
	// Reveal's pattern finds the same leaves.
	r, err := scan(payload, compile(c).leaves)
	if err != nil || !slices.Equal(r.spans, want) {
		t.Fatalf("the leaves-only pattern finds %v, want %v (%v)\npayload %s", texts(payload, r.spans), texts(payload, want), err, payload)
	}
}

func texts(b []byte, spans []span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s=%s", s.pointer, b[s.start:s.end]))
	}
	return out
}

// TestScanNamedAndWildcard: a member reached by name is also reached by the
// wildcards of its object (patternProperties, additionalProperties); a
// field either marks is personal.
func TestScanNamedAndWildcard(t *testing.T) {
	cases := []struct{ schema, payload string }{
		{`{"x-deltabus-subject":"/id","properties":{"contact":{"properties":{"phone":{"x-deltabus-pii":true}}}},
		   "patternProperties":{"^c":{"properties":{"email":{"x-deltabus-pii":true}}}}}`,
			`{"id":"c-1","contact":{"phone":"+44 1","email":"ada@example.com"},"cx":{"email":"b@example.com","phone":"2"}}`},
		{`{"x-deltabus-subject":"/email","additionalProperties":{"x-deltabus-pii":true}}`,
			`{"email":"ada@example.com","name":"Ada"}`},
		{`{"x-deltabus-subject":"/id","properties":{"id":{},"m":{"properties":{"k":{"properties":{"a":{}}}},"additionalProperties":{"properties":{"a":{"x-deltabus-pii":true}}}}}}`,
			`{"id":1,"m":{"k":{"a":"x","b":"y"},"j":{"a":"z"}}}`},
		{`{"x-deltabus-subject":"/list/1","properties":{"list":{"items":{"x-deltabus-pii":true}},"0":{"x-deltabus-pii":true}}}`,
			`{"list":["a","b"],"0":"c","x":[{"0":1}]}`},
		{`{"x-deltabus-subject":"/customer/id","properties":{"customer":{"x-deltabus-pii":true}},"additionalProperties":{"properties":{"id":{"x-deltabus-pii":true}}}}`,
			`{"customer":{"id":"c-1","name":"Ada"},"other":{"id":"d"}}`},
	}
	for _, tc := range cases {
		c, err := classify.Parse([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		checkScanAgrees(t, tc.schema, c, []byte(tc.payload))
	}
}

// TestScanAgreesWithCoversOnGeneratedSchemas runs the agreement on
// generated schemas (names, wildcards, arrays, combinations, references)
// and payloads built from the same names.
func TestScanAgreesWithCoversOnGeneratedSchemas(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		schema, payload := generated(seed)
		c, err := classify.Parse([]byte(schema))
		if err != nil || !c.HasPersonal() {
			continue
		}
		checkScanAgrees(t, schema, c, []byte(payload))
	}
}

// FuzzScanAgreesWithCovers: any schema that classifies, any valid JSON
// payload (valid UTF-8: encoding/json replaces the rest, the scanner keeps
// it as bytes). Seeds: the corpus in testdata and generated pairs.
func FuzzScanAgreesWithCovers(f *testing.F) {
	for seed := range uint64(64) {
		schema, payload := generated(seed)
		f.Add(schema, payload)
	}
	f.Fuzz(func(t *testing.T, schema, payload string) {
		c, err := classify.Parse([]byte(schema))
		if err != nil || !c.HasPersonal() || !json.Valid([]byte(payload)) || !utf8.ValidString(payload) {
			return
		}
		checkScanAgrees(t, schema, c, []byte(payload))
	})
}

// names are the member names of generated schemas and payloads: they
// collide on purpose (a name of one branch is a wildcard's match in
// another) and need escapes in pointers or literals.
var names = []string{"a", "b", "c", "0", "1", "a/b", "~x", "é"}

// generated returns a schema and a payload made from seed.
func generated(seed uint64) (string, string) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	g := &gen{r: r}
	root := g.object(0)
	root["x-deltabus-subject"] = g.pointer()
	if r.IntN(3) == 0 {
		root["$defs"] = map[string]any{"d": g.schema(3)}
	}
	schema, _ := json.Marshal(root)
	var payload bytes.Buffer
	g.value(&payload, 0)
	return string(schema), payload.String()
}

type gen struct{ r *rand.Rand }

func (g *gen) name() string { return names[g.r.IntN(len(names))] }

func (g *gen) pointer() string {
	var sb strings.Builder
	for range 1 + g.r.IntN(2) {
		sb.WriteString("/" + classify.EscapeToken(g.name()))
	}
	return sb.String()
}

func (g *gen) schema(depth int) any {
	if depth >= 4 {
		return g.leaf()
	}
	switch g.r.IntN(10) {
	case 0, 1, 2:
		return g.leaf()
	case 3, 4, 5:
		return g.object(depth)
	case 6:
		switch g.r.IntN(3) {
		case 0:
			return map[string]any{"items": g.schema(depth + 1)}
		case 1:
			return map[string]any{"prefixItems": []any{g.schema(depth + 1), g.schema(depth + 1)}}
		}
		return map[string]any{"items": []any{g.schema(depth + 1)}, "additionalItems": g.schema(depth + 1)}
	case 7:
		kw := []string{"anyOf", "allOf", "oneOf"}[g.r.IntN(3)]
		return map[string]any{kw: []any{g.schema(depth + 1), g.schema(depth + 1)}}
	case 8:
		return map[string]any{"if": g.schema(depth + 1), "then": g.schema(depth + 1), "else": g.schema(depth + 1)}
	}
	if depth > 0 && g.r.IntN(2) == 0 {
		return map[string]any{"$ref": "#/$defs/d"}
	}
	return g.object(depth)
}

func (g *gen) leaf() any {
	switch g.r.IntN(4) {
	case 0:
		return map[string]any{"x-deltabus-pii": true}
	case 1:
		return map[string]any{"confluent:tags": []any{"PII"}}
	case 2:
		return true
	}
	return map[string]any{"type": "string"}
}

func (g *gen) object(depth int) map[string]any {
	o := map[string]any{}
	if n := g.r.IntN(4); n > 0 {
		props := map[string]any{}
		for range n {
			props[g.name()] = g.schema(depth + 1)
		}
		o["properties"] = props
	}
	if g.r.IntN(3) == 0 {
		o["patternProperties"] = map[string]any{"^" + g.name(): g.schema(depth + 1)}
	}
	if g.r.IntN(3) == 0 {
		o["additionalProperties"] = g.schema(depth + 1)
	}
	return o
}

// value writes a JSON value with the names above, escaped at random, and
// whitespace at random.
func (g *gen) value(w io.Writer, depth int) {
	ws := func() {
		if g.r.IntN(4) == 0 {
			io.WriteString(w, []string{" ", "\n\t", "  "}[g.r.IntN(3)])
		}
	}
	ws()
	kind := g.r.IntN(10)
	if depth == 0 {
		kind = 0 // payloads are objects
	} else if depth >= 5 {
		kind = 9
	}
	switch {
	case kind < 5:
		io.WriteString(w, "{")
		for i := range g.r.IntN(5) {
			if i > 0 {
				io.WriteString(w, ",")
			}
			ws()
			key := g.name()
			lit, _ := json.Marshal(key)
			if g.r.IntN(5) == 0 && key[0] < 0x80 {
				lit = []byte(fmt.Sprintf(`"\u%04x%s`, key[0], lit[2:]))
			}
			w.Write(lit)
			ws()
			io.WriteString(w, ":")
			g.value(w, depth+1)
		}
		ws()
		io.WriteString(w, "}")
	case kind < 8:
		io.WriteString(w, "[")
		for i := range g.r.IntN(4) {
			if i > 0 {
				io.WriteString(w, ",")
			}
			g.value(w, depth+1)
		}
		io.WriteString(w, "]")
	default:
		io.WriteString(w, []string{`"v"`, `12.5`, `null`, `true`, `"a\"b"`}[g.r.IntN(5)])
	}
	ws()
}
