package compat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// jkind is the JSON type of a value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// value is a JSON value that keeps the order of an object's keys, so that
// differences come out in the order the schema was written and Old/New show
// the schema as its author wrote it.
type value struct {
	kind  jkind
	b     bool
	s     string   // a string, or a number's literal
	num   *big.Rat // a number's exact value
	arr   []*value
	keys  []string // an object's keys, in document order
	vals  []*value
	canon string // canonical(), once computed
}

// maxExponent bounds a number's decimal exponent: math/big would otherwise
// spend unbounded time and memory on a literal such as 1e999999999, and no
// schema needs a bound beyond float64's range.
const maxExponent = 400

// maxDepth bounds nesting, so that a hostile document cannot exhaust the stack
// of the recursive walks that follow.
const maxDepth = 512

// parseJSON reads exactly one JSON value from b.
func parseJSON(b []byte) (*value, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := readValue(d, 0)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the top-level value")
	}
	return v, nil
}

func readValue(d *json.Decoder, depth int) (*value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	t, err := d.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := t.(type) {
	case nil:
		return &value{kind: jNull}, nil
	case bool:
		return &value{kind: jBool, b: t}, nil
	case json.Number:
		if err := checkNumber(string(t)); err != nil {
			return nil, err
		}
		r, ok := new(big.Rat).SetString(string(t))
		if !ok {
			return nil, fmt.Errorf("number %.40s cannot be read exactly", t)
		}
		return &value{kind: jNumber, s: string(t), num: r}, nil
	case string:
		return &value{kind: jString, s: t}, nil
	case json.Delim:
		if t == '[' {
			return readArray(d, depth)
		}
		return readObject(d, depth)
	}
	return nil, fmt.Errorf("unexpected token %v", t)
}

func readArray(d *json.Decoder, depth int) (*value, error) {
	v := &value{kind: jArray}
	for d.More() {
		e, err := readValue(d, depth+1)
		if err != nil {
			return nil, err
		}
		v.arr = append(v.arr, e)
	}
	_, err := d.Token() // ']'
	return v, err
}

func readObject(d *json.Decoder, depth int) (*value, error) {
	v := &value{kind: jObject}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		if seen[k] {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		seen[k] = true
		e, err := readValue(d, depth+1)
		if err != nil {
			return nil, err
		}
		v.keys = append(v.keys, k)
		v.vals = append(v.vals, e)
	}
	_, err := d.Token() // '}'
	return v, err
}

// checkNumber refuses literals whose exponent math/big could not afford.
func checkNumber(lit string) error {
	i := strings.IndexAny(lit, "eE")
	if i < 0 {
		if len(lit) > maxExponent {
			return fmt.Errorf("number %.20s... has more than %d digits", lit, maxExponent)
		}
		return nil
	}
	exp, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
	if err != nil || exp > maxExponent || exp < -maxExponent || i > maxExponent {
		return fmt.Errorf("number %.40s is out of range (exponent beyond ±%d)", lit, maxExponent)
	}
	return nil
}

// get returns the member k of an object, or nil.
func (v *value) get(k string) *value {
	if v == nil || v.kind != jObject {
		return nil
	}
	for i, key := range v.keys {
		if key == k {
			return v.vals[i]
		}
	}
	return nil
}

// rat is a number's exact value (nil for anything but a number).
func (v *value) rat() *big.Rat {
	if v == nil {
		return nil
	}
	return v.num
}

// compact is the value as compact JSON, keys in document order.
func (v *value) compact() string {
	if v == nil {
		return ""
	}
	var sb strings.Builder
	v.write(&sb, false)
	return sb.String()
}

// canonical is the value as JSON with sorted keys and exact numbers, so that
// two values are equal as JSON Schema understands equality (1 and 1.0 are the
// same number; key order does not matter) when their canonical forms are.
func (v *value) canonical() string {
	if v.canon == "" {
		var sb strings.Builder
		v.write(&sb, true)
		v.canon = sb.String()
	}
	return v.canon
}

func (v *value) write(sb *strings.Builder, canon bool) {
	switch v.kind {
	case jNull:
		sb.WriteString("null")
	case jBool:
		sb.WriteString(strconv.FormatBool(v.b))
	case jNumber:
		if r := v.rat(); canon && r != nil {
			sb.WriteString(r.RatString())
		} else {
			sb.WriteString(v.s)
		}
	case jString:
		writeQuoted(sb, v.s)
	case jArray:
		sb.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				sb.WriteByte(',')
			}
			e.writeChild(sb, canon)
		}
		sb.WriteByte(']')
	case jObject:
		v.writeObject(sb, canon)
	}
}

// writeChild writes a member, from its memoised canonical form if canonical.
func (v *value) writeChild(sb *strings.Builder, canon bool) {
	if canon {
		sb.WriteString(v.canonical())
		return
	}
	v.write(sb, false)
}

func (v *value) writeObject(sb *strings.Builder, canon bool) {
	order := make([]int, len(v.keys))
	for i := range order {
		order[i] = i
	}
	if canon {
		sort.Slice(order, func(a, b int) bool { return v.keys[order[a]] < v.keys[order[b]] })
	}
	sb.WriteByte('{')
	for n, i := range order {
		if n > 0 {
			sb.WriteByte(',')
		}
		writeQuoted(sb, v.keys[i])
		sb.WriteByte(':')
		v.vals[i].writeChild(sb, canon)
	}
	sb.WriteByte('}')
}

// String names a JSON type, with its article, for error messages.
func (k jkind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// writeQuoted writes s as a JSON string, without escaping <, > and & (which
// encoding/json does for HTML): these values are read by people.
func writeQuoted(sb *strings.Builder, s string) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	sb.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
