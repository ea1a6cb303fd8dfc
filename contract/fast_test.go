package contract

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	jsonStd "encoding/json"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fastSchemas exercise every keyword the fast path decides, in every
// draft each is valid in (inDrafts), and some it leaves to the library.
var fastSchemas = []string{
	`{"type":"object","required":["order_id","amount"],"properties":{"order_id":{"type":"integer"},"amount":{"type":"number","minimum":0,"exclusiveMaximum":1000000},"currency":{"enum":["EUR","USD"]},"lines":{"type":"array","minItems":1,"items":{"type":"object","required":["sku"],"properties":{"sku":{"type":"string","pattern":"^sku-[0-9]+$"},"qty":{"type":"integer","minimum":1,"maximum":5}}}}},"additionalProperties":false}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":["string","null"],"minLength":2,"maxLength":4},"b":{"const":3},"c":{"items":[{"type":"integer"},{"type":"string"}],"additionalItems":false},"d":{"format":"date-time"},"e":{"$ref":"#/definitions/e","type":"string"}},"definitions":{"e":{"maxLength":3}}}`,
	`{"anyOf":[{"type":"integer","multipleOf":3},{"type":"string","maxLength":1}],"not":{"const":9}}`,
	`{"oneOf":[{"type":"number","minimum":1.5},{"type":"number","maximum":2.25}]}`,
	`{"if":{"type":"object","required":["kind"],"properties":{"kind":{"const":"card"}}},"then":{"required":["card"]},"else":{"maxProperties":2}}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"type":"array","prefixItems":[{"type":"boolean"},{"enum":[1,"1",null,true,1.5,[1],{"a":1}]}],"items":{"type":"string"},"maxItems":4,"uniqueItems":true}`,
	`{"type":"object","patternProperties":{"^x-":{"type":"string"}},"additionalProperties":{"type":"number","exclusiveMinimum":-1e300}}`,
	`{"allOf":[{"type":"object","minProperties":1},{"propertyNames":{"maxLength":3}}],"dependentRequired":{"a":["b"]}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","items":{"type":"integer","maximum":9007199254740993},"additionalItems":false,"contains":{"const":1}}`,
	`{"type":["integer","boolean"],"minimum":0.1,"maximum":100}`,
	`{"type":"string","enum":["a\"b","é","\\"]}`,
	`{"properties":{"a":false,"b":true},"required":["b"],"unevaluatedProperties":false}`,
	`{"type":"number","multipleOf":0.5,"maximum":1e400}`,
	`{"properties":{"a\ufffd":{"type":"string"},"é":{"maxLength":1}},"patternProperties":{"^x-.$":{"const":"\ufffd"}},"additionalProperties":false}`,
	`{"type":["array","number"],"minimum":0,"items":{"type":"number","maximum":5}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":10,"exclusiveMaximum":true},"t":{"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"integer"}}},"dependencies":{"n":["t"]}}`,
	`{"$schema":"http://json-schema.org/draft-06/schema#","properties":{"c":{"const":"x"},"e":{"$ref":"#/definitions/e","maxLength":1}},"definitions":{"e":{"type":"string","maxLength":3}},"propertyNames":{"maxLength":2}}`,
	`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"array","items":[{"type":"integer"},{"type":"string","maxLength":2}],"additionalItems":{"type":"boolean"},"maxItems":5}`,
	`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$recursiveRef":"#"}}}}`,
	`{"type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":0},"t":{"items":[{"type":"string"}],"additionalItems":false}},"dependencies":{"n":{"required":["t"]}}}`,
}

