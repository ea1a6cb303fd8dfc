package compat

import "math/big"

// compareBound compares a bounding keyword (maxLength, minimum, maxItems...):
// added, removed, increased or decreased. Whether the change is compatible
// is the rule's, in compatibleRules: an upper bound may grow, a lower one
// shrink, and either may go.
func compareBound(c *ctx, keyword string, o, u *value) {
	b := bounded{keyword: keyword}
	switch {
	case o == nil && u == nil:
	case o == nil:
		c.addAt(keyword, b.rule("ADDED"), nil, u)
	case u == nil:
		c.addAt(keyword, b.rule("REMOVED"), o, nil)
	default:
		switch o.rat().Cmp(u.rat()) {
		case -1:
			c.addAt(keyword, b.rule("INCREASED"), o, u)
		case 1:
			c.addAt(keyword, b.rule("DECREASED"), o, u)
		}
	}
}

func compareString(c *ctx, o, u *stringKw) {
	compareBound(c, "maxLength", o.maxLength, u.maxLength)
	compareBound(c, "minLength", o.minLength, u.minLength)
	switch op, up := o.pattern, u.pattern; {
	case op == nil && up == nil:
	case op == nil:
		c.addAt("pattern", rulePatternAdded, nil, up)
	case up == nil:
		c.addAt("pattern", rulePatternRemoved, op, nil)
	case op.s != up.s:
		c.addAt("pattern", rulePatternChanged, op, up)
	}
}

func compareNumber(c *ctx, on, un *node) {
	o, u := on.num, un.num
	compareBound(c, "maximum", o.maximum, u.maximum)
	compareBound(c, "minimum", o.minimum, u.minimum)
	compareBound(c, "exclusiveMaximum", o.exclusiveMaximum, u.exclusiveMaximum)
	compareBound(c, "exclusiveMinimum", o.exclusiveMinimum, u.exclusiveMinimum)
	compareMultipleOf(c, o.multipleOf, u.multipleOf)
	// Untyped, number, integer: each accepts fewer documents than the one
	// before (Confluent compares number with integer only; see compareTyped).
	switch or, ur := numberRank(on), numberRank(un); {
	case or > ur:
		c.add(ruleTypeExtended, on.src.get("type"), un.src.get("type"))
	case or < ur:
		c.add(ruleTypeNarrowed, on.src.get("type"), un.src.get("type"))
	}
}

// numberRank orders a number node by what it accepts: 0 untyped, 1 any
// number, 2 integers.
func numberRank(n *node) int {
	switch {
	case n.num.integer:
		return 2
	case n.typed:
		return 1
	}
	return 0
}

// compareMultipleOf: a multiple of the new step is a multiple of the old one
// when the old step divides the new (expanded: fewer numbers pass), and the
// other way round when the new divides the old (reduced: more pass).
func compareMultipleOf(c *ctx, o, u *value) {
	switch {
	case o == nil && u == nil:
	case o == nil:
		c.addAt("multipleOf", ruleMultipleOfAdded, nil, u)
	case u == nil:
		c.addAt("multipleOf", ruleMultipleOfRemoved, o, nil)
	case o.rat().Cmp(u.rat()) == 0:
	case divides(o.rat(), u.rat()):
		c.addAt("multipleOf", ruleMultipleOfExpanded, o, u)
	case divides(u.rat(), o.rat()):
		c.addAt("multipleOf", ruleMultipleOfReduced, o, u)
	default:
		c.addAt("multipleOf", ruleMultipleOfChanged, o, u)
	}
}

// divides reports whether b is an integer multiple of a (a > 0).
func divides(a, b *big.Rat) bool {
	return new(big.Rat).Quo(b, a).IsInt()
}
