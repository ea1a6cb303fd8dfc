package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var drafts = map[dialect]*jsonschema.Draft{
	draft4: jsonschema.Draft4, draft6: jsonschema.Draft6, draft7: jsonschema.Draft7,
	draft2019: jsonschema.Draft2019, draft2020: jsonschema.Draft2020,
}

// noLoader refuses every URL: a schema is judged on its own document, and
// this package does no I/O (the compiler's default loader reads file: URLs).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is outside the schema document (references to other documents are not supported)", url)
}

// metaValidate checks the document against its dialect's meta-schema and
// compiles it with the validator the registry validates events with
// (santhosh-tekuri/jsonschema), so that a schema this package accepts is one
// events can be validated against: every keyword of the right type, every
// $ref resolvable, every pattern a regular expression.
func metaValidate(root *value, d dialect) error {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(drafts[d])
	c.UseLoader(noLoader{})
	if err := c.AddResource(defaultBase, root.toAny()); err != nil {
		return errors.New(oneLine(err))
	}
	if _, err := c.Compile(defaultBase); err != nil {
		return errors.New(oneLine(err))
	}
	return nil
}

// oneLine reduces the compiler's error (a tree, for a meta-schema violation)
// to its first leaf: where in the schema, and what is wrong there.
func oneLine(err error) string {
	var sv *jsonschema.SchemaValidationError
	if errors.As(err, &sv) {
		var ve *jsonschema.ValidationError
		if errors.As(sv.Err, &ve) {
			for len(ve.Causes) > 0 {
				ve = ve.Causes[0]
			}
			msg := ve.Error() // a leaf: "at '/loc': what is wrong"
			if i := strings.Index(msg, "': "); strings.HasPrefix(msg, "at '") && i > 0 {
				msg = msg[i+3:]
			}
			return fmt.Sprintf("at #/%s: %s", strings.Join(escapeAll(ve.InstanceLocation), "/"), msg)
		}
	}
	var pe *jsonschema.JSONPointerNotFoundError
	var ae *jsonschema.AnchorNotFoundError
	var le *jsonschema.LoadURLError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("unresolvable $ref %q: no such place in the document", local(pe.URL))
	case errors.As(err, &ae):
		return fmt.Sprintf("unresolvable $ref %q: no such anchor in the document", local(ae.Reference))
	case errors.As(err, &le):
		return fmt.Sprintf("unresolvable $ref %q: references to other documents are not supported", local(le.URL))
	}
	return strings.Join(strings.Fields(local(err.Error())), " ")
}

// local strips the document's default base URI from a message.
func local(s string) string { return strings.ReplaceAll(s, defaultBase, "") }

func escapeAll(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = escapeToken(t)
	}
	return out
}

// toAny is the value as the compiler reads JSON (encoding/json with UseNumber).
func (v *value) toAny() any {
	switch v.kind {
	case jBool:
		return v.b
	case jNumber:
		return json.Number(v.s)
	case jString:
		return v.s
	case jArray:
		a := make([]any, len(v.arr))
		for i, e := range v.arr {
			a[i] = e.toAny()
		}
		return a
	case jObject:
		m := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			m[k] = v.vals[i].toAny()
		}
		return m
	}
	return nil
}
