package compat

import "regexp"

// nkind is what a node of the schema tree stands for. The kinds are the
// schema classes Confluent's checker compares (those of the everit library:
// StringSchema, NumberSchema, CombinedSchema...): two nodes of different kinds
// are a TYPE_CHANGED, except that anything may become the empty schema and
// the false schema may become anything.
type nkind uint8

const (
	nEmpty    nkind = iota // {} or true: accepts every document
	nFalse                 // false: accepts none
	nString                // type string, or string keywords without a type
	nNumber                // type number or integer, or number keywords
	nBoolean               // type boolean
	nNull                  // type null
	nArray                 // type array, or array keywords
	nObject                // type object, or object keywords
	nEnum                  // enum
	nConst                 // const
	nCombined              // allOf, anyOf, oneOf, or several of the above at once
	nNot                   // not
	nRef                   // $ref (resolved: see node.ref)
	nCond                  // if/then/else, which Confluent does not compare
)

// node is one schema of the tree. A schema object with keywords of several
// kinds ({"type": "string", "enum": [...]}) is, as in Confluent's model, a
// synthetic allOf of one node per kind; parts of one object share its src.
type node struct {
	kind nkind
	src  *value // the schema object (or boolean) the node was read from
	// typed: a string, number, array or object node read from "type";
	// one read from its keywords alone lets every other type through.
	typed bool
	meta  *meta // on the node standing for a whole schema object
	str   *stringKw
	num   *numberKw
	arr   *arrayKw
	obj   *objectKw
	enum  []*value // enum's values; const's one value
	comb  *combined
	not   *node
	ref   *node // the target of a $ref
}

// meta is the annotations Confluent compares on every schema.
type meta struct {
	id, title, description, def *value
}

type stringKw struct {
	minLength, maxLength, pattern *value
}

type numberKw struct {
	minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf *value
	integer                                                          bool
}

type arrayKw struct {
	items        *node   // the schema of every item ("items" as one schema)
	tuple        []*node // positional item schemas ("items" as an array, or "prefixItems")
	noAdditional bool    // items past the tuple are refused
	additional   *node   // the schema of items past the tuple
	unevaluated  *node   // unevaluatedItems (2019-09 and later)
	minItems     *value
	maxItems     *value
	minContains  *value // 2019-09 and later, only beside contains
	maxContains  *value
	contains     bool // contains is present (draft-06 and later)
	unique       bool
	tupleKw      string // the keyword naming the tuple in this dialect
	additionalKw string // the keyword naming what follows it
}

type objectKw struct {
	props         []string // in document order
	prop          map[string]*node
	required      map[string]bool
	requiredOrder []string
	noAdditional  bool  // additionalProperties: false
	additional    *node // additionalProperties as a schema
	patterns      []patternProp
	unevaluated   *node // unevaluatedProperties (2019-09 and later)
	propDeps      []propDep
	schemaDeps    []schemaDep
	minProps      *value
	maxProps      *value
	propDepsKw    string // "dependencies" or "dependentRequired"
	schemaDepsKw  string // "dependencies" or "dependentSchemas"
}

type patternProp struct {
	pattern string
	re      *regexp.Regexp
	schema  *node
}

type propDep struct {
	name  string
	names map[string]bool
	src   *value
}

type schemaDep struct {
	name   string
	schema *node
}

type combined struct {
	criterion string // "allOf", "anyOf" or "oneOf"
	subs      []*node
	// synthetic: the combination was not written as such (several kinds of
	// keyword in one object, or a type array), so its members have no
	// pointer of their own and are never duplicates of one another.
	synthetic bool
}

// deref follows $ref to the schema it names; chains were checked for cycles
// when the tree was built.
func deref(n *node) *node {
	for n != nil && n.kind == nRef {
		n = n.ref
	}
	return n
}

// isEmpty reports whether n accepts every document (Confluent's EmptySchema,
// of which TrueSchema is a subclass).
func (n *node) isEmpty() bool { return n != nil && deref(n).kind == nEmpty }

// isFalse reports whether n accepts no document.
func (n *node) isFalse() bool { return n != nil && deref(n).kind == nFalse }
