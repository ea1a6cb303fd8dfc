package pii

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/deltabus/deltabus/pii/classify"
)

// A classification is compiled into a trie over instance paths: the
// personal paths (whose names match object members, AnyName any member,
// AnyIndex any element, as classify.Classification.Covers reads them) and
// the subject pointer (whose tokens match a member, or an array index
// when they are one, as RFC 6901 reads them). The scanner walks a payload
// with the set of every trie node that matches where it is, not one node:
// a member reached by name is also reached by the wildcards of the same
// object (patternProperties, additionalProperties), and a field any of
// them marks is personal. So a value is a personal leaf exactly when
// Covers says so (FuzzScanAgreesWithCovers), whatever the mix of names and
// wildcards. Sets stay small (the trie's nodes at one depth) and hold one
// node wherever the schema has no wildcard.

// matcher is one node of the trie.
type matcher struct {
	names    map[string]*matcher
	list     []named          // names' entries, in a slice: a few names are compared, not hashed
	indexes  map[int]*matcher // array elements by index: the subject pointer's only
	anyIndex *matcher
	anyName  *matcher
	personal bool // the value here is a personal leaf
	chain    bool // the subject pointer goes through (or ends at) this node
	subject  bool // the value here is the subject's id
}

type named struct {
	name string
	m    *matcher
}

// pattern is a compiled classification.
type pattern struct {
	all    []*matcher // personal leaves and the subject (Protector)
	leaves []*matcher // personal leaves alone (Revealer)
}

func compile(c *classify.Classification) *pattern {
	return &pattern{all: []*matcher{trie(c, true)}, leaves: []*matcher{trie(c, false)}}
}

func trie(c *classify.Classification, withSubject bool) *matcher {
	root := &matcher{}
	for _, p := range c.Personal {
		m := root
		for _, s := range p {
			m = m.child(s)
		}
		m.personal = true
	}
	if !withSubject || len(c.Subject) == 0 {
		return root
	}
	// The subject's tokens, read as member names, walk the personal
	// paths' nodes. A token that is an array index may match an element
	// instead; a personal path's name never does, so from there the
	// pointer also goes on in nodes of its own (own), whose tokens match
	// a member or an element alike.
	m := root
	m.chain = true
	var own *matcher
	for _, tok := range c.Subject {
		k, isIndex := arrayIndex(tok)
		var next *matcher
		if own != nil || isIndex {
			next = &matcher{chain: true}
		}
		if own != nil {
			own.setName(tok, next)
			if isIndex {
				own.setIndex(k, next)
			}
		}
		if isIndex {
			m.setIndex(k, next)
		}
		m = m.child(classify.Seg{Kind: classify.Name, Name: tok})
		m.chain = true
		own = next
	}
	m.subject = true
	if own != nil {
		own.subject = true
	}
	return root
}

// arrayIndex reads an RFC 6901 array index: 0, or digits without a
// leading zero.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	k, err := strconv.Atoi(tok)
	return k, err == nil
}

func (m *matcher) child(s classify.Seg) *matcher {
	switch s.Kind {
	case classify.AnyIndex:
		if m.anyIndex == nil {
			m.anyIndex = &matcher{}
		}
		return m.anyIndex
	case classify.AnyName:
		if m.anyName == nil {
			m.anyName = &matcher{}
		}
		return m.anyName
	}
	c := m.names[s.Name]
	if c == nil {
		c = &matcher{}
		m.setName(s.Name, c)
	}
	return c
}

func (m *matcher) setName(name string, c *matcher) {
	if m.names == nil {
		m.names = map[string]*matcher{}
	}
	m.names[name] = c
	m.list = append(m.list, named{name, c})
}

func (m *matcher) setIndex(k int, c *matcher) {
	if m.indexes == nil {
		m.indexes = map[int]*matcher{}
	}
	m.indexes[k] = c
}

// inner reports whether m matches anything under its value.
func (m *matcher) inner() bool {
	return m.names != nil || m.indexes != nil || m.anyIndex != nil || m.anyName != nil
}

// span is one personal leaf found in a payload.
type span struct {
	start, end int
	pointer    string // RFC 6901, concrete; aliases the scanner's ptr buffer
}

