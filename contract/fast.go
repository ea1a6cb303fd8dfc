package contract

import (
	"encoding/json"
	"math"
	"math/big"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path: a validator that reads the payload's JSON text in place,
// without decoding it into a document tree, compiled from the schema the
// jsonschema compiler produced (so drafts, $ref resolution and keyword
// meanings are the library's own). It answers valid, invalid or unsure,
// and is sound in both directions: valid only when the library would
// accept the document, invalid only when it would refuse it. Keywords and
// values it does not decide (uniqueItems, dependencies, unevaluated*,
// strings with escapes, numbers at a bound's rounding, ...) make it
// unsure. Anything but valid goes to the library (Schema.Validate), which
// has the last word and writes the error: so the fast path only ever saves
// work, and a bug in it could at worst accept what the library would
// refuse, which FuzzFastAgreesWithLibrary guards against.
type result uint8

const (
	valid result = iota
	invalid
	unsure
)

// maxDepth bounds the fast path's recursion (nested values, references):
// deeper is unsure, and the library decides.
const maxDepth = 128

// maxFew is the most members an object node looks up by scanning a list.
const maxFew = 16

// JSON types as a bit set.
const (
	tNull = 1 << iota
	tBool
	tNumber
	tInteger
	tString
	tArray
	tObject
)

// node is one compiled schema of the fast path.
type node struct {
	always      *bool // a boolean schema
	unsupported bool  // a keyword the fast path does not decide: always unsure
	types       int   // 0: any
	consts      []constant
	hasEnum     bool // consts is an enum (else, when set, a const)
	format      *jsonschema.Format
	ref         *node
	refOnly     bool // draft-07 and older: $ref ends validation (siblings after it are ignored)
	allOf       []*node
	anyOf       []*node
	oneOf       []*node
	not         *node
	ifn         *node
	then, elsen *node

	// objects
	members   map[string]member
	few       []namedMember // members, when there are few: a scan beats hashing
	required  uint64        // bits of the required members
	patterns  []patternProp
	addl      *node // additionalProperties as a schema
	addlFalse bool
	needKeys  bool // the node reads property names
	maxProps  int  // -1: none
	minProps  bool // minProperties: counting keys needs unique keys; unsure

	// arrays
	items     *node   // every item (draft-07 items, 2020-12 items)
	tuple     []*node // draft-07 items array, 2020-12 prefixItems
	hasTuple  bool    // items is an array (draft-07), even an empty one
	addItems  *node   // draft-07 additionalItems after a tuple
	addNone   bool    // additionalItems: false
	minItems  int     // -1: none
	maxItems  int
	uniqItems bool

	// strings
	minLen, maxLen int // -1: none
	pattern        jsonschema.Regexp

	// numbers
	bounds   []bound
	multiple int64 // 0: none
	multUns  bool  // multipleOf the fast path cannot decide
}

type namedMember struct {
	name string
	member
}

type member struct {
	node    *node // nil when the name is only required, not in properties
	inProps bool
	req     int // bit in required, -1 when not required
}

type patternProp struct {
	re   jsonschema.Regexp
	node *node
}

// constant is one enum or const value the fast path compares: a string,
// boolean, null or integer. Other values make the node unsure for values
// of their JSON type.
type constant struct {
	kind int // tNull, tBool, tString, tInteger, or tNumber / tArray / tObject: undecidable
	s    string
	b    bool
	i    int64
}

// bound is one of minimum, maximum and the exclusive ones.
type bound struct {
	f         float64 // the bound rounded to the nearest float64
	i         int64   // the bound, when isInt
	isInt     bool
	cmpFails  int  // the value fails when cmp(value, bound) == cmpFails ...
	eqFails   bool // ... or when it is equal and eqFails
	undecided bool // a bound the fast path cannot compare with
}

type fastCompiler struct{ done map[*jsonschema.Schema]*node }

func newFastCompiler() *fastCompiler { return &fastCompiler{done: map[*jsonschema.Schema]*node{}} }

func (c *fastCompiler) compile(s *jsonschema.Schema) *node {
	if s == nil {
		return nil
	}
	if n, ok := c.done[s]; ok {
		return n // a reference met again: the graph may have cycles
	}
	n := &node{maxProps: -1, minItems: -1, maxItems: -1, minLen: -1, maxLen: -1}
	c.done[s] = n
	if s.Bool != nil {
		n.always = s.Bool
		return n
	}
	if s.RecursiveRef != nil || s.DynamicRef != nil || s.Dependencies != nil || s.DependentRequired != nil ||
		s.DependentSchemas != nil || s.PropertyNames != nil || s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil ||
		s.Contains != nil || s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil ||
		len(s.Extensions) > 0 || len(s.Required) > 64 || (s.Format != nil && s.Format.Name == "regex") {
		n.unsupported = true
		return n
	}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			n.types |= typeBit(t)
		}
	}
	if s.Const != nil {
		n.consts = []constant{constantOf(*s.Const)}
	}
	if s.Enum != nil {
		n.hasEnum = true
		for _, v := range s.Enum.Values {
			n.consts = append(n.consts, constantOf(v))
		}
	}
	n.format = s.Format
	n.ref = c.compile(s.Ref)
	n.refOnly = s.Ref != nil && s.DraftVersion < 2019
	n.allOf, n.anyOf, n.oneOf = c.list(s.AllOf), c.list(s.AnyOf), c.list(s.OneOf)
	n.not, n.ifn, n.then, n.elsen = c.compile(s.Not), c.compile(s.If), c.compile(s.Then), c.compile(s.Else)
	c.object(n, s)
	c.array(n, s)
	if s.MinLength != nil {
		n.minLen = *s.MinLength
	}
	if s.MaxLength != nil {
		n.maxLen = *s.MaxLength
	}
	n.pattern = s.Pattern
	for _, b := range []struct {
		r        *big.Rat
		cmpFails int
		eqFails  bool
	}{{s.Minimum, -1, false}, {s.Maximum, 1, false}, {s.ExclusiveMinimum, -1, true}, {s.ExclusiveMaximum, 1, true}} {
		if b.r != nil {
			n.bounds = append(n.bounds, newBound(b.r, b.cmpFails, b.eqFails))
		}
	}
	if m := s.MultipleOf; m != nil {
		if m.IsInt() && m.Num().IsInt64() && m.Num().Int64() > 0 {
			n.multiple = m.Num().Int64()
		} else {
			n.multUns = true
		}
	}
	return n
}

