package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/deltabus/deltabus/pii/classify"
)

// MaxSchemaBytes is the largest schema a contract may have. A contract is
// read whole into memory, by every relay and producer that meets its type.
const MaxSchemaBytes = 1 << 20

// Schema is one compiled contract: the JSON Schema of a (topic, type,
// version). It is safe for concurrent use.
type Schema struct {
	Topic, Type string
	Version     int32
	// Draft is the draft the schema is read in (one of the Draft
	// constants); Declared says its "$schema" names it, and Legacy that it
	// has none and is read as LegacyDraft, registered before DefaultDraft
	// was draft-07.
	Draft            string
	Declared, Legacy bool
	raw              []byte
	sch              *jsonschema.Schema
	fast             *node // the byte-level validator (fast.go)
	personal         *classify.Classification
}

// Raw returns the schema as registered. The caller must not modify it.
func (s *Schema) Raw() []byte { return s.raw }

// Personal returns what the schema marks as personal data and where its
// data subject is (nil: nothing). The caller must not modify it.
func (s *Schema) Personal() *classify.Classification { return s.personal }

// SchemaError is a schema that cannot be a contract: malformed JSON, not a
// JSON Schema of a supported draft, or a reference outside the document.
type SchemaError struct{ Msg string }

func (e *SchemaError) Error() string { return e.Msg }

func schemaErr(format string, args ...any) error {
	return &SchemaError{Msg: fmt.Sprintf(format, args...)}
}

// refuseLoader refuses every reference outside the schema document: a
// contract is one self-contained document, and the default loader would
// read any file:// path on the machine validating it.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a contract must be self-contained: it may only refer to its own parts (such as #/$defs/name), not to %s", url)
}

// resourceURL names the document being compiled; references relative to
// it stay inside it.
const resourceURL = "https://contract.deltabus.invalid/schema.json"

// Compile compiles raw, a JSON Schema as a user gives it, into a contract
// for topic, typ and version: read in the draft its "$schema" names, or
// DefaultDraft (draft-07) when it names none. The schema is compiled once;
// its errors are *SchemaError.
func Compile(topic, typ string, version int32, raw []byte) (*Schema, error) {
	return CompileAs(topic, typ, version, raw, "")
}

// CompileAs is Compile reading a schema without "$schema" in draft (as
// ParseDraft reads it; "" is DefaultDraft). A schema whose "$schema" names
// another draft than a draft given is refused: which one was meant is not
// knowable.
func CompileAs(topic, typ string, version int32, raw []byte, draft string) (*Schema, error) {
	if draft != "" {
		d, err := ParseDraft(draft)
		if err != nil {
			return nil, &SchemaError{Msg: err.Error()}
		}
		draft = d
	}
	s, err := compile(topic, typ, version, raw, draft, DefaultDraft)
	if err == nil && draft != "" && s.Declared && s.Draft != draft {
		return nil, schemaErr("schema names $schema %s, and draft %s was asked for: remove one of the two", DraftName(s.Draft), DraftName(draft))
	}
	return s, err
}

// compileStored compiles a schema as the registry holds it: one without
// "$schema" was registered before DefaultDraft was draft-07, and is read
// as it was then (LegacyDraft).
func compileStored(topic, typ string, version int32, raw []byte) (*Schema, error) {
	s, err := compile(topic, typ, version, raw, "", LegacyDraft)
	if s != nil && !s.Declared {
		s.Legacy = true
	}
	return s, err
}

func compile(topic, typ string, version int32, raw []byte, draft, dflt string) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, schemaErr("schema is %d bytes, the limit is %d", len(raw), MaxSchemaBytes)
	}
	if err := checkJSON(raw); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, schemaErr("schema is not JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, schemaErr("schema is a JSON %s; a contract is a JSON Schema object such as {\"type\": \"object\", ...}", jsonKind(doc))
	}
	declared, err := declaredDraft(obj)
	if err != nil {
		return nil, err
	}
	s := &Schema{Topic: topic, Type: typ, Version: version, Draft: declared, Declared: declared != "", raw: raw}
	switch {
	case s.Declared:
	case draft != "":
		s.Draft = draft
	default:
		s.Draft = dflt
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(libDraft(s.Draft))
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(resourceURL, doc); err != nil {
		return nil, schemaErr("schema: %v", err)
	}
	if s.sch, err = c.Compile(resourceURL); err != nil {
		return nil, schemaErr("schema is not a valid JSON Schema %s: %s", DraftName(s.Draft), compileMessage(err))
	}
	s.fast = newFastCompiler().compile(s.sch)
	// A mark the relay could not act on is refused here, at registration,
	// not met by the relay with an event in hand (package classify).
	if s.personal, err = classify.Parse(raw); err != nil {
		return nil, schemaErr("personal data: %v", err)
	}
	return s, nil
}

// checkJSON reports malformed JSON with the byte offset of the problem.
func checkJSON(raw []byte) error {
	if json.Valid(raw) {
		return nil
	}
	var v any
	err := json.Unmarshal(raw, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return schemaErr("schema is not JSON: %v at byte %d", se, se.Offset)
	}
	return schemaErr("schema is not JSON: %v", err)
}

// compileMessage is the compiler's error on one line, without the
// placeholder URL the document was compiled under.
func compileMessage(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	msg = strings.ReplaceAll(msg, resourceURL+"#", "#")
	return strings.ReplaceAll(msg, resourceURL, "the schema")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case json.Number:
		return "number"
	}
	return "object"
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Equal reports whether two schemas are the same JSON value (whitespace,
// key order and number spelling aside): registering an equal schema again
// is a no-op.
func Equal(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, err1 := jsonschema.UnmarshalJSON(bytes.NewReader(a))
	vb, err2 := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return err1 == nil && err2 == nil && json.Valid(a) && json.Valid(b) && equalValues(va, vb)
}

func equalValues(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !equalValues(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalValues(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		return ok && a == b
	}
	return a == b
}
