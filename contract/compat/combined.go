package compat

import "fmt"

// unionCovers handles a combined schema facing a plain one, as Confluent
// does: a plain schema that became a union (anyOf, oneOf) is compatible if
// one member accepts what it accepted (SUM_TYPE_EXTENDED); an allOf that
// became a plain schema is compatible if one of its members alone was
// already that strict (PRODUCT_TYPE_NARROWED); a combination of one member
// stands for that member. It reports whether it settled the comparison.
func unionCovers(c *ctx, o, u *node) bool {
	switch {
	case o.kind != nCombined && u.kind == nCombined:
		subs := u.comb.subs
		if len(subs) == 1 {
			return covered(c, o, subs[0])
		}
		if u.comb.criterion == "allOf" {
			return false
		}
		for _, s := range subs {
			if covered(c, o, s) {
				c.add(ruleSumExtended, o.src, u.src)
				return true
			}
		}
	case o.kind == nCombined && u.kind != nCombined:
		subs := o.comb.subs
		if len(subs) == 1 {
			return covered(c, subs[0], u)
		}
		if o.comb.criterion != "allOf" {
			return false
		}
		for _, s := range subs {
			if covered(c, s, u) {
				c.add(ruleProductNarrowed, o.src, u.src)
				return true
			}
		}
	}
	return false
}

// covered compares o with u in a trial context and, if they are compatible,
// keeps the differences found.
func covered(c *ctx, o, u *node) bool {
	sc := c.sub()
	compare(sc, o, u)
	if !sc.compatible() {
		return false
	}
	c.addAll(sc.diffs)
	return true
}

// compareCombined compares two combined schemas: the criteria, then the
// members, paired by a maximum matching of the pairs that are compatible.
// Every member of the smaller side must find a partner, or the combination
// changed (COMBINED_TYPE_SUBSCHEMAS_CHANGED).
func compareCombined(c *ctx, o, u *node) {
	oc, uc := o.comb, u.comb
	if rule := criteriaChange(oc, uc); rule != "" {
		c.add(rule, o.src, u.src)
		if rule == ruleCombinedChanged {
			return
		}
	}
	os, oIdx := members(oc)
	us, _ := members(uc)
	switch {
	case len(os) < len(us) && uc.criterion == "allOf":
		c.add(ruleProductExtended, o.src, u.src)
	case len(os) < len(us):
		c.add(ruleSumExtended, o.src, u.src)
	case len(os) > len(us) && oc.criterion != "allOf":
		c.add(ruleSumNarrowed, o.src, u.src)
	case len(os) > len(us):
		c.add(ruleProductNarrowed, o.src, u.src)
	}
	edges := make([][][]diff, len(os))
	ok := make([][]bool, len(os))
	for i, s := range os {
		edges[i], ok[i] = make([][]diff, len(us)), make([]bool, len(us))
		if !oc.synthetic {
			c.enter(fmt.Sprintf("%s/%d", oc.criterion, oIdx[i]))
		}
		for j, t := range us {
			sc := c.sub()
			compare(sc, s, t)
			edges[i][j], ok[i][j] = sc.diffs, sc.compatible()
		}
		if !oc.synthetic {
			c.leave()
		}
	}
	matched := 0
	for i, j := range maxMatching(ok) {
		if j >= 0 {
			c.addAll(edges[i][j])
			matched++
		}
	}
	if matched < min(len(os), len(us)) {
		c.add(ruleCombinedSubschemasChanged, o.src, u.src)
	}
}

// criteriaChange is the difference between two criteria: anything may become
// anyOf, and a combination of one member may become any other.
func criteriaChange(oc, uc *combined) string {
	if oc.criterion == uc.criterion {
		return ""
	}
	oOne, uOne := len(oc.subs) == 1, len(uc.subs) == 1
	if uc.criterion == "anyOf" || (oOne && uOne) || (oOne && uc.criterion == "oneOf") || (uOne && oc.criterion == "allOf") {
		return ruleCombinedExtended
	}
	return ruleCombinedChanged
}

// members are a combination's distinct members (as JSON) and their indexes in
// the document. A synthetic combination's members are distinct by kind.
func members(c *combined) ([]*node, []int) {
	var out []*node
	var idx []int
	seen := map[string]bool{}
	for i, s := range c.subs {
		if !c.synthetic {
			k := s.src.canonical()
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		out = append(out, s)
		idx = append(idx, i)
	}
	return out, idx
}

// maxMatching pairs rows with columns along ok edges, as many pairs as can
// be (augmenting paths), trying columns in order so the result is stable. It
// returns each row's column, or -1.
func maxMatching(ok [][]bool) []int {
	rowOf := map[int]int{}
	colOf := make([]int, len(ok))
	var try func(i int, seen map[int]bool) bool
	try = func(i int, seen map[int]bool) bool {
		for j, e := range ok[i] {
			if !e || seen[j] {
				continue
			}
			seen[j] = true
			if r, taken := rowOf[j]; !taken || try(r, seen) {
				rowOf[j], colOf[i] = i, j
				return true
			}
		}
		return false
	}
	for i := range ok {
		colOf[i] = -1
		try(i, map[int]bool{})
	}
	return colOf
}
