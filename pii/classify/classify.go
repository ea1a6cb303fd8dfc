// Package classify reads, from an event's JSON Schema, which parts of its
// instances are personal data and where the data subject's id is.
//
// A property is personal when its schema says `"x-deltabus-pii": true` or,
// as Confluent Schema Registry's data contracts write it, `"confluent:tags":
// ["PII"]`. The schema's root names the data subject with
// `"x-deltabus-subject": "/json/pointer"`, an RFC 6901 pointer into the
// instance (the customer's id, say). Parse follows properties, nested
// objects, arrays (items, prefixItems, additionalItems), maps
// (additionalProperties, patternProperties), combinations (allOf, anyOf,
// oneOf, if/then/else, dependentSchemas, draft-07's dependencies) and local
// references ($ref into $defs or definitions, or any pointer into the
// document; 2019-09's $recursiveRef). Every draft's places are read in
// every schema: a mark is never missed for the draft it was written in.
//
// # Guarantees
//
//   - A mark Parse cannot see past is an error, never a silent miss: a
//     $ref outside the document, a recursive $ref under which personal
//     data is marked, a mark whose value is not a boolean true.
//   - A schema that marks personal data but names no subject is an error:
//     without a subject there is no key to encrypt under (reject it at
//     registration).
//   - A marked property's whole value is personal (an object or array
//     marked personal is one leaf): Personal never holds a path under
//     another.
//   - Combinations are read as the union of their branches: a property
//     personal in one branch of an anyOf is personal.
package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Marks in a schema.
const (
	PIIKeyword       = "x-deltabus-pii"
	SubjectKeyword   = "x-deltabus-subject"
	ConfluentTags    = "confluent:tags"
	ConfluentPIITag  = "PII"
	maxSchemaDepth   = 64
	maxPersonalPaths = 1024
)

// SegKind says what a path segment matches.
type SegKind uint8

const (
	Name     SegKind = iota // the object property (or, for a subject, array index) Seg.Name
	AnyIndex                // every element of an array
	AnyName                 // every property of an object
)

// Seg is one step of a Path.
type Seg struct {
	Kind SegKind
	Name string
}

// Path is a pattern of locations in an instance.
type Path []Seg

// String renders p as a JSON pointer (RFC 6901 escapes) with "*" for
// AnyIndex and AnyName; "" is the whole document.
func (p Path) String() string {
	var sb strings.Builder
	for _, s := range p {
		sb.WriteByte('/')
		if s.Kind != Name {
			sb.WriteByte('*')
			continue
		}
		sb.WriteString(EscapeToken(s.Name))
	}
	return sb.String()
}

// EscapeToken escapes a JSON pointer reference token.
func EscapeToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// Classification is what a schema says about personal data.
type Classification struct {
	// Personal are the personal leaves, sorted by String, none under another.
	Personal []Path
	// Subject is the pointer to the data subject's id, as tokens; its text
	// form is SubjectPointer.
	Subject        []string
	SubjectPointer string
}

// HasPersonal reports whether c marks any personal data.
func (c *Classification) HasPersonal() bool { return c != nil && len(c.Personal) > 0 }

// Covers reports whether c marks q personal: q, or a path above it, or a
// pattern matching it, is one of c's personal leaves.
func (c *Classification) Covers(q Path) bool {
	if c == nil {
		return false
	}
	for _, p := range c.Personal {
		if covers(p, q) {
			return true
		}
	}
	return false
}

