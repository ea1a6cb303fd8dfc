package contract

import (
	"bytes"
	"unicode/utf8"
)

// The fast path's evaluation: one pass over the payload's JSON text.
// eval judges the value that starts at v[i] and returns where it ends;
// the end is meaningful only for a valid result (the caller skips the
// value itself otherwise).

func (n *node) eval(v []byte, i, depth int) (int, result) {
	if n == nil {
		return skip(v, i)
	}
	if n.always != nil {
		e, r := skip(v, i)
		if r == valid && !*n.always {
			r = invalid
		}
		return e, r
	}
	if n.unsupported || depth > maxDepth || i >= len(v) {
		return i, unsure
	}
	t := kindOf(v[i])
	end := -1
	var text []byte // a scalar's literal; a string's contents
	var plain, ascii bool
	switch t {
	case tString:
		e, esc, wide, ok := scanString(v, i)
		if !ok {
			return i, unsure
		}
		end, text = e, v[i+1:e-1]
		plain, ascii = !esc && (!wide || utf8.Valid(text)), !esc && !wide
	case tNumber, tBool, tNull:
		end = scanLiteral(v, i)
		if end == i {
			return i, unsure
		}
		text = v[i:end]
	}
	if r := n.checkType(t, text); r != valid {
		return i, r
	}
	if len(n.consts) > 0 {
		if r := n.checkConsts(t, text, plain); r != valid {
			return i, r
		}
	}
	if n.format != nil && t == tString {
		if !plain {
			return i, unsure
		}
		if n.format.Validate(alias(text)) != nil {
			return i, invalid
		}
	}
	if n.ref != nil {
		e, r := n.ref.eval(v, i, depth+1)
		if r != valid || n.refOnly {
			return e, r
		}
		end = e
	}
	var r result
	switch t {
	case tObject:
		if n.needKeys || n.maxProps >= 0 || n.minProps {
			end, r = n.evalObject(v, i, depth)
		}
	case tArray:
		if n.items != nil || n.hasTuple || n.tuple != nil || n.addItems != nil || n.minItems >= 0 || n.maxItems >= 0 || n.uniqItems {
			end, r = n.evalArray(v, i, depth)
		}
	case tString:
		r = n.evalString(text, plain, ascii)
	case tNumber:
		r = n.evalNumber(text)
	}
	if r != valid {
		return i, r
	}
	e, r := n.evalApplicators(v, i, depth)
	if r != valid {
		return i, r
	}
	if end < 0 {
		if end = e; end < 0 {
			return skip(v, i)
		}
	}
	return end, valid
}

// skip skips the value at v[i]: valid, or unsure when it cannot.
func skip(v []byte, i int) (int, result) {
	e, ok := skipValue(v, i)
	if !ok {
		return i, unsure
	}
	return e, valid
}

