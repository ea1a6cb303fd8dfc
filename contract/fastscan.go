package contract

import (
	"strconv"
	"unsafe"
)

// The fast path's scanning of JSON text. It checks the syntax of every
// byte it answers valid for (Validate takes any bytes: a fast "valid" on
// text that is not JSON would accept what the library refuses), and
// anything surprising is ok=false, never a panic.

// compare compares the number literal lit (i when it is an integer that
// fits) with the bound: -1, 0 or 1, ok=false when the fast path cannot
// tell. Rounding to the nearest float64 is monotonic, so two literals that
// round to different floats compare as their floats do; equal floats are
// exact only for integers.
func compare(lit []byte, i int64, isInt bool, b bound) (int, bool) {
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
	if !modest(lit) {
		return 0, false
	}
	f, err := strconv.ParseFloat(alias(lit), 64)
	if err != nil {
		// Out of float64's range: the library decides (and may not
		// represent it either: validateSlow).
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

// modest reports whether the number literal is short, with an exponent of
// at most three digits: the library parses such a number as big.Rat (it
// panics on one it cannot: an exponent beyond a million, after the
// fraction's digits), so the fast path compares only those.
func modest(lit []byte) bool {
	if len(lit) > 64 {
		return false
	}
	for k, c := range lit {
		if c == 'e' || c == 'E' {
			d := lit[k+1:]
			if len(d) > 0 && (d[0] == '+' || d[0] == '-') {
				d = d[1:]
			}
			return len(d) <= 3
		}
	}
	return true
}

// intLiteral parses an integer literal of at most 18 digits (no fraction,
// no exponent).
func intLiteral[S ~string | ~[]byte](s S) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	d := s
	if neg {
		d = s[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for k := 0; k < len(d); k++ {
		c := d[k]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
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

// alias returns b as a string without copying.
func alias(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// Byte classes of the scanner.
const (
	cQuote = 1 << iota
	cEscape
	cWide // not ASCII
	cEnd  // ends a literal
	cCtl  // a control character: never raw in a string
)

var class = func() (t [256]uint8) {
	t['"'], t['\\'] = cQuote, cEscape
	for c := 0; c < 0x20; c++ {
		t[c] = cCtl
	}
	for c := 0x80; c < 0x100; c++ {
		t[c] = cWide
	}
	for _, c := range []byte{',', '}', ']', ':', ' ', '\t', '\n', '\r'} {
		t[c] |= cEnd
	}
	return t
}()

// scanString returns the end of the string literal at v[i] (after its
// closing quote), whether it holds an escape, and whether a byte is not
// ASCII; ok=false when it is not a JSON string.
func scanString(v []byte, i int) (end int, esc, wide, ok bool) {
	if i >= len(v) || v[i] != '"' {
		return 0, false, false, false
	}
	for k := i + 1; k < len(v); k++ {
		switch class[v[k]] {
		case 0, cEnd:
		case cQuote:
			return k + 1, esc, wide, true
		case cEscape:
			n := escapeLen(v, k)
			if n == 0 {
				return 0, false, false, false
			}
			esc = true
			k += n - 1
		case cWide:
			wide = true
		default: // a raw control character
			return 0, false, false, false
		}
	}
	return 0, false, false, false
}

// escapeLen is the length of the escape at v[k] (a backslash), 0 when it
// is not one JSON allows.
func escapeLen(v []byte, k int) int {
	if k+1 >= len(v) {
		return 0
	}
	switch v[k+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if k+6 > len(v) {
			return 0
		}
		for _, c := range v[k+2 : k+6] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return 0
			}
		}
		return 6
	}
	return 0
}

// scanLiteral returns the end of the number, true, false or null at v[i],
// i when it is none of them.
func scanLiteral(v []byte, i int) int {
	k := i
	for k < len(v) && class[v[k]]&cEnd == 0 {
		k++
	}
	if !literal(v[i:k]) {
		return i
	}
	return k
}

// literal reports whether lit is true, false, null or a JSON number.
func literal(lit []byte) bool {
	switch alias(lit) {
	case "true", "false", "null":
		return true
	}
	k := 0
	if k < len(lit) && lit[k] == '-' {
		k++
	}
	switch {
	case k < len(lit) && lit[k] == '0':
		k++
	case k < len(lit) && '1' <= lit[k] && lit[k] <= '9':
		k = digits(lit, k)
	default:
		return false
	}
	if k < len(lit) && lit[k] == '.' {
		if e := digits(lit, k+1); e > k+1 {
			k = e
		} else {
			return false
		}
	}
	if k < len(lit) && (lit[k] == 'e' || lit[k] == 'E') {
		k++
		if k < len(lit) && (lit[k] == '+' || lit[k] == '-') {
			k++
		}
		e := digits(lit, k)
		if e == k {
			return false
		}
		k = e
	}
	return k == len(lit)
}

func digits(b []byte, k int) int {
	for k < len(b) && '0' <= b[k] && b[k] <= '9' {
		k++
	}
	return k
}

// skipValue returns the end of the JSON value starting at v[i], checking
// its syntax; ok=false when it is not one (or nests deeper than maxDepth).
func skipValue(v []byte, i int) (int, bool) { return skipDepth(v, i, 0) }

func skipDepth(v []byte, i, depth int) (int, bool) {
	if i >= len(v) || depth > maxDepth {
		return 0, false
	}
	switch v[i] {
	case '"':
		e, _, _, ok := scanString(v, i)
		return e, ok
	case '{':
		return skipObject(v, i, depth)
	case '[':
		return skipArray(v, i, depth)
	}
	k := scanLiteral(v, i)
	return k, k > i
}

func skipObject(v []byte, i, depth int) (int, bool) {
	k := skipSpace(v, i+1)
	if k < len(v) && v[k] == '}' {
		return k + 1, true
	}
	for {
		e, _, _, ok := scanString(v, k)
		if !ok {
			return 0, false
		}
		if k = skipSpace(v, e); k >= len(v) || v[k] != ':' {
			return 0, false
		}
		if k, ok = skipDepth(v, skipSpace(v, k+1), depth+1); !ok {
			return 0, false
		}
		if k = skipSpace(v, k); k >= len(v) {
			return 0, false
		}
		switch v[k] {
		case '}':
			return k + 1, true
		case ',':
			k = skipSpace(v, k+1)
		default:
			return 0, false
		}
	}
}

func skipArray(v []byte, i, depth int) (int, bool) {
	k := skipSpace(v, i+1)
	if k < len(v) && v[k] == ']' {
		return k + 1, true
	}
	for {
		e, ok := skipDepth(v, k, depth+1)
		if !ok {
			return 0, false
		}
		if k = skipSpace(v, e); k >= len(v) {
			return 0, false
		}
		switch v[k] {
		case ']':
			return k + 1, true
		case ',':
			k = skipSpace(v, k+1)
		default:
			return 0, false
		}
	}
}
