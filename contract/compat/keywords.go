package compat

import (
	"fmt"
	"math/big"
	"regexp"
)

// reader reads the keywords of one schema object, keeping the first error.
type reader struct {
	v   *value
	ptr string
	err error
}

func (r *reader) fail(kw, msg string) {
	if r.err == nil {
		r.err = fmt.Errorf("at %s/%s: %s", r.ptr, escapeToken(kw), msg)
	}
}

func (r *reader) at(kw string) string { return r.ptr + "/" + escapeToken(kw) }

// num reads a number keyword.
func (r *reader) num(kw string) *value {
	x := r.v.get(kw)
	if x != nil && x.kind != jNumber {
		r.fail(kw, "must be a number")
		return nil
	}
	return x
}

// count reads a non-negative integer keyword (maxLength, minItems...).
func (r *reader) count(kw string) *value {
	x := r.num(kw)
	if n := x.rat(); n != nil && (!n.IsInt() || n.Sign() < 0) {
		r.fail(kw, "must be a non-negative integer")
		return nil
	}
	return x
}

func (r *reader) boolean(kw string) bool {
	x := r.v.get(kw)
	if x != nil && x.kind != jBool {
		r.fail(kw, "must be a boolean")
		return false
	}
	return x != nil && x.b
}

func (r *reader) str(kw string) *value {
	x := r.v.get(kw)
	if x != nil && x.kind != jString {
		r.fail(kw, "must be a string")
		return nil
	}
	return x
}

func (r *reader) regexp(kw string) *value {
	x := r.str(kw)
	if x != nil {
		if _, err := regexp.Compile(x.s); err != nil {
			r.fail(kw, fmt.Sprintf("not a regular expression this checker can read: %v", err))
		}
	}
	return x
}

// names reads an array of strings (required, a dependency's names), in
// order and as a set.
func (r *reader) names(x *value, ptr string) ([]string, map[string]bool) {
	set := map[string]bool{}
	var list []string
	if x.kind != jArray {
		r.err = fmt.Errorf("at %s: must be an array of strings", ptr)
		return nil, set
	}
	for _, e := range x.arr {
		if e.kind != jString {
			r.err = fmt.Errorf("at %s: must be an array of strings", ptr)
			return nil, set
		}
		if !set[e.s] {
			set[e.s] = true
			list = append(list, e.s)
		}
	}
	return list, set
}

// sub reads a keyword whose value is one schema.
func (b *builder) sub(r *reader, kw string) *node {
	x := r.v.get(kw)
	if x == nil || r.err != nil {
		return nil
	}
	n, err := b.schema(x, r.at(kw))
	if err != nil {
		r.err = err
	}
	return n
}

// subs reads an array of schemas.
func (b *builder) subs(r *reader, x *value, ptr string) []*node {
	var out []*node
	for i, e := range x.arr {
		n, err := b.schema(e, fmt.Sprintf("%s/%d", ptr, i))
		if err != nil {
			r.err = err
			return nil
		}
		out = append(out, n)
	}
	return out
}

func (b *builder) array(r *reader) (*arrayKw, error) {
	kw := &arrayKw{minItems: r.count("minItems"), maxItems: r.count("maxItems"), unique: r.boolean("uniqueItems"),
		tupleKw: "items", additionalKw: "additionalItems"}
	if b.d >= draft2020 {
		kw.tupleKw, kw.additionalKw = "prefixItems", "items"
		if p := r.v.get("prefixItems"); p != nil {
			if p.kind != jArray {
				r.fail("prefixItems", "must be an array of schemas")
			} else {
				kw.tuple = b.subs(r, p, r.at("prefixItems"))
			}
		}
		b.additional(r, kw, "items", r.v.get("prefixItems") == nil)
	} else {
		if it := r.v.get("items"); it != nil && it.kind == jArray {
			kw.tuple = b.subs(r, it, r.at("items"))
		} else {
			kw.items = b.sub(r, "items")
		}
		b.additional(r, kw, "additionalItems", false)
	}
	if b.d >= draft6 {
		b.sub(r, "contains") // read for its errors; Confluent does not compare it
		kw.contains = r.v.get("contains") != nil
	}
	if b.d >= draft2019 {
		kw.unevaluated = b.sub(r, "unevaluatedItems")
		if r.v.get("contains") != nil {
			kw.minContains, kw.maxContains = r.count("minContains"), r.count("maxContains")
			if kw.minContains == nil {
				kw.minContains = &value{kind: jNumber, s: "1", num: big.NewRat(1, 1)} // its default
			}
		}
	}
	return kw, r.err
}

// additional reads additionalItems (or 2020-12's items): a boolean opens or
// closes the array past its tuple, a schema partially opens it. 2020-12's
// items without prefixItems is the schema of every item, except false, which
// Confluent reads as closing the array.
func (b *builder) additional(r *reader, kw *arrayKw, name string, every bool) {
	x := r.v.get(name)
	switch {
	case x == nil:
	case x.kind == jBool && !x.b:
		kw.noAdditional = true
	case x.kind == jBool:
	case every:
		kw.items = b.sub(r, name)
	default:
		kw.additional = b.sub(r, name)
	}
}
