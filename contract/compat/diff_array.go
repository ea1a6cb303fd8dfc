package compat

import (
	"fmt"
	"math/big"
)

func compareArray(c *ctx, on, un *node) {
	o, u := on.arr, un.arr
	c.enter("items")
	compare(c, o.items, u.items)
	c.leave()
	compareTuple(c, o, u)
	compareAdditional(c, o.additionalKw, "ADDITIONAL_ITEMS",
		o.noAdditional, o.additional, u.noAdditional, u.additional,
		on.src.get(o.additionalKw), un.src.get(u.additionalKw))
	compareUnevaluated(c, "unevaluatedItems", "UNEVALUATED_ITEMS", o.unevaluated, u.unevaluated)
	compareBound(c, "maxItems", o.maxItems, u.maxItems)
	compareBound(c, "minItems", o.minItems, u.minItems)
	switch {
	case o.unique && !u.unique:
		c.addAt("uniqueItems", ruleUniqueItemsRemoved, on.src.get("uniqueItems"), un.src.get("uniqueItems"))
	case !o.unique && u.unique:
		c.addAt("uniqueItems", ruleUniqueItemsAdded, on.src.get("uniqueItems"), un.src.get("uniqueItems"))
	}
	compareBound(c, "maxContains", o.maxContains, u.maxContains)
	compareBound(c, "minContains", minContains(o, u), minContains(u, o))
}

// minContains is a's minContains as compared with b's. Draft-06 and -07 have
// no minContains, but their contains asks for one matching item, as 2019-09's
// default minContains of 1 does: facing a later draft's schema that compares
// it, an earlier draft's contains is read as that default, so that one
// schema written in two drafts is no difference.
func minContains(a, b *arrayKw) *value {
	if a.minContains == nil && a.contains && b.minContains != nil {
		return &value{kind: jNumber, s: "1", num: big.NewRat(1, 1)}
	}
	return a.minContains
}

// compareTuple compares positional item schemas: those both declare, then
// those only the original declares (judged by the update's content model
// past its tuple), then those only the update declares (judged by the
// original's), as for properties.
func compareTuple(c *ctx, o, u *arrayKw) {
	for i := 0; i < max(len(o.tuple), len(u.tuple)); i++ {
		c.enter(fmt.Sprintf("%s/%d", o.tupleKw, i))
		switch {
		case i >= len(u.tuple):
			itemRemoved(c, o.tuple[i], u)
		case i >= len(o.tuple):
			itemAdded(c, o, u.tuple[i])
		default:
			compare(c, o.tuple[i], u.tuple[i])
		}
		c.leave()
	}
}

func itemRemoved(c *ctx, os *node, u *arrayKw) {
	switch p := u.partial(); {
	case u.open():
		c.add(ruleItemRemovedFromOpen, os.src, nil)
	case p != nil:
		sc := c.sub()
		compare(sc, os, p)
		c.addAll(sc.diffs)
		if sc.compatible() {
			c.add(ruleItemRemovedCovered, os.src, p.src)
		} else {
			c.add(ruleItemRemovedNotCovered, os.src, p.src)
		}
	case os.isFalse():
		c.add(ruleItemWithFalseRemovedClosed, os.src, nil)
	default:
		c.add(ruleItemRemovedFromClosed, os.src, nil)
	}
}

func itemAdded(c *ctx, o *arrayKw, us *node) {
	switch p := o.partial(); {
	case o.open() && us.isEmpty():
		c.add(ruleItemWithEmptyAddedToOpen, nil, us.src)
	case o.open():
		c.add(ruleItemAddedToOpen, nil, us.src)
	case p != nil:
		sc := c.sub()
		compare(sc, p, us)
		c.addAll(sc.diffs)
		if sc.compatible() {
			c.add(ruleItemAddedCovered, p.src, us.src)
		} else {
			c.add(ruleItemAddedNotCovered, p.src, us.src)
		}
	default:
		c.add(ruleItemAddedToClosed, nil, us.src)
	}
}

// open reports an array open past its tuple: any further item, as anything.
func (a *arrayKw) open() bool {
	return !a.noAdditional && a.additional == nil && (a.unevaluated == nil || a.unevaluated.isEmpty())
}

// partial is the schema of items past the tuple in a partially open array.
func (a *arrayKw) partial() *node {
	if a.additional != nil {
		return a.additional
	}
	if u := a.unevaluated; !a.noAdditional && u != nil && !u.isFalse() && !u.isEmpty() {
		return u
	}
	return nil
}

// compareAdditional compares additionalProperties or additionalItems: a
// boolean that opens or closes, or a schema that partially opens.
func compareAdditional(c *ctx, kw, rule string, oNo bool, o *node, uNo bool, u *node, ov, uv *value) {
	c.enter(kw)
	defer c.leave()
	switch {
	case oNo && !uNo:
		c.add(rule+"_ADDED", ov, uv)
	case !oNo && uNo:
		c.add(rule+"_REMOVED", ov, uv)
	case o == nil && u != nil:
		c.add(rule+"_NARROWED", ov, uv)
	case o != nil && u == nil:
		c.add(rule+"_EXTENDED", ov, uv)
	default:
		compare(c, o, u)
	}
}

// compareUnevaluated compares unevaluatedProperties or unevaluatedItems
// (2019-09 and later), by Confluent's rules: false and absent are the
// extremes, true and a schema between them.
func compareUnevaluated(c *ctx, kw, rule string, o, u *node) {
	if o == nil && u == nil {
		return
	}
	var ov, uv *value
	if o != nil {
		ov = o.src
	}
	if u != nil {
		uv = u.src
	}
	c.enter(kw)
	defer c.leave()
	if r := unevaluatedRule(rule, o, u); r != "" {
		c.add(r, ov, uv)
	} else {
		compare(c, o, u)
	}
}

func unevaluatedRule(rule string, o, u *node) string {
	switch {
	case o == nil && u.isFalse():
		return rule + "_REMOVED"
	case o == nil:
		return rule + "_NARROWED"
	case u == nil && o.isFalse():
		return rule + "_ADDED"
	case u == nil:
		return rule + "_EXTENDED"
	case o.isFalse() && !u.isFalse():
		return rule + "_ADDED"
	case !o.isFalse() && u.isFalse():
		return rule + "_REMOVED"
	case o.isEmpty() && !u.isEmpty():
		return rule + "_NARROWED"
	case !o.isEmpty() && u.isEmpty():
		return rule + "_EXTENDED"
	}
	return ""
}

func depNames(o, u []propDep) []string {
	var names []string
	seen := map[string]bool{}
	for _, ds := range [][]propDep{o, u} {
		for _, d := range ds {
			if !seen[d.name] {
				seen[d.name] = true
				names = append(names, d.name)
			}
		}
	}
	return names
}

func findPropDep(ds []propDep, name string) *propDep {
	for i := range ds {
		if ds[i].name == name {
			return &ds[i]
		}
	}
	return nil
}

func schemaDepNames(o, u []schemaDep) []string {
	var names []string
	seen := map[string]bool{}
	for _, ds := range [][]schemaDep{o, u} {
		for _, d := range ds {
			if !seen[d.name] {
				seen[d.name] = true
				names = append(names, d.name)
			}
		}
	}
	return names
}

func findSchemaDep(ds []schemaDep, name string) *node {
	for _, d := range ds {
		if d.name == name {
			return d.schema
		}
	}
	return nil
}
