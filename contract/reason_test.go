package contract

import (
	"strings"
	"testing"
)

// TestReasonsQuoteNoValue: a refusal names the contract, the pointer and
// the rule, and never the payload's value, whichever keyword fails (the
// reason is stored in _dead_letter; a value may be personal data). The
// library's own messages quote the value for pattern, format, bounds and
// more, which this test failed on before reason.go.
func TestReasonsQuoteNoValue(t *testing.T) {
	const secret = "SECRET-4711"
	obj := func(prop string) string {
		return `{"type":"object","properties":{"email":` + prop + `}}`
	}
	for _, c := range []struct {
		schema, doc, rule, ptr string
	}{
		{obj(`{"type":"integer"}`), `{"email":"SECRET-4711"}`, "type", "/email"},
		{obj(`{"pattern":"^[a-z]+@example\\.com$"}`), `{"email":"SECRET-4711"}`, "pattern", "/email"},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"email":{"format":"email"}}}`, `{"email":"SECRET-4711"}`, "format", "/email"},
		{obj(`{"enum":["a","b"]}`), `{"email":"SECRET-4711"}`, "enum", "/email"},
		{obj(`{"const":"a"}`), `{"email":"SECRET-4711"}`, "const", "/email"},
		{obj(`{"maxLength":3}`), `{"email":"SECRET-4711"}`, "maxLength", "/email"},
		{obj(`{"maximum":10}`), `{"email":4711.25}`, "maximum", "/email"},
		{obj(`{"minimum":5000}`), `{"email":4711.25}`, "minimum", "/email"},
		{obj(`{"exclusiveMaximum":10}`), `{"email":4711}`, "exclusiveMaximum", "/email"},
		{obj(`{"multipleOf":10}`), `{"email":4711}`, "multipleOf", "/email"},
		{obj(`{"not":{"type":"string"}}`), `{"email":"SECRET-4711"}`, "not", "/email"},
		{obj(`{"anyOf":[{"type":"integer"},{"maxLength":2}]}`), `{"email":"SECRET-4711"}`, "anyOf", "/email"},
		{obj(`{"oneOf":[{"type":"string"},{"minLength":1}]}`), `{"email":"SECRET-4711"}`, "oneOf", "/email"},
		{obj(`{"type":"array","uniqueItems":true}`), `{"email":["SECRET-4711","SECRET-4711"]}`, "uniqueItems", "/email"},
		{obj(`{"type":"array","contains":{"type":"integer"}}`), `{"email":["SECRET-4711"]}`, "type", "/email/0"},
		{obj(`false`), `{"email":"SECRET-4711"}`, "false", "/email"},
		{`{"type":"object","additionalProperties":false}`, `{"email":"SECRET-4711"}`, "additionalProperties", "/email"},
		{`{"type":"object","propertyNames":{"maxLength":2}}`, `{"email":"SECRET-4711"}`, "maxLength", ""},
		{`{"required":["id"]}`, `{"email":"SECRET-4711"}`, "required", "/id"},
		{`{"maximum":10}`, `4711e1000001`, "validator", ""},
		{`{"type":"array","uniqueItems":true}`, `[` + strings.Repeat(`4711e1000001,`, 21) + `1]`, "validator", ""},
	} {
		s := compileT(t, c.schema)
		v := s.Validate([]byte(c.doc))
		if v == nil {
			t.Errorf("%s accepted %s", c.schema, c.doc)
			continue
		}
		msg := v.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, "4711") {
			t.Errorf("reason quotes the value: %s", msg)
		}
		if v.Rule != c.rule || v.Pointer != c.ptr || !strings.Contains(msg, "contract t/T v1 at ") || !strings.Contains(msg, ": "+c.rule+": ") {
			t.Errorf("%s on %s: %q (rule %q, pointer %q); want rule %q at %q", c.schema, c.doc, msg, v.Rule, v.Pointer, c.rule, c.ptr)
		}
	}
}

// TestNotJSONQuotesNothing: a payload that is not JSON is refused with
// where it breaks, not what it holds.
func TestNotJSONQuotesNothing(t *testing.T) {
	s := compileT(t, `{"type":"object"}`)
	for _, doc := range []string{`{"email": SECRET}`, `{"email": "x"} SECRET`, `SECRET`} {
		v := s.Validate([]byte(doc))
		if v == nil || v.Rule != "json" || strings.Contains(v.Error(), "SECRET") || strings.Contains(v.Error(), "'S'") {
			t.Errorf("%s: %v", doc, v)
		}
	}
}