// ParsePointer splits an RFC 6901 pointer into unescaped tokens.
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q must start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
			return nil, fmt.Errorf("JSON pointer %q: bad escape in %q (use ~0 for ~ and ~1 for /)", p, t)
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// Parse reads the classification of one JSON Schema document. It returns
// (nil, nil) when the schema neither marks personal data nor names a
// subject.
func Parse(schema []byte) (*Classification, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber() // a bound such as 1e400 is valid JSON Schema, not a float64
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	w := &walker{root: root}
	// A document without a mark anywhere and without a subject marks
	// nothing, whatever its references (they are followed only to find
	// marks): a contract that has nothing to do with personal data is
	// never refused for it.
	obj, _ := root.(map[string]any)
	if _, named := obj[SubjectKeyword]; named || hasMark(root, 0) {
		if err := w.walk(root, nil, 0); err != nil {
			return nil, err
		}
	}
	c := &Classification{Personal: prune(w.found)}
	if obj != nil {
		if raw, ok := obj[SubjectKeyword]; ok {
			s, ok := raw.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("%q must be a non-empty JSON pointer string such as \"/customer_id\", not %s", SubjectKeyword, short(raw))
			}
			toks, err := ParsePointer(s)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", SubjectKeyword, err)
			}
			c.Subject, c.SubjectPointer = toks, s
		}
	}
	if len(c.Personal) > 0 && c.SubjectPointer == "" {
		return nil, fmt.Errorf("schema marks personal data at %s but names no data subject: add \"%s\": \"/pointer/to/the/subject/id\" at its root",
			c.Personal[0], SubjectKeyword)
	}
	if len(c.Personal) == 0 && c.SubjectPointer == "" {
		return nil, nil
	}
	return c, nil
}

type walker struct {
	root  any
	found []Path
	refs  []string // $refs being expanded, innermost last
}

func (w *walker) walk(node any, path Path, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("schema nests deeper than %d levels at %s", maxSchemaDepth, path)
	}
	obj, ok := node.(map[string]any)
	if !ok {
		return nil // true, false, or not a schema: marks nothing
	}
	personal, err := marked(obj)
	if err != nil {
		return fmt.Errorf("at %s: %w", path, err)
	}
	if personal {
		if len(path) == 0 {
			return errors.New("the whole document is marked personal: mark its properties, and keep the subject's id outside them or accept it encrypted too")
		}
		if len(w.found) >= maxPersonalPaths {
			return fmt.Errorf("schema marks more than %d personal paths", maxPersonalPaths)
		}
		w.found = append(w.found, slices.Clone(path))
		return nil
	}
	for _, kw := range [...]string{"allOf", "anyOf", "oneOf"} {
		if arr, ok := obj[kw].([]any); ok {
			for _, sub := range arr {
				if err := w.walk(sub, path, depth+1); err != nil {
					return err
				}
			}
		}
	}
	for _, kw := range [...]string{"if", "then", "else"} {
		if err := w.walk(obj[kw], path, depth+1); err != nil {
			return err
		}
	}
	// dependencies (draft-07 and earlier; the validator reads it in every
	// draft) holds schemas beside names; a list of names marks nothing.
	for _, kw := range [...]string{"dependentSchemas", "dependencies"} {
		deps, _ := obj[kw].(map[string]any)
		for _, k := range sortedKeys(deps) {
			if err := w.walk(deps[k], path, depth+1); err != nil {
				return err
			}
		}
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		for _, k := range sortedKeys(props) {
			if err := w.walk(props[k], append(path, Seg{Kind: Name, Name: k}), depth+1); err != nil {
				return err
			}
		}
	}
	if pats, ok := obj["patternProperties"].(map[string]any); ok {
		for _, k := range sortedKeys(pats) {
			if err := w.walk(pats[k], append(path, Seg{Kind: AnyName}), depth+1); err != nil {
				return err
			}
		}
	}
	if err := w.walk(obj["additionalProperties"], append(path, Seg{Kind: AnyName}), depth+1); err != nil {
		return err
	}
	for _, kw := range [...]string{"items", "prefixItems", "additionalItems", "contains"} {
		subs := []any{obj[kw]}
		if arr, ok := obj[kw].([]any); ok { // draft-07 tuple items, 2020-12 prefixItems
			subs = arr
		}
		for _, sub := range subs {
			if err := w.walk(sub, append(path, Seg{Kind: AnyIndex}), depth+1); err != nil {
				return err
			}
		}
	}
	if ref, ok := obj["$recursiveRef"].(string); ok { // 2019-09: "#", the recursion's root
		if err := w.ref(ref, path, depth); err != nil {
			return err
		}
	}
	if ref, ok := obj["$ref"].(string); ok {
		return w.ref(ref, path, depth)
	}
	return nil
}

