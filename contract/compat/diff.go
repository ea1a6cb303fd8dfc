package compat

import (
	"fmt"
	"strings"
)

// diff is a Difference before it leaves the package: its path is relative to
// the pair of schemas being compared, and its values are not yet rendered.
type diff struct {
	path     string // pointer tokens joined by "/", without the leading "#/"
	rule     string
	old, new *value
}

func allCompatible(ds []diff) bool {
	for _, d := range ds {
		if !compatibleRules[d.rule] {
			return false
		}
	}
	return true
}

// ctx collects the differences of one comparison at one place in the tree.
type ctx struct {
	d     *differ
	path  []string
	diffs []diff
}

// sub is a context at the same place whose differences the caller may keep
// or drop (to try a pairing of sub-schemas, for instance).
func (c *ctx) sub() *ctx {
	return &ctx{d: c.d, path: append([]string(nil), c.path...)}
}

func (c *ctx) enter(tok string) { c.path = append(c.path, tok) }
func (c *ctx) leave()           { c.path = c.path[:len(c.path)-1] }

func (c *ctx) add(rule string, o, u *value) {
	c.diffs = append(c.diffs, diff{path: strings.Join(c.path, "/"), rule: rule, old: o, new: u})
}

func (c *ctx) addAt(tok, rule string, o, u *value) {
	c.enter(tok)
	c.add(rule, o, u)
	c.leave()
}

func (c *ctx) addAll(ds []diff) { c.diffs = append(c.diffs, ds...) }

func (c *ctx) compatible() bool { return allCompatible(c.diffs) }

// addRebased adds differences found relative to a pair at this place.
func (c *ctx) addRebased(ds []diff) {
	if !c.d.spend(len(ds)) {
		return
	}
	prefix := strings.Join(c.path, "/")
	for _, d := range ds {
		switch {
		case prefix == "":
		case d.path == "":
			d.path = prefix
		default:
			d.path = prefix + "/" + d.path
		}
		c.diffs = append(c.diffs, d)
	}
}

// maxWork bounds the work of one Diff, counted in pairs of sub-schemas
// compared and differences carried up the tree: combined schemas compare
// every member with every other, and a hostile or generated schema must not
// make a registration take minutes. A million steps is a few seconds of one
// core: a oneOf of 100 variants of 100 properties each takes about as many.
var maxWork = 1_000_000

type pair struct{ o, u *node }

// differ memoises the comparison of each pair of nodes, which bounds the
// cross products of combined schemas, and breaks recursion: a pair met again
// while it is being compared is assumed compatible (the greatest fixed
// point), unless an earlier pass found it incompatible (seed). Results that
// rest on such an assumption may be wrong in the pass that made it, so
// compare runs passes until the set of incompatible pairs stops growing.
type differ struct {
	memo       map[pair][]diff
	busy       map[pair]bool
	seed       map[pair][]diff
	optimistic bool
	work       *int
	err        error
}

func (d *differ) memoized(o, u *node) []diff {
	k := pair{o, u}
	if r, ok := d.memo[k]; ok {
		return r
	}
	if d.busy[k] {
		if s, ok := d.seed[k]; ok {
			return s
		}
		d.optimistic = true
		return nil
	}
	if !d.spend(1) {
		return nil
	}
	d.busy[k] = true
	sc := &ctx{d: d}
	compareTypes(sc, o, u)
	delete(d.busy, k)
	d.memo[k] = sc.diffs
	return sc.diffs
}

// spend counts n units of work, and reports whether the budget holds.
func (d *differ) spend(n int) bool {
	*d.work += n
	if *d.work > maxWork && d.err == nil {
		d.err = fmt.Errorf("the schemas are too complex to compare (over %d steps)", maxWork)
	}
	return d.err == nil
}

func (d *differ) incompatible() map[pair][]diff {
	out := map[pair][]diff{}
	for k, ds := range d.memo {
		if !allCompatible(ds) {
			out[k] = ds
		}
	}
	return out
}

// diffTrees lists the differences from original to update.
func diffTrees(original, update *node) ([]diff, error) {
	work := 0
	seed := map[pair][]diff{}
	for {
		d := &differ{memo: map[pair][]diff{}, busy: map[pair]bool{}, seed: seed, work: &work}
		c := &ctx{d: d}
		compare(c, original, update)
		if d.err != nil {
			return nil, d.err
		}
		next := d.incompatible()
		if !d.optimistic || sameKeys(next, seed) {
			return c.diffs, nil
		}
		seed = next
	}
}

