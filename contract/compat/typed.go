package compat

import (
	"fmt"
)

// The keywords that make a schema object a string, number, array or object
// schema when it has no type (Confluent's loader, after everit's): with
// "type": "string", the string keywords belong to the string; any other
// kind's keywords beside it make a part of their own.
var (
	stringKeywords = []string{"minLength", "maxLength", "pattern", "format"}
	numberKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
	arrayKeywords  = map[dialect][]string{
		draft4:    {"items", "additionalItems", "minItems", "maxItems", "uniqueItems"},
		draft6:    {"items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"},
		draft2019: {"items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"},
		draft2020: {"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems"},
	}
	objectKeywords = map[dialect][]string{
		draft4:    {"properties", "required", "minProperties", "maxProperties", "dependencies", "patternProperties", "additionalProperties"},
		draft6:    {"properties", "required", "minProperties", "maxProperties", "dependencies", "patternProperties", "additionalProperties", "propertyNames"},
		draft2019: {"properties", "required", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "patternProperties", "additionalProperties", "propertyNames", "unevaluatedProperties"},
	}
	conditionalKeywords = []string{"if", "then", "else"}
)

func init() {
	arrayKeywords[draft7] = arrayKeywords[draft6]
	objectKeywords[draft7] = objectKeywords[draft6]
	objectKeywords[draft2020] = objectKeywords[draft2019]
}

func hasAny(v *value, kws []string) bool {
	for _, k := range kws {
		if v.get(k) != nil {
			return true
		}
	}
	return false
}

// typed reads the type keyword and the type-specific keywords of v.
func (b *builder) typed(v *value, ptr string) ([]*node, error) {
	var parts []*node
	claimed := map[nkind]bool{}
	if t := v.get("type"); t != nil {
		types, err := typeNames(t, ptr+"/type")
		if err != nil {
			return nil, err
		}
		var subs []*node
		for _, name := range types {
			n, err := b.ofType(v, name, ptr)
			if err != nil {
				return nil, err
			}
			claimed[n.kind] = true
			n.typed = true
			subs = append(subs, n)
		}
		if t.kind == jArray {
			parts = append(parts, &node{kind: nCombined, src: v, comb: &combined{criterion: "anyOf", subs: subs, synthetic: true}})
		} else {
			parts = append(parts, subs...)
		}
	}
	sniffed := []struct {
		kind nkind
		kws  []string
	}{
		{nArray, arrayKeywords[b.d]}, {nObject, objectKeywords[b.d]},
		{nNumber, numberKeywords}, {nString, stringKeywords},
	}
	for _, s := range sniffed {
		if !claimed[s.kind] && hasAny(v, s.kws) {
			n, err := b.ofKind(v, s.kind, ptr)
			if err != nil {
				return nil, err
			}
			parts = append(parts, n)
		}
	}
	if b.d >= draft7 && hasAny(v, conditionalKeywords) {
		for _, kw := range conditionalKeywords {
			if c := v.get(kw); c != nil {
				if _, err := b.schema(c, ptr+"/"+kw); err != nil {
					return nil, err
				}
			}
		}
		parts = append(parts, &node{kind: nCond, src: v})
	}
	return parts, nil
}

var typeKinds = map[string]nkind{
	"string": nString, "integer": nNumber, "number": nNumber, "boolean": nBoolean,
	"null": nNull, "array": nArray, "object": nObject,
}

func typeNames(t *value, ptr string) ([]string, error) {
	var names []string
	switch t.kind {
	case jString:
		names = []string{t.s}
	case jArray:
		for _, e := range t.arr {
			if e.kind != jString {
				return nil, fmt.Errorf("at %s: must be a type name or an array of them", ptr)
			}
			names = append(names, e.s)
		}
	default:
		return nil, fmt.Errorf("at %s: must be a type name or an array of them", ptr)
	}
	for _, n := range names {
		if _, ok := typeKinds[n]; !ok {
			return nil, fmt.Errorf("at %s: unknown type %q", ptr, n)
		}
	}
	return names, nil
}

func (b *builder) ofType(v *value, name, ptr string) (*node, error) {
	n, err := b.ofKind(v, typeKinds[name], ptr)
	if err == nil && name == "integer" {
		n.num.integer = true
	}
	return n, err
}

// ofKind reads the keywords of one kind in v.
func (b *builder) ofKind(v *value, k nkind, ptr string) (*node, error) {
	n := &node{kind: k, src: v}
	var err error
	r := reader{v: v, ptr: ptr}
	switch k {
	case nString:
		n.str = &stringKw{minLength: r.count("minLength"), maxLength: r.count("maxLength"), pattern: r.regexp("pattern")}
		r.str("format")
	case nNumber:
		n.num, err = b.number(&r)
	case nArray:
		n.arr, err = b.array(&r)
	case nObject:
		n.obj, err = b.object(&r)
	}
	if err == nil {
		err = r.err
	}
	return n, err
}

func (b *builder) number(r *reader) (*numberKw, error) {
	kw := &numberKw{minimum: r.num("minimum"), maximum: r.num("maximum"), multipleOf: r.num("multipleOf")}
	if m := kw.multipleOf; m != nil && m.rat().Sign() <= 0 {
		r.fail("multipleOf", "must be greater than 0")
	}
	if b.d > draft4 {
		kw.exclusiveMinimum, kw.exclusiveMaximum = r.num("exclusiveMinimum"), r.num("exclusiveMaximum")
		return kw, nil
	}
	// Draft-04: a boolean makes minimum or maximum exclusive. Read as the
	// limit it is, so that making a bound exclusive is a tightened bound.
	if r.boolean("exclusiveMinimum") && kw.minimum != nil {
		kw.exclusiveMinimum, kw.minimum = kw.minimum, nil
	}
	if r.boolean("exclusiveMaximum") && kw.maximum != nil {
		kw.exclusiveMaximum, kw.maximum = kw.maximum, nil
	}
	return kw, nil
}
