package pii

import "bytes"

// The JSON text primitives the scanners are built on. They find where a
// value ends without decoding it, and they never read past the text: a
// truncated value is errSyntax. They check only what finding the end
// needs (brackets, quotes, escapes): contracts validate the rest.

// ws returns the index of the first byte at or after i that is not JSON
// whitespace.
func ws(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skip returns the end of the JSON value at i.
func skip(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return stringEnd(b, i)
	case c == '{' || c == '[':
		return containerEnd(b, i)
	default:
		j := i
		for j < len(b) && !delim[b[j]] {
			j++
		}
		if j == i {
			return 0, errSyntax
		}
		return j, nil
	}
}

// stringEnd returns the end of the string literal whose opening quote is
// at i: it jumps from quote to quote (bytes.IndexByte), and a quote ends
// the literal when an even number of backslashes precedes it (an odd
// number escapes it: `\"`, `\\\"`).
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, errSyntax
		}
		q := j + k
		n := 0
		for p := q - 1; b[p] == '\\'; p-- { // stops at b[i], a quote
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// containerEnd returns the end of the object or array at i, counting
// brackets outside strings.
func containerEnd(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end, err := stringEnd(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, errSyntax
}

// delim marks the bytes that end a number or literal.
var delim = [256]bool{' ': true, '\t': true, '\r': true, '\n': true, ',': true, ']': true, '}': true, ':': true}
