package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/deltabus/deltabus/usererr"
)

// The drafts of JSON Schema a contract may be written in, by the URI its
// "$schema" names (with or without the trailing "#", over http or https).
const (
	Draft04   = "http://json-schema.org/draft-04/schema#"
	Draft06   = "http://json-schema.org/draft-06/schema#"
	Draft07   = "http://json-schema.org/draft-07/schema#"
	Draft2019 = "https://json-schema.org/draft/2019-09/schema"
	Draft2020 = "https://json-schema.org/draft/2020-12/schema"
)

// DefaultDraft is the draft of a schema without "$schema": draft-07, as
// Confluent Schema Registry reads one, so that the schemas teams bring
// from it mean what they meant there. A registration may choose another
// (Registration.Draft, `relay contract register --draft`).
const DefaultDraft = Draft07

// LegacyDraft is how a schema registered without "$schema" before
// DefaultDraft was draft-07 is read: as draft 2020-12, the default then.
// Such a schema is stored without "$schema" (Register now stores every
// schema with the "$schema" it was read in), so the store tells the two
// apart, and a registry keeps reading what it holds as it always did.
const LegacyDraft = Draft2020

// drafts lists the supported drafts, oldest first.
var drafts = []struct {
	uri, name string
	lib       *jsonschema.Draft
}{
	{Draft04, "draft-04", jsonschema.Draft4},
	{Draft06, "draft-06", jsonschema.Draft6},
	{Draft07, "draft-07", jsonschema.Draft7},
	{Draft2019, "2019-09", jsonschema.Draft2019},
	{Draft2020, "2020-12", jsonschema.Draft2020},
}

// DraftName is a draft's short name ("draft-07", "2020-12"), as
// ParseDraft reads it; uri is one of the Draft constants.
func DraftName(uri string) string {
	for _, d := range drafts {
		if d.uri == uri {
			return d.name
		}
	}
	return uri
}

func libDraft(uri string) *jsonschema.Draft {
	for _, d := range drafts {
		if d.uri == uri {
			return d.lib
		}
	}
	return jsonschema.Draft7
}

// draftNames lists the short names, for messages.
func draftNames() string {
	names := make([]string, len(drafts))
	for i := range drafts {
		names[len(drafts)-1-i] = drafts[i].name
	}
	return strings.Join(names, ", ")
}

// ParseDraft reads a draft as an operator names it: its short name
// ("draft-07", "07", "7", "2020-12", "draft2020-12"...) or its "$schema"
// URI. It returns one of the Draft constants; anything else is an error
// naming the drafts supported.
func ParseDraft(s string) (string, error) {
	if uri, ok := draftOfURI(s); ok {
		return uri, nil
	}
	n := strings.ToLower(strings.TrimSpace(s))
	n = strings.TrimPrefix(strings.TrimPrefix(n, "draft"), "-")
	n = strings.TrimPrefix(n, "/")
	switch n {
	case "4", "04":
		return Draft04, nil
	case "6", "06":
		return Draft06, nil
	case "7", "07":
		return Draft07, nil
	case "2019-09", "201909", "2019":
		return Draft2019, nil
	case "2020-12", "202012", "2020":
		return Draft2020, nil
	}
	return "", fmt.Errorf("unknown JSON Schema draft %q: use %s", truncate(s, 40), draftNames())
}

// draftOfURI reads a "$schema" value: one of the drafts' URIs, with or
// without its trailing "#", over http or https.
func draftOfURI(s string) (string, bool) {
	u := strings.TrimSuffix(s, "#")
	u, ok := strings.CutPrefix(u, "http://")
	if !ok {
		u, _ = strings.CutPrefix(u, "https://")
	}
	for _, d := range drafts {
		want := strings.TrimSuffix(d.uri, "#")
		want = strings.TrimPrefix(strings.TrimPrefix(want, "http://"), "https://")
		if u == want {
			return d.uri, true
		}
	}
	return "", false
}

// declaredDraft reads a schema object's "$schema": the draft it names,
// "" when it has none, or an error for one that is not a supported draft.
func declaredDraft(obj map[string]any) (string, error) {
	v, ok := obj["$schema"]
	if !ok {
		return "", nil
	}
	s, _ := v.(string)
	if uri, ok := draftOfURI(s); ok {
		return uri, nil
	}
	return "", schemaErr("schema names $schema %q: contracts are JSON Schema %s (a schema without $schema is %s)",
		truncate(fmt.Sprint(v), 80), draftNames(), DraftName(DefaultDraft))
}

// DeclaredDraft returns the draft a schema's "$schema" names ("" when it
// names none, or the schema is not a JSON object with a supported one).
func DeclaredDraft(raw []byte) string {
	v, ok := schemaKeyword(raw)
	var named string
	if !ok || json.Unmarshal(v, &named) != nil {
		return ""
	}
	uri, _ := draftOfURI(named)
	return uri
}