func (n *node) checkType(t int, lit []byte) result {
	if n.types == 0 || n.types&t != 0 {
		return valid
	}
	if t == tNumber && n.types&tInteger != 0 {
		return integerLiteral(lit)
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

// checkConsts compares a scalar (text: a literal, or a string's contents,
// plain when they are the decoded string) with the enum or const.
func (n *node) checkConsts(t int, text []byte, plain bool) result {
	var num int64
	var isInt bool
	if t == tNumber {
		num, isInt = intLiteral(text)
	}
	undecided := false
	for _, c := range n.consts {
		switch {
		case c.kind == tNull && t == tNull, c.kind == tBool && t == tBool && c.b == (text[0] == 't'):
			return valid
		case c.kind == tString && t == tString:
			if !plain {
				undecided = true
			} else if c.s == alias(text) {
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

// evalApplicators judges the value at v[i] against allOf, anyOf, oneOf,
// not and if/then/else; the end is -1 when none of them read the value.
func (n *node) evalApplicators(v []byte, i, depth int) (int, result) {
	end := -1
	note := func(e int) {
		if end < 0 {
			end = e
		}
	}
	for _, c := range n.allOf {
		e, r := c.eval(v, i, depth+1)
		if r != valid {
			return i, r
		}
		note(e)
	}
	if n.anyOf != nil {
		r := invalid
		for _, c := range n.anyOf {
			e, cr := c.eval(v, i, depth+1)
			if cr == valid {
				note(e)
				r = valid
				break
			}
			if cr == unsure {
				r = unsure
			}
		}
		if r != valid {
			return i, r
		}
	}
	if n.oneOf != nil {
		matched, undecided := 0, false
		for _, c := range n.oneOf {
			switch e, r := c.eval(v, i, depth+1); r {
			case valid:
				matched++
				note(e)
			case unsure:
				undecided = true
			}
		}
		switch {
		case matched > 1:
			return i, invalid
		case undecided:
			return i, unsure
		case matched == 0:
			return i, invalid
		}
	}
	if n.not != nil {
		switch _, r := n.not.eval(v, i, depth+1); r {
		case valid:
			return i, invalid
		case unsure:
			return i, unsure
		}
	}
	if n.ifn != nil {
		_, r := n.ifn.eval(v, i, depth+1)
		var branch *node
		switch r {
		case valid:
			branch = n.then
		case invalid:
			branch = n.elsen
		default:
			return i, unsure
		}
		e, r := branch.eval(v, i, depth+1)
		if r != valid {
			return i, r
		}
		note(e)
	}
	return end, valid
}

// evalObject judges the object at v[i] (its members, required, counts).
func (n *node) evalObject(v []byte, i, depth int) (int, result) {
	if n.minProps {
		return i, unsure
	}
	var seen uint64
	count := 0
	k := skipSpace(v, i+1)
	if k < len(v) && v[k] == '}' {
		return k + 1, n.endObject(seen, count)
	}
	for k < len(v) {
		ke, esc, wide, ok := scanString(v, k)
		if !ok {
			return i, unsure
		}
		key := v[k:ke] // quotes included
		c := skipSpace(v, ke)
		if c >= len(v) || v[c] != ':' {
			return i, unsure
		}
		vs := skipSpace(v, c+1)
		var ve int
		if n.needKeys {
			if esc || wide && !utf8.Valid(key) {
				return i, unsure // the decoded name is not these bytes
			}
			var r result
			if ve, r = n.evalMember(key[1:len(key)-1], v, vs, &seen, depth); r != valid {
				if r == invalid {
					if e, ok := skipValue(v, vs); !ok || keyAgain(v, e, key) {
						return i, unsure // the library's document keeps the last duplicate only
					}
				}
				return i, r
			}
		} else if ve, ok = skipValue(v, vs); !ok {
			return i, unsure
		}
		count++
		k = skipSpace(v, ve)
		if k >= len(v) {
			return i, unsure
		}
		if v[k] == '}' {
			return k + 1, n.endObject(seen, count)
		}
		if v[k] != ',' {
			return i, unsure
		}
		k = skipSpace(v, k+1)
	}
	return i, unsure
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
		ks := skipSpace(v, i+1)
		ke, esc, _, ok := scanString(v, ks)
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

// lookup finds a member by name.
func (n *node) lookup(key []byte) (member, bool) {
	if n.few != nil || n.members == nil {
		for k := range n.few {
			if m := &n.few[k]; len(m.name) == len(key) && m.name == alias(key) {
				return m.member, true
			}
		}
		return member{}, false
	}
	m, ok := n.members[alias(key)]
	return m, ok
}

// evalMember judges the value at v[vs] of the member named key.
func (n *node) evalMember(key, v []byte, vs int, seen *uint64, depth int) (int, result) {
	end := -1
	if m, ok := n.lookup(key); ok {
		if m.req >= 0 {
			*seen |= 1 << m.req
		}
		if m.inProps {
			e, r := m.node.eval(v, vs, depth+1)
			if r != valid {
				return vs, r
			}
			end = e
		}
	}
	for _, p := range n.patterns {
		if p.re.MatchString(alias(key)) {
			e, r := p.node.eval(v, vs, depth+1)
			if r != valid {
				return vs, r
			}
			end = e
		}
	}
	switch {
	case end >= 0:
		return end, valid
	case n.addlFalse:
		return vs, invalid
	}
	return n.addl.eval(v, vs, depth+1)
}

// evalArray judges the array at v[i].
func (n *node) evalArray(v []byte, i, depth int) (int, result) {
	count := 0
	k := skipSpace(v, i+1)
	if k < len(v) && v[k] == ']' {
		return k + 1, n.endArray(count)
	}
	for k < len(v) {
		e, r := n.item(count).eval(v, k, depth+1)
		if n.addNone && n.hasTuple && count >= len(n.tuple) {
			return i, invalid
		}
		if r != valid {
			return i, r
		}
		count++
		k = skipSpace(v, e)
		if k >= len(v) {
			return i, unsure
		}
		if v[k] == ']' {
			return k + 1, n.endArray(count)
		}
		if v[k] != ',' {
			return i, unsure
		}
		k = skipSpace(v, k+1)
	}
	return i, unsure
}

// item is the schema of item k (nil: any).
func (n *node) item(k int) *node {
	switch {
	case n.items != nil:
		return n.items
	case k < len(n.tuple):
		return n.tuple[k]
	}
	return n.addItems
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

// evalString judges a string's contents (plain: they are the decoded
// string; ascii: and every byte is one character).
func (n *node) evalString(text []byte, plain, ascii bool) result {
	if n.minLen < 0 && n.maxLen < 0 && n.pattern == nil {
		return valid
	}
	if !plain {
		return unsure
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := len(text)
		if !ascii {
			l = utf8.RuneCount(text)
		}
		if n.minLen >= 0 && l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return invalid
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(alias(text)) {
		return invalid
	}
	return valid
}

func (n *node) evalNumber(lit []byte) result {
	if n.bounds == nil && n.multiple == 0 && !n.multUns {
		return valid
	}
	i, isInt := intLiteral(lit)
	for _, b := range n.bounds {
		c, ok := compare(lit, i, isInt, b)
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