// found is what a scan finds.
type found struct {
	spans    []span
	subject  []byte // the subject id's text (a string's value, a number's literal); nil when absent
	subjects int    // how many values the subject pointer matched
	badKind  string // the subject is neither a string nor a number: its JSON kind
}

// scanner walks a JSON text along a pattern. Its slices are reused from
// scan to scan (Scratch).
type scanner struct {
	b    []byte
	toks [][]byte   // pointer tokens of the current value (aliasing b unless unescaped)
	ptr  []byte     // the spans' pointers, one after the other
	sets []*matcher // the matcher sets of the values being scanned, one after the other
	// inLeaf counts the personal leaves the scan is inside (following
	// the subject pointer through them).
	inLeaf int
	f      found
}

var errSyntax = errors.New("payload is not valid JSON")

// scan walks b (a JSON value) from the trie roots ms and reports the
// personal leaves and the subject. A personal leaf that is null is left
// alone (it holds nothing). The result aliases b and s's buffers: valid
// until s scans again.
func (s *scanner) scan(b []byte, ms []*matcher) (found, error) {
	s.b, s.toks, s.ptr, s.sets, s.inLeaf = b, s.toks[:0], s.ptr[:0], s.sets[:0], 0
	s.f = found{spans: s.f.spans[:0]}
	i := s.ws(0)
	end, err := s.value(i, ms)
	if err != nil {
		return found{}, err
	}
	if s.ws(end) != len(b) {
		return found{}, errSyntax
	}
	return s.f, nil
}

// scan is a one-off scan.
func scan(b []byte, ms []*matcher) (found, error) {
	var s scanner
	return s.scan(b, ms)
}

func (s *scanner) ws(i int) int { return ws(s.b, i) }

// value scans the value at i under the matchers ms (none: just skip it)
// and returns its end. A value some matcher marks personal is one leaf:
// below it only the subject pointer is followed (a subject inside a
// personal object is still read), so leaves never nest.
func (s *scanner) value(i int, ms []*matcher) (int, error) {
	if i >= len(s.b) {
		return 0, errSyntax
	}
	personal, subject, inner, chainInner := false, false, false, false
	for _, m := range ms {
		personal = personal || m.personal
		subject = subject || m.subject
		if m.inner() {
			inner = true
			chainInner = chainInner || m.chain
		}
	}
	leaf := personal && s.inLeaf == 0
	if leaf || s.inLeaf > 0 {
		inner = chainInner
	}
	start := i
	var end int
	var err error
	switch {
	case inner && (s.b[i] == '{' || s.b[i] == '['):
		if leaf {
			s.inLeaf++
		}
		if s.b[i] == '{' {
			end, err = s.object(i, ms)
		} else {
			end, err = s.array(i, ms)
		}
		if leaf {
			s.inLeaf--
		}
	default:
		end, err = skip(s.b, i)
	}
	if err != nil {
		return 0, err
	}
	if leaf && !isNull(s.b[start:end]) {
		s.f.spans = append(s.f.spans, span{start: start, end: end, pointer: s.pointer()})
	}
	if subject {
		s.subject(s.b[start:end])
	}
	return end, nil
}

// add appends c to the set being built in s.sets: inside a personal leaf,
// only a node of the subject pointer.
func (s *scanner) add(c *matcher) {
	if c != nil && (s.inLeaf == 0 || c.chain) {
		s.sets = append(s.sets, c)
	}
}

func (s *scanner) subject(v []byte) {
	s.f.subjects++
	switch {
	case v[0] == '"':
		if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 {
			s.f.subject = inner
			return
		}
		str, err := unquote(v)
		if err != nil {
			s.f.badKind = "string"
			return
		}
		s.f.subject = []byte(str)
	case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
		s.f.subject = v
	default:
		s.f.badKind = kindOf(v[0])
	}
}

func (s *scanner) object(i int, ms []*matcher) (int, error) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, nil
	}
	base := len(s.sets)
	for {
		if i >= len(s.b) || s.b[i] != '"' {
			return 0, errSyntax
		}
		kend, err := skip(s.b, i)
		if err != nil {
			return 0, err
		}
		lit := s.b[i:kend]
		i = s.ws(kend)
		if i >= len(s.b) || s.b[i] != ':' {
			return 0, errSyntax
		}
		i = s.ws(i + 1)
		s.sets = s.sets[:base]
		key, err := s.members(ms, lit)
		if err != nil {
			return 0, err
		}
		child := s.sets[base:]
		if len(child) > 0 {
			s.toks = append(s.toks, key)
		}
		if i, err = s.value(i, child); err != nil {
			return 0, err
		}
		if len(child) > 0 {
			s.toks = s.toks[:len(s.toks)-1]
		}
		var done bool
		if i, done, err = s.next(i, '}'); done || err != nil {
			s.sets = s.sets[:base]
			return i, err
		}
	}
}

