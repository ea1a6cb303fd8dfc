package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Problem says why an event was refused.
type Problem string

// The problems a Violation names.
const (
	// Invalid: the payload breaks its contract.
	Invalid Problem = "invalid"
	// Unregistered: the type has contracts, but not this version.
	Unregistered Problem = "unregistered-version"
	// NoContract: the topic is strict and the type has no contract.
	NoContract Problem = "no-contract"
)

// Violation is an event refused by its contract. It is the error
// outbox.Writer.Write returns (wrapped) when an event breaks its contract,
// and the dead-letter reason the relay records.
type Violation struct {
	Topic, Type string
	Version     int32
	Problem     Problem
	// Pointer is the JSON pointer (RFC 6901) of the first value that
	// fails ("" is the whole payload; for a missing required property,
	// or one a dependency requires, the property's own pointer); Rule is the keyword that fails there
	// and Message what the contract wants. Neither quotes the payload's
	// value (reason.go): the reason lands in _dead_letter.
	Pointer, Rule, Message string
	// Registered lists the type's registered versions (Unregistered).
	Registered []int32
}

func (v *Violation) Error() string {
	switch v.Problem {
	case Unregistered:
		return fmt.Sprintf("event type %q of topic %q has no contract version %d (registered: %s): register it, or write a registered version",
			truncate(v.Type, 80), v.Topic, v.Version, versionList(v.Registered))
	case NoContract:
		return fmt.Sprintf("topic %q is strict and event type %q has no contract: register one (relay contract register --topic %s --type ...)",
			v.Topic, truncate(v.Type, 80), v.Topic)
	}
	return fmt.Sprintf("event violates contract %s/%s v%d at %s: %s: %s", v.Topic, truncate(v.Type, 80), v.Version, pointerText(v.Pointer), v.Rule, v.Message)
}

// maxPointer bounds the pointer a reason prints: its names come from the
// payload's keys.
const maxPointer = 200

func pointerText(p string) string {
	if p == "" {
		return `"" (the payload)`
	}
	return strconv.Quote(truncate(p, maxPointer))
}

func versionList(vs []int32) string {
	if len(vs) == 0 {
		return "none"
	}
	if len(vs) > 2 && vs[len(vs)-1]-vs[0] == int32(len(vs)-1) {
		return fmt.Sprintf("%d-%d", vs[0], vs[len(vs)-1])
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(int(v))
	}
	return strings.Join(s, ", ")
}

// Validate checks payload, JSON text, against the contract: nil when it is
// valid, else a *Violation naming the first failing pointer. The fast path
// reads payload in place and allocates nothing for a valid event of a
// schema it covers; anything else is decided by the jsonschema library.
func (s *Schema) Validate(payload []byte) *Violation {
	if s.fastValid(payload) {
		return nil
	}
	return s.validateSlow(payload)
}

// fastValid reports whether the fast path finds payload valid.
func (s *Schema) fastValid(payload []byte) bool { return s.fastResult(payload) == valid }

// fastResult is the fast path's answer on payload: the whole text one
// value, nothing but space after it.
func (s *Schema) fastResult(payload []byte) result {
	end, r := s.fast.eval(payload, skipSpace(payload, 0), 0)
	if r == valid && skipSpace(payload, end) != len(payload) {
		return unsure
	}
	return r
}

// validateSlow decides with the library alone.
func (s *Schema) validateSlow(payload []byte) *Violation {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return s.violation("", "json", notJSON(err))
	}
	ok := representable(doc)
	if ok {
		ok, err = s.libValidate(doc)
	}
	switch {
	case !ok:
		return s.violation("", "validator", "the validator cannot evaluate this payload (a number beyond 1e1000000, for one)")
	case err == nil:
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return s.violation("", "schema", "does not match the contract")
	}
	ptr, rule, msg := firstFailure(ve)
	return s.violation(ptr, rule, msg)
}

// libValidate is the library's verdict on doc; ok=false when it cannot
// give one. It panics on a number big.Rat does not parse (an exponent
// beyond a million, which encoding/json accepts) wherever it compares
// numbers: a row anyone can write must not end the relay, and such an
// event is refused.
func (s *Schema) libValidate(doc any) (ok bool, err error) {
	defer func() {
		if recover() != nil {
			ok, err = false, nil
		}
	}()
	return true, s.sch.Validate(doc)
}

// representable reports whether every number in doc (as UnmarshalJSON
// decodes it) is one the library can hold (big.Rat): it fails on the first
// other one it compares, and which one it meets first follows map order,
// so a payload holding one would be valid in one run and refused in the
// next. Such a payload is refused, always.
func representable(doc any) bool {
	switch v := doc.(type) {
	case json.Number:
		_, ok := new(big.Rat).SetString(string(v))
		return ok
	case []any:
		for _, e := range v {
			if !representable(e) {
				return false
			}
		}
	case map[string]any:
		for _, e := range v {
			if !representable(e) {
				return false
			}
		}
	}
	return true
}

// notJSON says where the payload stops being JSON, without quoting it.
func notJSON(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("payload is not JSON text (syntax error at byte %d)", se.Offset)
	}
	return "payload is not one JSON value"
}

func (s *Schema) violation(ptr, rule, msg string) *Violation {
	return &Violation{Topic: s.Topic, Type: s.Type, Version: s.Version, Problem: Invalid, Pointer: ptr, Rule: rule, Message: msg}
}

// failure is one leaf error of a validation.
type failure struct {
	loc       []string
	rule, msg string
}

// firstFailure picks, among the leaf errors, the one at the first instance
// location (by path, segment by segment; the library visits an object's
// properties in map order, so its own order is not stable), and returns
// its JSON pointer and message. anyOf and oneOf are leaves: which branch
// was meant is not knowable.
func firstFailure(ve *jsonschema.ValidationError) (ptr, rule, msg string) {
	var leaves []failure
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.AnyOf, *kind.OneOf:
		default:
			if len(e.Causes) > 0 {
				for _, c := range e.Causes {
					walk(c)
				}
				return
			}
		}
		leaves = append(leaves, leaf(e))
	}
	walk(ve)
	if len(leaves) == 0 {
		return "", "schema", "does not match the contract"
	}
	first := slices.MinFunc(leaves, func(a, b failure) int {
		if c := slices.Compare(a.loc, b.loc); c != 0 {
			return c
		}
		if c := strings.Compare(a.rule, b.rule); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	return pointer(first.loc), first.rule, first.msg
}

func leaf(e *jsonschema.ValidationError) failure {
	loc := slices.Clone(e.InstanceLocation)
	rule, msg := reason(e.ErrorKind)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) > 0 {
			loc = append(loc, slices.Min(k.Missing))
		}
	case *kind.AdditionalProperties:
		if len(k.Properties) > 0 {
			loc = append(loc, slices.Min(k.Properties))
		}
	case *kind.Dependency: // draft-07's dependencies, as names
		if len(k.Missing) > 0 {
			loc = append(loc, slices.Min(k.Missing))
		}
	case *kind.DependentRequired:
		if len(k.Missing) > 0 {
			loc = append(loc, slices.Min(k.Missing))
		}
	}
	return failure{loc, rule, msg}
}

// pointer returns the JSON pointer of a path.
func pointer(loc []string) string {
	var sb strings.Builder
	for _, tok := range loc {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}