var fastDocs = []string{
	`{"order_id": 1, "amount": 2.5, "currency": "EUR", "lines": [{"sku": "sku-1", "qty": 2}]}`,
	`{"order_id": 1.0, "amount": 0, "currency": "USD", "lines": [{"sku": "sku-12"}]}`,
	`{"order_id": 1.5, "amount": -1, "currency": "GBP", "lines": []}`,
	`{"order_id": 1e2, "amount": 1000000, "lines": [{"sku": "x", "qty": 6}], "extra": 1}`,
	`{"order_id": "1", "amount": 999999.99999999999999999, "lines": [{"qty": 0}]}`,
	`{"a":"abc","b":3,"c":[1,"x"],"d":"2026-12-02T03:00:00Z","e":"abc"}`,
	`{"a":null,"b":3.0,"c":[1,"x",2],"d":"yesterday","e":"abcd"}`,
	`{"a":"a","b":"3","c":[],"d":5,"e":5}`,
	`{"a":"\u00e9\u00e9","e":"a\nb"}`,
	`9`, `6`, `7`, `"a"`, `"ab"`, `3.0`, `-0`, `1e1`, `[]`, `{}`, `null`, `true`, `false`, `""`,
	`1.5`, `2`, `2.25`, `1.75`, `0.5`, `1e400`, `-1e400`, `1.0000000000000000001`, `0.1`, `100`, `100.0`, `0.09999999999999999999`,
	`{"kind":"card","card":1}`, `{"kind":"card"}`, `{"kind":"cash","a":1,"b":2,"c":3}`, `{"kind":"cash"}`, `{"kind":"cash","kind":"card"}`,
	`{"v":1,"next":{"v":2,"next":{"v":3}}}`, `{"v":1,"next":{"v":"2"}}`, `{"v":1,"w":2}`,
	`[true,1,"a"]`, `[true,1.5,"a","b","c"]`, `[false,"1",2]`, `[true,[1]]`, `[true,{"a":1}]`, `[true,1,"a","a"]`, `[1]`,
	`{"x-a":"s","n":0}`, `{"x-a":1}`, `{"n":-1}`, `{"n":-0.5,"x-b":""}`, `{"x\u002da":"s"}`,
	`{"a":1}`, `{"a":1,"b":2}`, `{"abcd":1}`, `[1,2,3]`, `[9007199254740993]`, `[9007199254740994]`, `[1.5]`,
	`{"b":1}`, `{"a":1,"b":1}`, `"a\"b"`, `"é"`, `"\\"`, `"a\\\"b"`, `"\u00e9"`,
	`{"order_id": 1, "amount": 2.5, "lines": [{"sku": "sku-1", "qty": 2}], "lines": 5}`,
	`1e1000001`, `[1e-1000001]`, `{"n":1e1000001}`, "{\"a\xff\":1}", "{\"\xc3\xa9\":1,\"x-\xff\":\"\xff\"}",
	`{"n":5,"t":["a",1]}`, `{"n":0}`, `{"n":10,"t":["a","b"]}`, `{"n":5}`, `{"t":["a"]}`, `[1,"ab",true]`, `[1,"abc"]`, `[1,"a",2]`,
	`{"c":"x","e":"ab"}`, `{"c":"y","e":"abcd"}`, `{"v":1,"kids":[{"v":2,"kids":[]}]}`, `{"v":1,"kids":[{"v":"x"}]}`,
	" \n{\"order_id\" : 7 , \"amount\" : 1 , \"lines\" : [ { \"sku\" : \"sku-9\" } ] }\t",
}

// declaredRE finds a schema's leading "$schema" member.
var declaredRE = regexp.MustCompile(`^\{"\$schema":"[^"]*",`)

// wrapped puts src inside wrap as a resource of its own (its references
// stay its own), in src's draft (its $schema moves to the root, and the
// resource is named by draft-04's "id" there).
func wrapped(wrap, src, draft string) string {
	if wrap == "%s" {
		return src
	}
	decl := declaredRE.FindString(src)
	idKw := "$id"
	if draft == Draft04 {
		idKw = "id"
	}
	inner := `{"` + idKw + `":"https://inner.invalid/s.json",` + strings.TrimPrefix(src, decl)[1:]
	out := fmt.Sprintf(wrap, inner)
	if decl != "" {
		out = decl + out[1:]
	}
	return out
}

// inDrafts compiles src in every draft it is a valid schema of (only the
// one it names, when it names one), each wrapped in wrap.
func inDrafts(t testing.TB, wrap, src string) []*Schema {
	t.Helper()
	var out []*Schema
	for _, d := range drafts {
		if decl := DeclaredDraft([]byte(src)); decl != "" && decl != d.uri {
			continue
		}
		if s, err := CompileAs("t", "T", 1, []byte(wrapped(wrap, src, d.uri)), d.uri); err == nil {
			out = append(out, s)
		}
	}
	if len(out) == 0 && wrap == "%s" {
		t.Fatalf("%s compiles in no draft", src)
	}
	return out
}

func compileT(t testing.TB, src string) *Schema {
	t.Helper()
	s, err := Compile("t", "T", 1, []byte(src))
	if err != nil {
		t.Fatalf("compile %s: %v", src, err)
	}
	return s
}

// checkAgreement fails when the fast path contradicts the library on doc.
func checkAgreement(t testing.TB, s *Schema, doc []byte) result {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return unsure
	}
	evaluated, err := s.libValidate(v)
	lib := evaluated && err == nil
	got := s.fastResult(doc)
	if !evaluated && got == valid {
		t.Fatalf("fast path says valid where the library cannot evaluate\nschema %s\ndoc %s", s.raw, doc)
	}
	if evaluated && (got == valid && !lib || got == invalid && lib) {
		t.Fatalf("fast path says %v, library says valid=%v\nschema %s\ndoc %s", got, lib, s.raw, doc)
	}
	// What the fast path does not decide, Validate refuses when a number
	// is beyond the library's reach, whatever order the library walks the
	// payload in (it may not reach that number in one run and fail on it
	// in the next).
	want := lib
	if got != valid && !representable(v) {
		want = false
	}
	if (s.Validate(doc) == nil) != want {
		t.Fatalf("Validate disagrees with the library (valid=%v)\nschema %s\ndoc %s", want, s.raw, doc)
	}
	return got
}

