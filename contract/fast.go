package contract

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
	"unsafe"

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
	required  uint64 // bits of the required members
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
	needText       bool // the node reads a string's text

	// numbers
	bounds   []bound
	multiple int64 // 0: none
	multUns  bool  // multipleOf the fast path cannot decide
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
	n.needText = n.minLen >= 0 || n.maxLen >= 0 || n.pattern != nil || n.format != nil || len(n.consts) > 0
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

// eval judges the JSON value v (exactly its bytes, no surrounding space).
func (n *node) eval(v []byte, depth int) result {
	if n == nil {
		return valid
	}
	if n.always != nil {
		if *n.always {
			return valid
		}
		return invalid
	}
	if n.unsupported || depth > maxDepth || len(v) == 0 {
		return unsure
	}
	t := kindOf(v[0])
	if r := n.checkType(t, v); r != valid {
		return r
	}
	if len(n.consts) > 0 {
		if r := n.checkConsts(t, v); r != valid {
			return r
		}
	}
	if n.format != nil && t == tString {
		s, ok := plainString(v)
		if !ok {
			return unsure
		}
		if n.format.Validate(s) != nil {
			return invalid
		}
	}
	if n.ref != nil {
		r := n.ref.eval(v, depth+1)
		if n.refOnly || r != valid {
			return r
		}
	}
	var r result
	switch t {
	case tObject:
		r = n.evalObject(v, depth)
	case tArray:
		r = n.evalArray(v, depth)
	case tString:
		r = n.evalString(v)
	case tNumber:
		r = n.evalNumber(v)
	}
	if r != valid {
		return r
	}
	return n.evalApplicators(v, depth)
}

func (n *node) checkType(t int, v []byte) result {
	if n.types == 0 || n.types&t != 0 {
		return valid
	}
	if t == tNumber && n.types&tInteger != 0 {
		return integerLiteral(v)
	}
	return invalid
}

// integerLiteral says whether a number literal is an integer (1.0 and 1e2
// are): valid, invalid or unsure.
func integerLiteral(v []byte) result {
	dot := -1
	for i, c := range v {
		switch c {
		case 'e', 'E':
			return unsure
		case '.':
			dot = i
		}
	}
	if dot < 0 {
		return valid
	}
	for _, c := range v[dot+1:] {
		if c != '0' {
			return invalid
		}
	}
	return valid
}

func (n *node) checkConsts(t int, v []byte) result {
	var s string
	var plain bool
	if t == tString {
		s, plain = plainString(v)
	}
	var num int64
	var isInt bool
	if t == tNumber {
		num, isInt = intLiteral(alias(v))
	}
	undecided := false
	for _, c := range n.consts {
		switch {
		case c.kind == tNull && t == tNull, c.kind == tBool && t == tBool && c.b == (v[0] == 't'):
			return valid
		case c.kind == tString && t == tString:
			if !plain {
				undecided = true
			} else if c.s == s {
				return valid
			}
		case c.kind == tInteger && t == tNumber:
			if !isInt {
				undecided = true
			} else if c.i == num {
				return valid
			}
		case c.kind == tNumber && t == tNumber, c.kind == tArray && t == tArray, c.kind == tObject && t == tObject:
			undecided = true
		}
	}
	if undecided {
		return unsure
	}
	return invalid
}

func (n *node) evalApplicators(v []byte, depth int) result {
	for _, c := range n.allOf {
		if r := c.eval(v, depth+1); r != valid {
			return r
		}
	}
	if n.anyOf != nil {
		r := invalid
		for _, c := range n.anyOf {
			switch c.eval(v, depth+1) {
			case valid:
				r = valid
			case unsure:
				if r == invalid {
					r = unsure
				}
			}
			if r == valid {
				break
			}
		}
		if r != valid {
			return r
		}
	}
	if n.oneOf != nil {
		matched, undecided := 0, false
		for _, c := range n.oneOf {
			switch c.eval(v, depth+1) {
			case valid:
				matched++
			case unsure:
				undecided = true
			}
		}
		switch {
		case matched > 1:
			return invalid
		case undecided:
			return unsure
		case matched == 0:
			return invalid
		}
	}
	if n.not != nil {
		switch n.not.eval(v, depth+1) {
		case valid:
			return invalid
		case unsure:
			return unsure
		}
	}
	if n.ifn != nil {
		switch n.ifn.eval(v, depth+1) {
		case valid:
			return n.then.eval(v, depth+1)
		case invalid:
			return n.elsen.eval(v, depth+1)
		default:
			return unsure
		}
	}
	return valid
}

