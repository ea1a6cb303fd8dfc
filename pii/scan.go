package pii

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/deltabus/deltabus/pii/classify"
)

// matcher is a classification compiled into a trie over instance paths.
type matcher struct {
	names    map[string]*matcher
	list     []named // names' entries, in a slice: a few names are compared, not hashed
	anyIndex *matcher
	anyName  *matcher
	personal bool // the value here is a personal leaf
	subject  bool // the value here is the subject's id
	below    bool // a subject is at or under this node (keep descending)
}

type named struct {
	name string
	m    *matcher
}

func compile(c *classify.Classification) *matcher {
	root := &matcher{}
	for _, p := range c.Personal {
		m := root
		for _, s := range p {
			m = m.child(s)
		}
		m.personal = true
	}
	m := root
	root.below = len(c.Subject) > 0
	for _, tok := range c.Subject {
		m = m.child(classify.Seg{Kind: classify.Name, Name: tok})
		m.below = true
	}
	if len(c.Subject) > 0 {
		m.subject = true
	}
	return root
}

func (m *matcher) child(s classify.Seg) *matcher {
	next := func(p **matcher) *matcher {
		if *p == nil {
			*p = &matcher{}
		}
		return *p
	}
	switch s.Kind {
	case classify.AnyIndex:
		return next(&m.anyIndex)
	case classify.AnyName:
		return next(&m.anyName)
	}
	if m.names == nil {
		m.names = map[string]*matcher{}
	}
	c := m.names[s.Name]
	if c == nil {
		c = &matcher{}
		m.names[s.Name] = c
		m.list = append(m.list, named{s.Name, c})
	}
	return c
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

// scanner walks a JSON text along a matcher. Its slices are reused from
// scan to scan (Scratch).
type scanner struct {
	b    []byte
	toks [][]byte // pointer tokens of the current value (aliasing b unless unescaped)
	ptr  []byte   // the spans' pointers, one after the other
	f    found
}

var errSyntax = errors.New("payload is not valid JSON")

// scan walks b (a JSON value) and reports the personal leaves and the
// subject. A personal leaf that is null is left alone (it holds nothing).
// The result aliases b and s's buffers: valid until s scans again.
func (s *scanner) scan(b []byte, m *matcher) (found, error) {
	s.b, s.toks, s.ptr = b, s.toks[:0], s.ptr[:0]
	s.f = found{spans: s.f.spans[:0]}
	i := s.ws(0)
	end, err := s.value(i, m)
	if err != nil {
		return found{}, err
	}
	if s.ws(end) != len(b) {
		return found{}, errSyntax
	}
	return s.f, nil
}

// scan is a one-off scan.
func scan(b []byte, m *matcher) (found, error) {
	var s scanner
	return s.scan(b, m)
}

func (s *scanner) ws(i int) int { return ws(s.b, i) }

// value scans the value at i under m (nil: just skip it) and returns its end.
func (s *scanner) value(i int, m *matcher) (int, error) {
	if i >= len(s.b) {
		return 0, errSyntax
	}
	if m == nil || (!m.below && !m.personal && m.names == nil && m.anyIndex == nil && m.anyName == nil) {
		return skip(s.b, i)
	}
	if m.personal && !m.below {
		end, err := skip(s.b, i)
		if err == nil && !isNull(s.b[i:end]) {
			s.f.spans = append(s.f.spans, span{start: i, end: end, pointer: s.pointer()})
		}
		return end, err
	}
	start := i
	var end int
	var err error
	switch s.b[i] {
	case '{':
		end, err = s.object(i, m)
	case '[':
		end, err = s.array(i, m)
	default:
		end, err = skip(s.b, i)
	}
	if err != nil {
		return 0, err
	}
	if m.personal && !isNull(s.b[start:end]) {
		s.f.spans = append(s.f.spans, span{start: start, end: end, pointer: s.pointer()})
	}
	if m.subject {
		s.subject(s.b[start:end])
	}
	return end, nil
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

func (s *scanner) object(i int, m *matcher) (int, error) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == '}' {
		return i + 1, nil
	}
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
		child, key, err := m.member(lit)
		if err != nil {
			return 0, err
		}
		if child != nil {
			s.toks = append(s.toks, key)
		}
		if i, err = s.value(i, child); err != nil {
			return 0, err
		}
		if child != nil {
			s.toks = s.toks[:len(s.toks)-1]
		}
		var done bool
		if i, done, err = s.next(i, '}'); done || err != nil {
			return i, err
		}
	}
}

// member returns the child of m for the member named by the string
// literal lit, and the name (aliasing lit unless it has escapes).
func (m *matcher) member(lit []byte) (*matcher, []byte, error) {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if len(m.list) <= 8 { // a few names: comparing beats hashing (and ranging over a map)
			for _, n := range m.list {
				if len(n.name) == len(inner) && n.name == string(inner) {
					return n.m, inner, nil
				}
			}
		} else if c := m.names[string(inner)]; c != nil {
			return c, inner, nil
		}
		return m.anyName, inner, nil
	}
	key, err := unquote(lit)
	if err != nil {
		return nil, nil, err
	}
	if c := m.names[key]; c != nil {
		return c, []byte(key), nil
	}
	return m.anyName, []byte(key), nil
}

func (s *scanner) array(i int, m *matcher) (int, error) {
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == ']' {
		return i + 1, nil
	}
	for k := 0; ; k++ {
		child := m.anyIndex
		if c := m.names[strconv.Itoa(k)]; c != nil && child == nil { // a subject pointer's index
			child = c
		}
		if child != nil {
			s.toks = append(s.toks, strconv.AppendInt(nil, int64(k), 10))
		}
		var err error
		if i, err = s.value(i, child); err != nil {
			return 0, err
		}
		if child != nil {
			s.toks = s.toks[:len(s.toks)-1]
		}
		var done bool
		if i, done, err = s.next(i, ']'); done || err != nil {
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
