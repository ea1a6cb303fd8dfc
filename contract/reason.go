package contract

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// A violation's reason names the pointer, the rule (the keyword that
// failed) and what the contract wants, never the payload's value: the
// reason is stored in _dead_letter, printed by relay consume --validate,
// counted on the operator's page and returned to producers, and a
// payload's value may be personal data (issue 28). The library's own
// messages quote values ("'bob@example.com' does not match pattern ...",
// "maximum: got 150, want 100"), so every kind is worded here; what a
// message may carry is the schema's side (types, bounds, patterns, names
// the contract declares) and counts. A kind this file does not know is
// named by its keyword alone.

// maxWant bounds the schema text a reason quotes (a pattern, a bound).
const maxWant = 120

// reason words one failure of the library: the rule and the message.
func reason(k jsonschema.ErrorKind) (rule, msg string) {
	rule = strings.Join(k.KeywordPath(), "/")
	switch k := k.(type) {
	case *kind.Type:
		return "type", fmt.Sprintf("got %s, want %s", k.Got, strings.Join(k.Want, " or "))
	case *kind.Enum:
		return "enum", fmt.Sprintf("not one of the %d values the contract allows", len(k.Want))
	case *kind.Const:
		return "const", "not the value the contract requires"
	case *kind.Format:
		return "format", "not a valid " + want(k.Want)
	case *kind.Pattern:
		return "pattern", "does not match " + want(k.Want)
	case *kind.MinLength:
		return "minLength", fmt.Sprintf("%d characters, want at least %d", k.Got, k.Want)
	case *kind.MaxLength:
		return "maxLength", fmt.Sprintf("%d characters, want at most %d", k.Got, k.Want)
	case *kind.Minimum:
		return "minimum", "below " + ratText(k.Want)
	case *kind.Maximum:
		return "maximum", "above " + ratText(k.Want)
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum", "not above " + ratText(k.Want)
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum", "not below " + ratText(k.Want)
	case *kind.MultipleOf:
		return "multipleOf", "not a multiple of " + ratText(k.Want)
	case *kind.MinItems:
		return "minItems", fmt.Sprintf("%d items, want at least %d", k.Got, k.Want)
	case *kind.MaxItems:
		return "maxItems", fmt.Sprintf("%d items, want at most %d", k.Got, k.Want)
	case *kind.AdditionalItems:
		return "additionalItems", fmt.Sprintf("%d items more than the contract allows", k.Count)
	case *kind.UniqueItems:
		return "uniqueItems", fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return "contains", "no item matches"
	case *kind.MinContains:
		return "minContains", fmt.Sprintf("%d items match, want at least %d", len(k.Got), k.Want)
	case *kind.MaxContains:
		return "maxContains", fmt.Sprintf("%d items match, want at most %d", len(k.Got), k.Want)
	case *kind.MinProperties:
		return "minProperties", fmt.Sprintf("%d properties, want at least %d", k.Got, k.Want)
	case *kind.MaxProperties:
		return "maxProperties", fmt.Sprintf("%d properties, want at most %d", k.Got, k.Want)
	case *kind.Required:
		return "required", "required property is missing"
	case *kind.AdditionalProperties:
		return "additionalProperties", "property is not allowed"
	case *kind.PropertyNames:
		return "propertyNames", "a property name breaks the contract's rule for names"
	case *kind.Dependency:
		return "dependencies", fmt.Sprintf("%s requires %s", want(k.Prop), want(strings.Join(k.Missing, ", ")))
	case *kind.DependentRequired:
		return "dependentRequired", fmt.Sprintf("%s requires %s", want(k.Prop), want(strings.Join(k.Missing, ", ")))
	case *kind.Not:
		return "not", "matches the schema it must not"
	case *kind.AnyOf:
		return "anyOf", "matches none of the schemas"
	case *kind.OneOf:
		if len(k.Subschemas) < 2 {
			return "oneOf", "matches none of the schemas"
		}
		return "oneOf", fmt.Sprintf("matches schemas %d and %d, want exactly one", k.Subschemas[0], k.Subschemas[1])
	case *kind.AllOf:
		return "allOf", "does not match every schema"
	case *kind.FalseSchema:
		return "false", "the contract allows no value here"
	case *kind.ContentEncoding:
		return "contentEncoding", "not " + want(k.Want) + " encoded"
	case *kind.ContentMediaType:
		return "contentMediaType", "not of media type " + want(k.Want)
	case *kind.ContentSchema:
		return "contentSchema", "the decoded content does not match its schema"
	case *kind.InvalidJsonValue:
		return "type", "not a JSON value"
	}
	if rule == "" {
		rule = "schema"
	}
	return rule, "does not match the contract"
}

// want quotes schema text, bounded.
func want(s string) string { return strconv.Quote(truncate(s, maxWant)) }

// ratText prints a bound of the contract.
func ratText(r *big.Rat) string {
	if r == nil {
		return "the bound"
	}
	if r.IsInt() {
		return truncate(r.Num().String(), maxWant)
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