func (w *walker) ref(ref string, path Path, depth int) error {
	if !strings.HasPrefix(ref, "#") {
		return fmt.Errorf("at %s: $ref %q points outside the document; personal data behind it could not be seen: inline it or use $defs", path, ref)
	}
	target, err := w.resolve(ref)
	if err != nil {
		return fmt.Errorf("at %s: %w", path, err)
	}
	if slices.Contains(w.refs, ref) {
		if hasMark(target, 0) {
			return fmt.Errorf("at %s: recursive $ref %q holds personal data, which has no fixed set of paths: mark the property that holds the recursive part as personal instead", path, ref)
		}
		return nil
	}
	w.refs = append(w.refs, ref)
	defer func() { w.refs = w.refs[:len(w.refs)-1] }()
	return w.walk(target, path, depth+1)
}

// resolve follows a local reference: "#" or "#/json/pointer".
func (w *walker) resolve(ref string) (any, error) {
	toks, err := ParsePointer(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return nil, fmt.Errorf("$ref %q: %w", ref, err)
	}
	node := w.root
	for _, t := range toks {
		switch n := node.(type) {
		case map[string]any:
			node = n[t]
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(n) {
				return nil, fmt.Errorf("$ref %q finds nothing", ref)
			}
			node = n[i]
		default:
			node = nil
		}
		if node == nil {
			return nil, fmt.Errorf("$ref %q finds nothing in the document", ref)
		}
	}
	return node, nil
}

// marked reads a schema object's own personal-data marks.
func marked(obj map[string]any) (bool, error) {
	pii := false
	if raw, ok := obj[PIIKeyword]; ok {
		b, isBool := raw.(bool)
		if !isBool {
			return false, fmt.Errorf("%q must be true or false, not %s", PIIKeyword, short(raw))
		}
		pii = b
	}
	if raw, ok := obj[ConfluentTags]; ok {
		tags, isArr := raw.([]any)
		if !isArr {
			return false, fmt.Errorf("%q must be an array of strings, not %s", ConfluentTags, short(raw))
		}
		for _, t := range tags {
			if s, _ := t.(string); s == ConfluentPIITag {
				pii = true
			}
		}
	}
	return pii, nil
}

// hasMark reports whether any schema object under node marks personal data.
func hasMark(node any, depth int) bool {
	if depth > maxSchemaDepth {
		return true // cannot tell: treat as marked
	}
	switch n := node.(type) {
	case map[string]any:
		if p, err := marked(n); p || err != nil {
			return true
		}
		for _, v := range n {
			if hasMark(v, depth+1) {
				return true
			}
		}
	case []any:
		for _, v := range n {
			if hasMark(v, depth+1) {
				return true
			}
		}
	}
	return false
}

// prune sorts and deduplicates paths and drops every path under another.
func prune(paths []Path) []Path {
	slices.SortFunc(paths, func(a, b Path) int { return strings.Compare(a.String(), b.String()) })
	var out []Path
	for _, p := range paths {
		if slices.ContainsFunc(out, func(q Path) bool { return covers(q, p) }) {
			continue
		}
		out = slices.DeleteFunc(out, func(q Path) bool { return covers(p, q) })
		out = append(out, p)
	}
	return out
}

// covers reports whether every location q matches is at or under one p
// matches: p is a prefix of q, segment by segment (AnyName covers a Name).
func covers(p, q Path) bool {
	if len(p) > len(q) {
		return false
	}
	for i, s := range p {
		t := q[i]
		if s != t && !(s.Kind == AnyName && t.Kind == Name) {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		b = append(b[:40], "..."...)
	}
	return string(b)
}