func (r result) String() string { return [...]string{"valid", "invalid", "unsure"}[r] }

// TestFastAgreesWithLibrary: on every schema and document, and on the
// schema's negation (which turns a wrong "valid" into a wrong "invalid"),
// the fast path never contradicts the library; and it decides most of the
// cases it is made for.
func TestFastAgreesWithLibrary(t *testing.T) {
	decided := 0
	total := 0
	for _, src := range fastSchemas {
		for _, wrap := range []string{"%s", `{"not":%s}`, `{"allOf":[%s,true]}`, `{"anyOf":[false,%s]}`} {
			for _, s := range inDrafts(t, wrap, src) {
				for _, d := range fastDocs {
					total++
					if checkAgreement(t, s, []byte(d)) != unsure {
						decided++
					}
				}
			}
		}
	}
	if decided < total/2 {
		t.Fatalf("the fast path decided only %d of %d cases", decided, total)
	}
	t.Logf("fast path decided %d of %d cases", decided, total)
}

// FuzzFastAgreesWithLibrary: any JSON document, against every schema and
// its negation.
func FuzzFastAgreesWithLibrary(f *testing.F) {
	for _, d := range append(fastDocs, notJSONDocs...) {
		f.Add([]byte(d))
	}
	var schemas []*Schema
	for _, src := range fastSchemas {
		schemas = append(schemas, inDrafts(f, "%s", src)...)
		schemas = append(schemas, inDrafts(f, `{"not":%s}`, src)...)
	}
	for _, src := range []string{`{"not":false}`, `{}`, `{"type":"object"}`, `{"type":"array","items":{"type":"object","properties":{"a":true}}}`} {
		schemas = append(schemas, compileT(f, src))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !jsonValid(doc) {
			checkNotJSON(t, schemas, doc)
			return
		}
		for _, s := range schemas {
			checkAgreement(t, s, doc)
		}
	})
}

// checkNotJSON fails when the fast path calls text that is not JSON valid:
// Validate takes any bytes, and only the library may refuse them.
func checkNotJSON(t testing.TB, schemas []*Schema, doc []byte) {
	for _, s := range schemas {
		if s.fastResult(doc) == valid || s.Validate(doc) == nil {
			t.Fatalf("text that is not JSON passes\nschema %s\ndoc %q", s.raw, doc)
		}
	}
}

// notJSON is text the fast path must not take for JSON.
var notJSONDocs = []string{
	`{"a": SECRET}`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `{"a":1 "b":2}`, `tru`, `nul`, `falsey`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`,
	"\"a\tb\"", `"\x41"`, `"\u12g4"`, `"abc`, `{"a":[1,2}`, `[{"a":1]]`, `{"a":1}}`, `1 2`, `{1:2}`, `[1:2]`, `{"a":1,"b"}`,
	`[true false]`, `{"a":"b":"c"}`, "{\"a\":\"\x01\"}", `[-01]`, `{"order_id":1,"amount":1,"lines":[{"sku":"sku-1"}],}`, ``, ` `,
}

func TestFastRefusesWhatIsNotJSON(t *testing.T) {
	var schemas []*Schema
	for _, src := range append(fastSchemas, `{"not":false}`, `{}`, `{"type":"object"}`) {
		schemas = append(schemas, compileT(t, src))
	}
	for _, d := range notJSONDocs {
		if jsonValid([]byte(d)) {
			t.Fatalf("%q is JSON", d)
		}
		checkNotJSON(t, schemas, []byte(d))
	}
}

func jsonValid(b []byte) bool {
	_, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return err == nil && strings.TrimSpace(string(b)) != "" && validJSON(b)
}

func validJSON(b []byte) bool { return jsonStd.Valid(b) }

// TestUnrepresentableNumberIsAlwaysRefused: a payload holding a number
// beyond the library's reach gets the same answer every time, although
// the library, walking its members in map order, reaches that number in
// some runs only (found by FuzzFastAgreesWithLibrary).
func TestUnrepresentableNumberIsAlwaysRefused(t *testing.T) {
	s := compileT(t, `{"not":{"type":"object","additionalProperties":{"type":"number","exclusiveMinimum":-1e300}}}`)
	doc := []byte(`{"YX922XAA":7e28002000,"02":[{}],"":1}`)
	for range 50 {
		v := s.Validate(doc)
		if v == nil || v.Rule != "validator" {
			t.Fatalf("Validate = %v, want the validator's refusal", v)
		}
	}
}