func (n *node) evalObject(v []byte, depth int) result {
	if !n.needKeys && n.maxProps < 0 && !n.minProps {
		return valid
	}
	if n.minProps {
		return unsure
	}
	var seen uint64
	count := 0
	i := skipSpace(v, 1)
	if i < len(v) && v[i] == '}' {
		return n.endObject(seen, count)
	}
	for i < len(v) {
		ks, ke, esc, ok := scanString(v, i)
		if !ok {
			return unsure
		}
		i = skipSpace(v, ke)
		if i >= len(v) || v[i] != ':' {
			return unsure
		}
		vs := skipSpace(v, i+1)
		ve, ok := skipValue(v, vs)
		if !ok {
			return unsure
		}
		count++
		if n.needKeys {
			if esc {
				return unsure
			}
			if r := n.evalMember(v[ks+1:ke-1], v[vs:ve], &seen, depth); r != valid {
				if r == invalid && keyAgain(v, ve, v[ks:ke]) {
					return unsure // the library's document keeps the last duplicate only
				}
				return r
			}
		}
		i = skipSpace(v, ve)
		if i >= len(v) {
			return unsure
		}
		if v[i] == '}' {
			return n.endObject(seen, count)
		}
		if v[i] != ',' {
			return unsure
		}
		i = skipSpace(v, i+1)
	}
	return unsure
}

// keyAgain reports whether the object v holds, after offset i, a member
// named key (a string literal, quotes included) or one whose name has an
// escape (which might decode to it).
func keyAgain(v []byte, i int, key []byte) bool {
	for {
		i = skipSpace(v, i)
		if i >= len(v) || v[i] != ',' {
			return false
		}
		ks, ke, esc, ok := scanString(v, skipSpace(v, i+1))
		if !ok || esc || bytes.Equal(v[ks:ke], key) {
			return true
		}
		i = skipSpace(v, ke)
		if i >= len(v) || v[i] != ':' {
			return true
		}
		if i, ok = skipValue(v, skipSpace(v, i+1)); !ok {
			return true
		}
	}
}

func (n *node) endObject(seen uint64, count int) result {
	if seen&n.required != n.required {
		return invalid
	}
	if n.maxProps >= 0 && count > n.maxProps {
		return unsure // duplicate keys count once in the library's document
	}
	return valid
}

func (n *node) evalMember(key, val []byte, seen *uint64, depth int) result {
	evaluated := false
	if m, ok := n.members[alias(key)]; ok {
		if m.req >= 0 {
			*seen |= 1 << m.req
		}
		if m.inProps {
			evaluated = true
			if r := m.node.eval(val, depth+1); r != valid {
				return r
			}
		}
	}
	for _, p := range n.patterns {
		if p.re.MatchString(alias(key)) {
			evaluated = true
			if r := p.node.eval(val, depth+1); r != valid {
				return r
			}
		}
	}
	if evaluated {
		return valid
	}
	if n.addlFalse {
		return invalid
	}
	return n.addl.eval(val, depth+1)
}

func (n *node) evalArray(v []byte, depth int) result {
	if n.items == nil && n.tuple == nil && n.addItems == nil && !n.addNone && n.minItems < 0 && n.maxItems < 0 && !n.uniqItems {
		return valid
	}
	count := 0
	i := skipSpace(v, 1)
	if i < len(v) && v[i] == ']' {
		return n.endArray(count)
	}
	for i < len(v) {
		e, ok := skipValue(v, i)
		if !ok {
			return unsure
		}
		if r := n.evalItem(count, v[i:e], depth); r != valid {
			return r
		}
		count++
		i = skipSpace(v, e)
		if i >= len(v) {
			return unsure
		}
		if v[i] == ']' {
			return n.endArray(count)
		}
		if v[i] != ',' {
			return unsure
		}
		i = skipSpace(v, i+1)
	}
	return unsure
}