func (c *fastCompiler) list(ss []*jsonschema.Schema) []*node {
	if len(ss) == 0 {
		return nil
	}
	out := make([]*node, len(ss))
	for i, s := range ss {
		out[i] = c.compile(s)
	}
	return out
}

func (c *fastCompiler) object(n *node, s *jsonschema.Schema) {
	if len(s.Properties) > 0 || len(s.Required) > 0 {
		n.members = map[string]member{}
	}
	for name, ps := range s.Properties {
		n.members[name] = member{node: c.compile(ps), inProps: true, req: -1}
	}
	for i, name := range s.Required {
		m, ok := n.members[name]
		if !ok {
			m = member{req: -1}
		}
		if m.req < 0 {
			m.req = i
			n.required |= 1 << i
		}
		n.members[name] = m
	}
	for re, ps := range s.PatternProperties {
		n.patterns = append(n.patterns, patternProp{re: re, node: c.compile(ps)})
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		n.addlFalse = !a
	case *jsonschema.Schema:
		n.addl = c.compile(a)
	}
	if len(n.members) <= maxFew {
		for name, m := range n.members {
			n.few = append(n.few, namedMember{name, m})
		}
	}
	n.needKeys = n.members != nil || len(n.patterns) > 0 || n.addlFalse || n.addl != nil
	if s.MaxProperties != nil {
		n.maxProps = *s.MaxProperties
	}
	n.minProps = s.MinProperties != nil
}

func (c *fastCompiler) array(n *node, s *jsonschema.Schema) {
	if s.DraftVersion < 2020 {
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			n.items = c.compile(it)
		case []*jsonschema.Schema:
			n.tuple, n.hasTuple = c.list(it), true
			switch a := s.AdditionalItems.(type) {
			case bool:
				n.addNone = !a
			case *jsonschema.Schema:
				n.addItems = c.compile(a)
			}
		}
	} else {
		n.tuple = c.list(s.PrefixItems)
		n.addItems = c.compile(s.Items2020)
	}
	if s.MinItems != nil {
		n.minItems = *s.MinItems
	}
	if s.MaxItems != nil {
		n.maxItems = *s.MaxItems
	}
	n.uniqItems = s.UniqueItems
}

func typeBit(t string) int {
	switch t {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "number":
		return tNumber
	case "integer":
		return tInteger
	case "string":
		return tString
	case "array":
		return tArray
	case "object":
		return tObject
	}
	return 0
}

func constantOf(v any) constant {
	switch v := v.(type) {
	case nil:
		return constant{kind: tNull}
	case bool:
		return constant{kind: tBool, b: v}
	case string:
		return constant{kind: tString, s: v}
	case json.Number:
		if i, ok := intLiteral(string(v)); ok {
			return constant{kind: tInteger, i: i}
		}
		return constant{kind: tNumber}
	case []any:
		return constant{kind: tArray}
	}
	return constant{kind: tObject}
}

func newBound(r *big.Rat, cmpFails int, eqFails bool) bound {
	b := bound{cmpFails: cmpFails, eqFails: eqFails}
	if r.IsInt() && r.Num().IsInt64() {
		b.i, b.isInt = r.Num().Int64(), true
	}
	b.f, _ = r.Float64()
	b.undecided = math.IsInf(b.f, 0)
	return b
}