// WithDraft returns raw, a JSON object, naming draft in "$schema": raw
// itself when it names one already, else raw with "$schema" inserted as
// its first member, every other byte as it was. It is the form Register
// stores, so that the stored schema says how it is read, whatever reads it.
func WithDraft(raw []byte, draft string) []byte {
	if hasSchemaKeyword(raw) {
		return raw
	}
	i := bytes.IndexByte(raw, '{')
	if i < 0 {
		return raw
	}
	member, _ := json.Marshal(draft)
	out := make([]byte, 0, len(raw)+len(member)+16)
	out = append(out, raw[:i+1]...)
	out = append(out, `"$schema":`...)
	out = append(out, member...)
	if rest := bytes.TrimLeft(raw[i+1:], " \t\r\n"); len(rest) == 0 || rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, raw[i+1:]...)
}

// hasSchemaKeyword reports whether raw, a JSON object, has a "$schema"
// member (whatever its value).
func hasSchemaKeyword(raw []byte) bool {
	_, ok := schemaKeyword(raw)
	return ok
}

// schemaKeyword is the value of raw's "$schema" member, matched exactly
// (encoding/json would match "$SCHEMA" to a field too).
func schemaKeyword(raw []byte) (json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	v, ok := obj["$schema"]
	return v, ok
}

// storedDraft is the draft a registered schema is read in: the one its
// "$schema" names, or LegacyDraft (legacy=true) when it names none.
func storedDraft(stored []byte) (draft string, legacy bool) {
	if d := DeclaredDraft(stored); d != "" {
		return d, false
	}
	return LegacyDraft, true
}

// readable is a registered schema as package compat must read it: naming
// its draft, LegacyDraft when it names none (compat reads a schema without
// "$schema" as draft-07).
func readable(stored []byte) []byte { return WithDraft(stored, LegacyDraft) }

// equalButDraft reports whether two schemas differ in their "$schema" only.
func equalButDraft(a, b []byte) bool {
	va, err1 := jsonschema.UnmarshalJSON(bytes.NewReader(a))
	vb, err2 := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	ma, ok1 := va.(map[string]any)
	mb, ok2 := vb.(map[string]any)
	if err1 != nil || err2 != nil || !ok1 || !ok2 {
		return false
	}
	delete(ma, "$schema")
	delete(mb, "$schema")
	return equalValues(ma, mb)
}

// sameRead reports whether two schemas are the same JSON value read in the
// same draft: equal but for how their "$schema" spells the draft.
func sameRead(a, b []byte) bool {
	return Equal(a, b) || (DeclaredDraft(a) == DeclaredDraft(b) && equalButDraft(a, b))
}

// same answers a registration of a version that exists: a no-op when its
// schema is equal to reg's, read in the same draft, else a refusal. A legacy version (registered without "$schema",
// read as LegacyDraft) is equal to the same schema given again without
// one, unless another draft is asked for: a pipeline that registers every
// version again on each run goes on passing.
func (r *Registry) same(ctx context.Context, reg Registration, old, stored []byte, out Outcome, write bool) (Outcome, error) {
	out.Draft, out.Legacy = storedDraft(old)
	out.Declared = out.Declared && !out.Legacy
	asked := DeclaredDraft(stored)
	switch {
	case !equalButDraft(old, stored):
		return Outcome{}, usererr.New(nil, "version %d of %s/%s is already registered with a different schema, and contracts are immutable: register the change as a new version", reg.Version, reg.Topic, reg.Type)
	case out.Draft == asked:
	case out.Legacy && !hasSchemaKeyword(reg.Schema) && reg.Draft == "":
	default:
		return Outcome{}, usererr.New(nil, "version %d of %s/%s is registered as JSON Schema %s, not %s, and contracts are immutable: register the change as a new version",
			reg.Version, reg.Topic, reg.Type, DraftName(out.Draft), DraftName(asked))
	}
	return out, nil // a registration never changes the type's mode (judge)
}

// Contract returns a registered version (the latest when v is 0)
// compiled as the relay reads it: its Draft, and whether it is a Legacy
// one. An unregistered one is a usererr.Error.
func (r *Registry) Contract(ctx context.Context, topic, typ string, v int32) (*Schema, error) {
	v, err := r.versionOrLatest(ctx, topic, typ, v)
	if err != nil {
		return nil, err
	}
	b, err := r.Schema(ctx, topic, typ, v)
	if err != nil {
		return nil, err
	}
	s, err := compileStored(topic, typ, v, b)
	if err != nil {
		return nil, fmt.Errorf("contract %s/%s v%d in %s cannot be used (%v): it was not registered by `relay contract register`", topic, typ, v, r.store, err)
	}
	return s, nil
}
