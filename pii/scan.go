package pii

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/deltabus/deltabus/pii/classify"
)

// matcher is a classification compiled into a trie over instance paths.
type matcher struct {
	names    map[string]*matcher
	anyIndex *matcher
	anyName  *matcher
	personal bool // the value here is a personal leaf
	subject  bool // the value here is the subject's id
	below    bool // a subject is at or under this node (keep descending)
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
	}
	return c
}

// span is one personal leaf found in a payload.
type span struct {
	start, end int
	pointer    string // RFC 6901, concrete
}

// found is what a scan finds.
type found struct {
	spans    []span
	subject  []byte // the subject id's text (a string's value, a number's literal); nil when absent
	subjects int    // how many values the subject pointer matched
	badKind  string // the subject is neither a string nor a number: its JSON kind
}

// scanner walks a JSON text along a matcher.
type scanner struct {
	b    []byte
	toks []string // pointer tokens of the current value
	f    found
}

var errSyntax = errors.New("payload is not valid JSON")

// scan walks b (a JSON value) and reports the personal leaves and the
// subject. A personal leaf that is null is left alone (it holds nothing).
func scan(b []byte, m *matcher) (found, error) {
	s := scanner{b: b}
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

func (s *scanner) ws(i int) int {
	for i < len(s.b) && (s.b[i] == ' ' || s.b[i] == '\t' || s.b[i] == '\n' || s.b[i] == '\r') {
		i++
	}
	return i
}

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
		i = s.ws(i)
		if i >= len(s.b) {
			return 0, errSyntax
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case '}':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// member returns the child of m for the member named by the string
// literal lit, and the name (decoded only when there is a child).
func (m *matcher) member(lit []byte) (*matcher, string, error) {
	inner := lit[1 : len(lit)-1]
	if !slices.Contains(inner, '\\') {
		if c := m.names[string(inner)]; c != nil {
			return c, string(inner), nil
		}
		if m.anyName != nil {
			return m.anyName, string(inner), nil
		}
		return nil, "", nil
	}
	key, err := unquote(lit)
	if err != nil {
		return nil, "", err
	}
	if c := m.names[key]; c != nil {
		return c, key, nil
	}
	return m.anyName, key, nil
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
			s.toks = append(s.toks, strconv.Itoa(k))
		}
		var err error
		if i, err = s.value(i, child); err != nil {
			return 0, err
		}
		if child != nil {
			s.toks = s.toks[:len(s.toks)-1]
		}
		i = s.ws(i)
		if i >= len(s.b) {
			return 0, errSyntax
		}
		switch s.b[i] {
		case ',':
			i = s.ws(i + 1)
		case ']':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

func (s *scanner) pointer() string {
	var sb strings.Builder
	for _, t := range s.toks {
		sb.WriteByte('/')
		sb.WriteString(classify.EscapeToken(t))
	}
	return sb.String()
}

// skip returns the end of the JSON value at i.
func skip(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return 0, errSyntax
	case c == '{' || c == '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skip(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errSyntax
	default:
		j := i
		for j < len(b) && !strings.ContainsRune(" \t\r\n,]}:", rune(b[j])) {
			j++
		}
		if j == i {
			return 0, errSyntax
		}
		return j, nil
	}
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
