package compat

import (
	"fmt"
	"regexp"
)

func (b *builder) object(r *reader) (*objectKw, error) {
	kw := &objectKw{prop: map[string]*node{}, required: map[string]bool{},
		minProps: r.count("minProperties"), maxProps: r.count("maxProperties"),
		propDepsKw: "dependencies", schemaDepsKw: "dependencies"}
	if p := r.v.get("properties"); p != nil {
		b.properties(r, kw, p)
	}
	if req := r.v.get("required"); req != nil && r.err == nil {
		kw.requiredOrder, kw.required = r.names(req, r.at("required"))
	}
	if a := r.v.get("additionalProperties"); a != nil && r.err == nil {
		if a.kind == jBool {
			kw.noAdditional = !a.b
		} else {
			kw.additional = b.sub(r, "additionalProperties")
		}
	}
	if p := r.v.get("patternProperties"); p != nil && r.err == nil {
		b.patterns(r, kw, p)
	}
	if b.d >= draft6 {
		b.sub(r, "propertyNames") // read for its errors; Confluent does not compare it
	}
	if b.d >= draft2019 {
		kw.propDepsKw, kw.schemaDepsKw = "dependentRequired", "dependentSchemas"
		kw.unevaluated = b.sub(r, "unevaluatedProperties")
		b.dependencies(r, kw, r.v.get("dependentRequired"), "dependentRequired", true)
		b.dependencies(r, kw, r.v.get("dependentSchemas"), "dependentSchemas", false)
	} else {
		b.dependencies(r, kw, r.v.get("dependencies"), "dependencies", false)
	}
	return kw, r.err
}

func (b *builder) properties(r *reader, kw *objectKw, p *value) {
	if p.kind != jObject {
		r.fail("properties", "must be an object of schemas")
		return
	}
	for i, name := range p.keys {
		n, err := b.schema(p.vals[i], r.at("properties")+"/"+escapeToken(name))
		if err != nil {
			r.err = err
			return
		}
		kw.props = append(kw.props, name)
		kw.prop[name] = n
	}
}

func (b *builder) patterns(r *reader, kw *objectKw, p *value) {
	if p.kind != jObject {
		r.fail("patternProperties", "must be an object of schemas")
		return
	}
	for i, pat := range p.keys {
		ptr := r.at("patternProperties") + "/" + escapeToken(pat)
		re, err := regexp.Compile(pat)
		if err != nil {
			r.err = fmt.Errorf("at %s: not a regular expression this checker can read: %v", ptr, err)
			return
		}
		n, err := b.schema(p.vals[i], ptr)
		if err != nil {
			r.err = err
			return
		}
		kw.patterns = append(kw.patterns, patternProp{pattern: pat, re: re, schema: n})
	}
}

// dependencies reads dependencies (draft-07 and earlier: an array of names or
// a schema per property), dependentRequired (names) or dependentSchemas.
func (b *builder) dependencies(r *reader, kw *objectKw, deps *value, name string, namesOnly bool) {
	if deps == nil || r.err != nil {
		return
	}
	if deps.kind != jObject {
		r.fail(name, "must be an object")
		return
	}
	for i, prop := range deps.keys {
		d, ptr := deps.vals[i], r.at(name)+"/"+escapeToken(prop)
		if namesOnly || d.kind == jArray {
			_, names := r.names(d, ptr)
			if len(names) > 0 { // an empty list requires nothing, as if absent
				kw.propDeps = append(kw.propDeps, propDep{name: prop, names: names, src: d})
			}
			continue
		}
		n, err := b.schema(d, ptr)
		if err != nil {
			r.err = err
			return
		}
		kw.schemaDeps = append(kw.schemaDeps, schemaDep{name: prop, schema: n})
	}
}