func (n *node) evalItem(k int, item []byte, depth int) result {
	switch {
	case n.items != nil:
		return n.items.eval(item, depth+1)
	case k < len(n.tuple):
		return n.tuple[k].eval(item, depth+1)
	case n.addNone && n.hasTuple:
		return invalid
	}
	return n.addItems.eval(item, depth+1)
}

func (n *node) endArray(count int) result {
	switch {
	case n.minItems >= 0 && count < n.minItems, n.maxItems >= 0 && count > n.maxItems:
		return invalid
	case n.uniqItems && count > 1:
		return unsure
	}
	return valid
}

func (n *node) evalString(v []byte) result {
	if !n.needText || n.minLen < 0 && n.maxLen < 0 && n.pattern == nil {
		return valid
	}
	s, ok := plainString(v)
	if !ok {
		return unsure
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(s)
		if n.minLen >= 0 && l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return invalid
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(s) {
		return invalid
	}
	return valid
}

func (n *node) evalNumber(v []byte) result {
	if n.bounds == nil && n.multiple == 0 && !n.multUns {
		return valid
	}
	s := alias(v)
	i, isInt := intLiteral(s)
	for _, b := range n.bounds {
		c, ok := compare(s, i, isInt, b)
		if !ok {
			return unsure
		}
		if c == b.cmpFails || c == 0 && b.eqFails {
			return invalid
		}
	}
	switch {
	case n.multUns:
		return unsure
	case n.multiple != 0:
		if !isInt {
			return unsure
		}
		if i%n.multiple != 0 {
			return invalid
		}
	}
	return valid
}

// compare compares the number literal s (i when it is an integer that fits)
// with the bound: -1, 0 or 1, ok=false when the fast path cannot tell.
// Rounding to the nearest float64 is monotonic, so two literals that round
// to different floats compare as their floats do; equal floats are exact
// only for integers.
func compare(s string, i int64, isInt bool, b bound) (int, bool) {
	if b.undecided {
		return 0, false
	}
	if isInt && b.isInt {
		switch {
		case i < b.i:
			return -1, true
		case i > b.i:
			return 1, true
		}
		return 0, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	switch {
	case f < b.f:
		return -1, true
	case f > b.f:
		return 1, true
	}
	return 0, false
}

// intLiteral parses an integer literal of at most 18 digits (no fraction,
// no exponent).
func intLiteral(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	for k := 0; k < len(s); k++ {
		if c := s[k]; (c < '0' || c > '9') && !(k == 0 && c == '-') {
			return 0, false
		}
	}
	i, err := strconv.ParseInt(s, 10, 64)
	return i, err == nil
}

func kindOf(c byte) int {
	switch c {
	case '{':
		return tObject
	case '[':
		return tArray
	case '"':
		return tString
	case 't', 'f':
		return tBool
	case 'n':
		return tNull
	}
	return tNumber
}

// plainString returns the text of the string literal v when it holds no
// escape and is valid UTF-8: then its bytes are the decoded string.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return alias(in), true
}

// alias returns b as a string without copying.
func alias(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the span [start, end) of the string literal at i
// (quotes included) and whether it holds an escape.
func scanString(v []byte, i int) (start, end int, esc, ok bool) {
	if i >= len(v) || v[i] != '"' {
		return 0, 0, false, false
	}
	for k := i + 1; k < len(v); k++ {
		switch v[k] {
		case '\\':
			esc = true
			k++
		case '"':
			return i, k + 1, esc, true
		}
	}
	return 0, 0, false, false
}

// skipValue returns the end of the JSON value starting at i. The text is
// valid JSON (the relay and Write check it first); anything surprising is
// ok=false, never a panic.
func skipValue(v []byte, i int) (int, bool) {
	if i >= len(v) {
		return 0, false
	}
	switch v[i] {
	case '"':
		_, e, _, ok := scanString(v, i)
		return e, ok
	case '{', '[':
		depth := 0
		for k := i; k < len(v); k++ {
			switch v[k] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return k + 1, true
				}
			case '"':
				_, e, _, ok := scanString(v, k)
				if !ok {
					return 0, false
				}
				k = e - 1
			}
		}
		return 0, false
	}
	k := i
	for k < len(v) {
		switch v[k] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return k, k > i
		}
		k++
	}
	return k, k > i
}