// members appends to s.sets the matchers of the member named by the
// string literal lit under each of ms: its named child and the wildcard
// child of every matcher. It returns the name (aliasing lit unless it has
// escapes).
func (s *scanner) members(ms []*matcher, lit []byte) ([]byte, error) {
	key := lit[1 : len(lit)-1]
	escaped := bytes.IndexByte(key, '\\') >= 0
	if escaped {
		k, err := unquote(lit)
		if err != nil {
			return nil, err
		}
		key = []byte(k)
	}
	for _, m := range ms {
		s.add(m.named(key, escaped))
		s.add(m.anyName)
	}
	return key, nil
}

// named returns m's child named name, or nil.
func (m *matcher) named(name []byte, hash bool) *matcher {
	if !hash && len(m.list) <= 8 { // a few names: comparing beats hashing (and ranging over a map)
		for _, n := range m.list {
			if len(n.name) == len(name) && n.name == string(name) {
				return n.m
			}
		}
		return nil
	}
	return m.names[string(name)]
}

func (s *scanner) array(i int, ms []*matcher) (int, error) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1, nil
	}
	base := len(s.sets)
	for k := 0; ; k++ {
		s.sets = s.sets[:base]
		for _, m := range ms {
			s.add(m.anyIndex)
			if m.indexes != nil { // the subject pointer's
				s.add(m.indexes[k])
			}
		}
		child := s.sets[base:]
		if len(child) > 0 {
			s.toks = append(s.toks, strconv.AppendInt(nil, int64(k), 10))
		}
		var err error
		if i, err = s.value(i, child); err != nil {
			return 0, err
		}
		if len(child) > 0 {
			s.toks = s.toks[:len(s.toks)-1]
		}
		var done bool
		if i, done, err = s.next(i, ']'); done || err != nil {
			s.sets = s.sets[:base]
			return i, err
		}
	}
}

// next reads what follows a member or an element: a comma (next is the
// following one's start) or the closing bracket (done, next just past it);
// anything else is a syntax error.
func (s *scanner) next(i int, closing byte) (next int, done bool, err error) {
	if i = s.ws(i); i >= len(s.b) {
		return 0, false, errSyntax
	}
	switch s.b[i] {
	case ',':
		return s.ws(i + 1), false, nil
	case closing:
		return i + 1, true, nil
	}
	return 0, false, errSyntax
}

// pointer appends the current value's pointer to s.ptr and returns it
// (aliasing s.ptr: a grown s.ptr leaves earlier pointers in the old array,
// still valid).
func (s *scanner) pointer() string {
	start := len(s.ptr)
	for _, t := range s.toks {
		s.ptr = append(s.ptr, '/')
		for _, c := range t {
			switch c {
			case '~':
				s.ptr = append(s.ptr, "~0"...)
			case '/':
				s.ptr = append(s.ptr, "~1"...)
			default:
				s.ptr = append(s.ptr, c)
			}
		}
	}
	p := s.ptr[start:]
	return unsafe.String(unsafe.SliceData(p), len(p))
}

func isNull(v []byte) bool { return string(v) == "null" }

func kindOf(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a value"
}

// unquote returns a JSON string literal's value.
func unquote(lit []byte) (string, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", errSyntax
	}
	inner := lit[1 : len(lit)-1]
	if !strings.ContainsRune(string(inner), '\\') {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", fmt.Errorf("%w: %v", errSyntax, err)
	}
	return s, nil
}

// patterns caches the compiled patterns of classifications (which the
// classifiers keep: one per contract version).
type patterns struct{ m sync.Map } // *classify.Classification -> *pattern

func (ps *patterns) get(c *classify.Classification) *pattern {
	if p, ok := ps.m.Load(c); ok {
		return p.(*pattern)
	}
	p, _ := ps.m.LoadOrStore(c, compile(c))
	return p.(*pattern)
}