func sameKeys(a, b map[pair][]diff) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// compare compares two schemas at c's place; either may be absent.
func compare(c *ctx, o, u *node) {
	switch {
	case o == nil && u == nil:
		return
	case o == nil:
		c.add(ruleSchemaAdded, nil, u.src)
		return
	case u == nil:
		c.add(ruleSchemaRemoved, o.src, nil)
		return
	}
	o, u = deref(o), deref(u)
	c.addRebased(c.d.memoized(o, u))
}

func compareTypes(c *ctx, o, u *node) {
	if unionCovers(c, o, u) {
		return
	}
	if o.kind != u.kind {
		// Anything may become the empty schema, and false anything.
		if o.kind == nFalse || u.kind == nEmpty || connectBytes(o, u) {
			return
		}
		c.add(ruleTypeChanged, o.src, u.src)
		return
	}
	compareMeta(c, o.meta, u.meta)
	if o.kind != nNumber {
		compareTyped(c, o, u)
	}
	switch o.kind {
	case nString:
		compareString(c, o.str, u.str)
	case nNumber:
		compareNumber(c, o, u)
	case nConst:
		if o.enum[0].canonical() != u.enum[0].canonical() {
			c.addAt("const", ruleEnumChanged, o.enum[0], u.enum[0])
		}
	case nEnum:
		compareEnum(c, o, u)
	case nCombined:
		compareCombined(c, o, u)
	case nNot:
		compareNot(c, o, u)
	case nObject:
		compareObject(c, o, u)
	case nArray:
		compareArray(c, o, u)
	}
}

// compareTyped compares whether two nodes of one kind require their type:
// {"minimum": 0} lets a string through, {"type": "number", "minimum": 0}
// does not. Confluent compares the two alike (only integer against number),
// and so accepts a type added to an untyped schema; this checker calls it
// TYPE_NARROWED, and the type's removal TYPE_EXTENDED (see the package doc).
func compareTyped(c *ctx, o, u *node) {
	switch {
	case o.typed && !u.typed:
		c.add(ruleTypeExtended, o.src.get("type"), u.src.get("type"))
	case !o.typed && u.typed:
		c.add(ruleTypeNarrowed, o.src.get("type"), u.src.get("type"))
	}
}

// connectBytes is Confluent's allowance for Kafka Connect's decimal fix: two
// schemas both marked "connect.type": "bytes" are of one type.
func connectBytes(o, u *node) bool {
	ot, ut := o.src.get("connect.type"), u.src.get("connect.type")
	return ot != nil && ut != nil && ot.kind == jString && ut.kind == jString && ot.s == "bytes" && ut.s == "bytes"
}

func compareMeta(c *ctx, o, u *meta) {
	if o == nil {
		o = &meta{}
	}
	if u == nil {
		u = &meta{}
	}
	for _, m := range []struct {
		rule string
		o, u *value
	}{
		{ruleIDChanged, o.id, u.id}, {ruleTitleChanged, o.title, u.title},
		{ruleDescriptionChanged, o.description, u.description}, {ruleDefaultChanged, o.def, u.def},
	} {
		if !sameValue(m.o, m.u) {
			c.add(m.rule, m.o, m.u)
		}
	}
}

func sameValue(a, b *value) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.canonical() == b.canonical()
}

func compareNot(c *ctx, o, u *node) {
	c.enter("not")
	defer c.leave()
	sc := c.sub()
	// The update's "not" must refuse at least what the original's refused:
	// compare them the other way round.
	compare(sc, u.not, o.not)
	if sc.compatible() {
		c.add(ruleNotNarrowed, o.not.src, u.not.src)
	} else {
		c.add(ruleNotExtended, o.not.src, u.not.src)
	}
}

func compareEnum(c *ctx, o, u *node) {
	os, us := valueSet(o.enum), valueSet(u.enum)
	oSub, uSub := subset(os, us), subset(us, os)
	ov, uv := o.src.get("enum"), u.src.get("enum")
	switch {
	case oSub && uSub:
	case oSub:
		c.addAt("enum", ruleEnumExtended, ov, uv)
	case uSub:
		c.addAt("enum", ruleEnumNarrowed, ov, uv)
	default:
		c.addAt("enum", ruleEnumChanged, ov, uv)
	}
}

func valueSet(vs []*value) map[string]bool {
	s := map[string]bool{}
	for _, v := range vs {
		s[v.canonical()] = true
	}
	return s
}

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
