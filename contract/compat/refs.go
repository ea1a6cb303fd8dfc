package compat

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// defaultBase is the URI of a schema document without an $id: refs resolve
// against it, and nothing outside the document can be named.
const defaultBase = "mem://input/schema.json"

// resources indexes a document for $ref: the base URI in effect at each
// schema object, the document's resources ($id) and anchors.
type resources struct {
	d       dialect
	base    map[*value]*url.URL
	docs    map[string]*value // resource URI without fragment → its schema
	anchors map[string]*value // resource URI + "#" + name → its schema
}

func indexResources(root *value, d dialect) (*resources, error) {
	r := &resources{d: d, base: map[*value]*url.URL{}, docs: map[string]*value{}, anchors: map[string]*value{}}
	base, _ := url.Parse(defaultBase)
	r.docs[defaultBase] = root
	return r, r.walk(root, base)
}

// subschemaKeywords are the keywords whose value is a schema, an array of
// schemas or an object of schemas, in any dialect this package reads.
var subschemaKeywords = []string{
	"additionalItems", "additionalProperties", "contains", "not", "if", "then", "else",
	"propertyNames", "unevaluatedItems", "unevaluatedProperties", "items",
	"allOf", "anyOf", "oneOf", "prefixItems",
	"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies",
}

var schemaMaps = map[string]bool{
	"properties": true, "patternProperties": true, "definitions": true, "$defs": true,
	"dependentSchemas": true, "dependencies": true,
}

func (r *resources) walk(v *value, base *url.URL) error {
	if v.kind != jObject {
		return nil
	}
	base, err := r.register(v, base)
	if err != nil {
		return err
	}
	r.base[v] = base
	for _, kw := range subschemaKeywords {
		sub := v.get(kw)
		if sub == nil {
			continue
		}
		var children []*value
		switch {
		case schemaMaps[kw] && sub.kind == jObject:
			children = sub.vals
		case sub.kind == jArray:
			children = sub.arr
		default:
			children = []*value{sub}
		}
		for _, c := range children {
			if err := r.walk(c, base); err != nil {
				return err
			}
		}
	}
	return nil
}

// register records v's $id and anchors and returns the base URI within v.
func (r *resources) register(v *value, base *url.URL) (*url.URL, error) {
	idKw := "$id"
	if r.d == draft4 {
		idKw = "id"
	}
	if id := v.get(idKw); id != nil && id.kind == jString && (r.d >= draft2019 || v.get("$ref") == nil) {
		u, err := base.Parse(id.s)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a URI reference: %v", idKw, id.s, err)
		}
		frag := u.Fragment
		u.Fragment, u.RawFragment = "", ""
		if frag != "" && strings.HasPrefix(id.s, "#") {
			r.anchors[base.String()+"#"+frag] = v // draft-07 and earlier: "$id": "#name"
		} else {
			base = u
			r.docs[u.String()] = v
		}
	}
	for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
		if a := v.get(kw); a != nil && a.kind == jString && r.d >= draft2019 {
			r.anchors[base.String()+"#"+a.s] = v
		}
	}
	return base, nil
}

// resolve finds the schema a $ref written in the schema object at names.
func (r *resources) resolve(ref string, at *value) (*value, error) {
	base := r.base[at]
	if base == nil {
		base, _ = url.Parse(defaultBase)
	}
	u, err := base.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("$ref %q is not a URI reference: %v", ref, err)
	}
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	doc := r.docs[u.String()]
	if doc == nil {
		return nil, fmt.Errorf("$ref %q is unresolvable: no schema %s in this document (references to other documents are not supported)", ref, u)
	}
	if frag == "" {
		return doc, nil
	}
	if !strings.HasPrefix(frag, "/") {
		if a := r.anchors[u.String()+"#"+frag]; a != nil {
			return a, nil
		}
		return nil, fmt.Errorf("$ref %q is unresolvable: no anchor %q", ref, frag)
	}
	target, err := pointerGet(doc, frag)
	if err != nil {
		return nil, fmt.Errorf("$ref %q is unresolvable: %v", ref, err)
	}
	if target.kind != jObject && target.kind != jBool {
		return nil, fmt.Errorf("$ref %q names %s, not a schema", ref, target.kind)
	}
	return target, nil
}

// pointerGet follows a JSON pointer (RFC 6901, already percent-decoded).
func pointerGet(v *value, ptr string) (*value, error) {
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v.kind {
		case jObject:
			next := v.get(tok)
			if next == nil {
				return nil, fmt.Errorf("no member %q at %s", tok, ptr)
			}
			v = next
		case jArray:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v.arr) || (len(tok) > 1 && tok[0] == '0') {
				return nil, fmt.Errorf("no element %q at %s", tok, ptr)
			}
			v = v.arr[i]
		default:
			return nil, fmt.Errorf("%s goes through %s", ptr, v.kind)
		}
	}
	return v, nil
}

// escapeToken escapes a property name as a JSON pointer token.
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
