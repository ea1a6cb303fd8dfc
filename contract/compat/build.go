package compat

import (
	"fmt"
	"strings"
)

// dialect is the JSON Schema draft a document is read in.
type dialect uint8

const (
	draft4 dialect = iota
	draft6
	draft7
	draft2019
	draft2020
)

var dialects = map[string]dialect{
	"json-schema.org/draft-04/schema":      draft4,
	"json-schema.org/draft-06/schema":      draft6,
	"json-schema.org/draft-07/schema":      draft7,
	"json-schema.org/draft/2019-09/schema": draft2019,
	"json-schema.org/draft/2020-12/schema": draft2020,
}

// dialectOf reads $schema; a document without one is draft-07, as Confluent
// reads it.
func dialectOf(root *value) (dialect, error) {
	s := root.get("$schema")
	if s == nil {
		return draft7, nil
	}
	if s.kind != jString {
		return 0, fmt.Errorf("$schema must be a string, not %s", s.kind)
	}
	u := strings.TrimSuffix(s.s, "#")
	u = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	if d, ok := dialects[u]; ok {
		return d, nil
	}
	return 0, fmt.Errorf("$schema %q is not a supported dialect (use draft-04, -06, -07, 2019-09 or 2020-12)", s.s)
}

// schema is a parsed document.
type schema struct {
	root *node
}

// builder turns a document into nodes. Each schema object becomes one node,
// shared by every $ref to it, so that recursion and memoised comparisons see
// one identity per schema.
type builder struct {
	d     dialect
	res   *resources
	nodes map[*value]*node
	refs  []*node
}

func buildSchema(doc []byte) (*schema, error) {
	root, err := parseJSON(doc)
	if err != nil {
		return nil, err
	}
	if root.kind != jObject && root.kind != jBool {
		return nil, fmt.Errorf("a schema is an object or a boolean, not %s", root.kind)
	}
	d := draft7
	if root.kind == jObject {
		if d, err = dialectOf(root); err != nil {
			return nil, err
		}
	}
	if err := metaValidate(root, d); err != nil {
		return nil, err
	}
	res, err := indexResources(root, d)
	if err != nil {
		return nil, err
	}
	b := &builder{d: d, res: res, nodes: map[*value]*node{}}
	n, err := b.schema(root, "#")
	if err != nil {
		return nil, err
	}
	if err := b.checkRefCycles(); err != nil {
		return nil, err
	}
	return &schema{root: n}, nil
}

// schema returns the node of the schema v, found at ptr (for messages).
func (b *builder) schema(v *value, ptr string) (*node, error) {
	if n := b.nodes[v]; n != nil {
		return n, nil
	}
	switch v.kind {
	case jBool:
		n := &node{kind: nEmpty, src: v}
		if !v.b {
			n.kind = nFalse
		}
		b.nodes[v] = n
		return n, nil
	case jObject:
	default:
		return nil, fmt.Errorf("at %s: a schema is an object or a boolean, not %s", ptr, v.kind)
	}
	n := &node{src: v}
	b.nodes[v] = n // before the parts, so that a recursive $ref finds it
	parts, err := b.parts(v, ptr)
	if err != nil {
		return nil, err
	}
	switch len(parts) {
	case 0:
		n.kind = nEmpty
	case 1:
		*n = *parts[0]
	default:
		*n = node{kind: nCombined, src: v, comb: &combined{criterion: "allOf", subs: parts, synthetic: true}}
	}
	if n.kind != nRef {
		n.meta = b.meta(v)
	}
	return n, nil
}

func (b *builder) meta(v *value) *meta {
	idKw := "$id"
	if b.d == draft4 {
		idKw = "id"
	}
	m := &meta{id: v.get(idKw), title: v.get("title"), description: v.get("description"), def: v.get("default")}
	if m.id == nil && m.title == nil && m.description == nil && m.def == nil {
		return nil
	}
	return m
}

// parts reads the kinds of keyword in one schema object, in the order of
// Confluent's loader: $ref, enum, allOf/anyOf/oneOf, not, const, then the
// type's own keywords, then the keywords of other kinds present without
// their type.
func (b *builder) parts(v *value, ptr string) ([]*node, error) {
	var parts []*node
	if ref, kw := b.refOf(v); ref != nil {
		n, err := b.ref(v, ref, ptr+"/"+kw)
		if err != nil || b.d < draft2019 {
			// Before 2019-09, keywords beside $ref are ignored.
			return []*node{n}, err
		}
		parts = append(parts, n)
	}
	if e := v.get("enum"); e != nil {
		if e.kind != jArray {
			return nil, fmt.Errorf("at %s/enum: must be an array", ptr)
		}
		parts = append(parts, &node{kind: nEnum, src: v, enum: e.arr})
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		if c := v.get(kw); c != nil {
			n, err := b.combined(v, c, kw, ptr+"/"+kw)
			if err != nil {
				return nil, err
			}
			parts = append(parts, n)
		}
	}
	if nv := v.get("not"); nv != nil {
		sub, err := b.schema(nv, ptr+"/not")
		if err != nil {
			return nil, err
		}
		parts = append(parts, &node{kind: nNot, src: v, not: sub})
	}
	if c := v.get("const"); c != nil && b.d >= draft6 {
		parts = append(parts, &node{kind: nConst, src: v, enum: []*value{c}})
	}
	typed, err := b.typed(v, ptr)
	if err != nil {
		return nil, err
	}
	return append(parts, typed...), nil
}

func (b *builder) refOf(v *value) (*value, string) {
	for _, kw := range []string{"$ref", "$recursiveRef", "$dynamicRef"} {
		if r := v.get(kw); r != nil && (kw == "$ref" || b.d >= draft2019) {
			return r, kw
		}
	}
	return nil, ""
}

func (b *builder) ref(v, ref *value, ptr string) (*node, error) {
	if ref.kind != jString {
		return nil, fmt.Errorf("at %s: must be a string", ptr)
	}
	target, err := b.res.resolve(ref.s, v)
	if err != nil {
		return nil, fmt.Errorf("at %s: %w", ptr, err)
	}
	t, err := b.schema(target, ref.s)
	if err != nil {
		return nil, err
	}
	n := &node{kind: nRef, src: v, ref: t}
	b.refs = append(b.refs, n)
	return n, nil
}

// checkRefCycles refuses a $ref that names itself through other $refs only
// ({"$ref": "#"} at the root): such a schema means nothing.
func (b *builder) checkRefCycles() error {
	for _, r := range b.refs {
		n := r
		for i := 0; n != nil && n.kind == nRef; i++ {
			if i > len(b.refs) {
				return fmt.Errorf("$ref %s leads only to itself", r.src.get("$ref").compact())
			}
			n = n.ref
		}
	}
	return nil
}

func (b *builder) combined(v, c *value, kw, ptr string) (*node, error) {
	if c.kind != jArray || len(c.arr) == 0 {
		return nil, fmt.Errorf("at %s: must be a non-empty array of schemas", ptr)
	}
	comb := &combined{criterion: kw}
	for i, e := range c.arr {
		sub, err := b.schema(e, fmt.Sprintf("%s/%d", ptr, i))
		if err != nil {
			return nil, err
		}
		comb.subs = append(comb.subs, sub)
	}
	return &node{kind: nCombined, src: v, comb: comb}, nil
}
