package compat

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Mode is a compatibility mode, with the meaning Confluent Schema Registry
// gives it.
type Mode string

const (
	None               Mode = "NONE"
	Backward           Mode = "BACKWARD"
	BackwardTransitive Mode = "BACKWARD_TRANSITIVE"
	Forward            Mode = "FORWARD"
	ForwardTransitive  Mode = "FORWARD_TRANSITIVE"
	Full               Mode = "FULL"
	FullTransitive     Mode = "FULL_TRANSITIVE"
)

var modes = []Mode{None, Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive}

// ParseMode accepts the names above (case-insensitive); anything else is an
// error naming the valid modes.
func ParseMode(s string) (Mode, error) {
	for _, m := range modes {
		if strings.EqualFold(s, string(m)) {
			return m, nil
		}
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown compatibility mode %q: use one of %s", s, strings.Join(names, ", "))
}

func (m Mode) transitive() bool { return strings.HasSuffix(string(m), "_TRANSITIVE") }
func (m Mode) backward() bool   { return m != None && !strings.HasPrefix(string(m), "FORWARD") }
func (m Mode) forward() bool    { return m != None && !strings.HasPrefix(string(m), "BACKWARD") }

// Difference is one way two schemas differ.
type Difference struct {
	// Pointer is where in the schema they differ, e.g.
	// "#/properties/email/maxLength" ("#/" is the root). It follows a $ref
	// into the schema it names without a token of its own, as Confluent's
	// paths do; "#/required/NAME" names a required property.
	Pointer string
	// Rule is Confluent's difference type, e.g. "MAX_LENGTH_DECREASED".
	Rule string
	// Old and New are the values at Pointer in the original and the update
	// (for Check in a forward direction, see Forward), as compact JSON; ""
	// where absent.
	Old, New string
	// Version is, for transitive checks, the 1-based index into prev of the
	// schema compared with (0 when not applicable).
	Version int
	// Forward marks a difference Check found comparing the new schema as the
	// original with a previous one as the update (FORWARD and FULL modes): a
	// reader of the previous schema reading what the new one writes. Old is
	// then the new schema's value and New the previous one's.
	Forward bool
}

// String is the difference on one line: pointer, rule, old → new.
func (d Difference) String() string {
	s := fmt.Sprintf("%s %s %s → %s", d.Pointer, d.Rule, shown(d.Old), shown(d.New))
	switch {
	case d.Forward && d.Version > 0:
		s += fmt.Sprintf(" (forward, against version %d)", d.Version)
	case d.Forward:
		s += " (forward)"
	case d.Version > 0:
		s += fmt.Sprintf(" (against version %d)", d.Version)
	}
	return s
}

// shown abbreviates a value for one line.
func shown(v string) string {
	const max = 80
	if v == "" {
		return "(absent)"
	}
	if len(v) <= max {
		return v
	}
	cut := max - 3
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut] + "..."
}

// Compatible reports whether a Difference's rule is in Confluent's
// compatible set (COMPATIBLE_CHANGES_STRICT, its default policy).
func (d Difference) Compatible() bool { return compatibleRules[d.Rule] }

// Diff lists every difference between original and update (compatible ones
// included), as Confluent's SchemaDiff.compare(original, update) does. A
// schema that is not well-formed (see WellFormed) is an error.
func Diff(original, update []byte) ([]Difference, error) {
	o, err := buildSchema(original)
	if err != nil {
		return nil, fmt.Errorf("original schema: %w", err)
	}
	u, err := buildSchema(update)
	if err != nil {
		return nil, fmt.Errorf("updated schema: %w", err)
	}
	return diffSchemas(o, u, false, 0, false)
}

// WellFormed reports why doc is not a schema this package can judge: not
// JSON, not valid against its dialect's meta-schema (a keyword of the wrong
// type), a $ref it cannot resolve within the document, a dialect ($schema)
// other than draft-04, -06, -07, 2019-09 and 2020-12; nil if it is one.
func WellFormed(doc []byte) error {
	_, err := buildSchema(doc)
	return err
}

// Check judges next against prev (oldest first) under mode and returns only
// the incompatible differences (none: compatible).
//
// BACKWARD: next reads what prev[len-1] wrote (Diff(prev[last], next));
// FORWARD: prev[last] reads what next writes (Diff(next, prev[last])); FULL:
// both; *_TRANSITIVE: against every element of prev; NONE: nothing. An empty
// prev is compatible. A malformed next or prev, or an unknown mode, is an
// error, whatever the mode.
func Check(mode Mode, prev [][]byte, next []byte) ([]Difference, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	n, err := buildSchema(next)
	if err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	if mode == None || len(prev) == 0 {
		return nil, nil
	}
	first := len(prev) - 1
	if mode.transitive() {
		first = 0
	}
	var out []Difference
	for i := first; i < len(prev); i++ {
		p, err := buildSchema(prev[i])
		if err != nil {
			return nil, fmt.Errorf("previous schema %d of %d: %w", i+1, len(prev), err)
		}
		version := 0
		if mode.transitive() {
			version = i + 1
		}
		for _, dir := range []struct {
			on      bool
			o, u    *schema
			forward bool
		}{{mode.backward(), p, n, false}, {mode.forward(), n, p, true}} {
			if !dir.on {
				continue
			}
			ds, err := diffSchemas(dir.o, dir.u, true, version, dir.forward)
			if err != nil {
				return nil, fmt.Errorf("against previous schema %d of %d: %w", i+1, len(prev), err)
			}
			out = append(out, ds...)
		}
	}
	return out, nil
}

func diffSchemas(o, u *schema, onlyIncompatible bool, version int, forward bool) ([]Difference, error) {
	ds, err := diffTrees(o.root, u.root)
	if err != nil {
		return nil, err
	}
	out := []Difference{}
	for _, d := range ds {
		if onlyIncompatible && compatibleRules[d.rule] {
			continue
		}
		out = append(out, Difference{Pointer: "#/" + d.path, Rule: d.rule,
			Old: d.old.compact(), New: d.new.compact(), Version: version, Forward: forward})
	}
	return out, nil
}
