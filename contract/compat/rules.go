package compat

import "strings"

// The rules: Confluent's difference types (io.confluent.kafka.schemaregistry.
// json.diff.Difference.Type), by the names it gives them, so that a team that
// knows Confluent's messages reads ours. Only those this checker can emit are
// listed; Confluent's RESERVED_PROPERTY_* types judge metadata the registry
// keeps beside a schema and have no counterpart here.
const (
	ruleIDChanged          = "ID_CHANGED"
	ruleDescriptionChanged = "DESCRIPTION_CHANGED"
	ruleTitleChanged       = "TITLE_CHANGED"
	ruleDefaultChanged     = "DEFAULT_CHANGED"
	ruleSchemaAdded        = "SCHEMA_ADDED"
	ruleSchemaRemoved      = "SCHEMA_REMOVED"
	ruleTypeExtended       = "TYPE_EXTENDED"
	ruleTypeNarrowed       = "TYPE_NARROWED"
	ruleTypeChanged        = "TYPE_CHANGED"

	rulePatternAdded   = "PATTERN_ADDED"
	rulePatternRemoved = "PATTERN_REMOVED"
	rulePatternChanged = "PATTERN_CHANGED"

	ruleMultipleOfAdded    = "MULTIPLE_OF_ADDED"
	ruleMultipleOfRemoved  = "MULTIPLE_OF_REMOVED"
	ruleMultipleOfExpanded = "MULTIPLE_OF_EXPANDED"
	ruleMultipleOfReduced  = "MULTIPLE_OF_REDUCED"
	ruleMultipleOfChanged  = "MULTIPLE_OF_CHANGED"

	ruleRequiredAttributeAdded            = "REQUIRED_ATTRIBUTE_ADDED"
	ruleRequiredAttributeWithDefaultAdded = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
	ruleRequiredAttributeRemoved          = "REQUIRED_ATTRIBUTE_REMOVED"

	ruleDependencyArrayAdded    = "DEPENDENCY_ARRAY_ADDED"
	ruleDependencyArrayRemoved  = "DEPENDENCY_ARRAY_REMOVED"
	ruleDependencyArrayExtended = "DEPENDENCY_ARRAY_EXTENDED"
	ruleDependencyArrayNarrowed = "DEPENDENCY_ARRAY_NARROWED"
	ruleDependencyArrayChanged  = "DEPENDENCY_ARRAY_CHANGED"
	ruleDependencySchemaAdded   = "DEPENDENCY_SCHEMA_ADDED"
	ruleDependencySchemaRemoved = "DEPENDENCY_SCHEMA_REMOVED"

	ruleRequiredPropertyAddedToOpen            = "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
	ruleRequiredPropertyWithDefaultAddedToOpen = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
	ruleOptionalPropertyAddedToOpen            = "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
	rulePropertyWithEmptySchemaAddedToOpen     = "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
	ruleRequiredPropertyAddedToUnopen          = "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
	ruleRequiredPropertyWithDefaultToUnopen    = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
	ruleOptionalPropertyAddedToUnopen          = "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
	rulePropertyRemovedFromOpen                = "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL"
	rulePropertyWithFalseRemovedFromClosed     = "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	rulePropertyRemovedFromClosed              = "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	rulePropertyRemovedCovered                 = "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	rulePropertyRemovedNotCovered              = "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	rulePropertyAddedCovered                   = "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	rulePropertyAddedNotCovered                = "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"

	ruleUniqueItemsAdded   = "UNIQUE_ITEMS_ADDED"
	ruleUniqueItemsRemoved = "UNIQUE_ITEMS_REMOVED"

	ruleItemAddedToOpen            = "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
	ruleItemWithEmptyAddedToOpen   = "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
	ruleItemAddedToClosed          = "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL"
	ruleItemRemovedFromOpen        = "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL"
	ruleItemWithFalseRemovedClosed = "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	ruleItemRemovedFromClosed      = "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"
	ruleItemRemovedCovered         = "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	ruleItemRemovedNotCovered      = "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	ruleItemAddedCovered           = "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
	ruleItemAddedNotCovered        = "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"

	ruleEnumExtended = "ENUM_ARRAY_EXTENDED"
	ruleEnumNarrowed = "ENUM_ARRAY_NARROWED"
	ruleEnumChanged  = "ENUM_ARRAY_CHANGED"

	ruleCombinedExtended          = "COMBINED_TYPE_EXTENDED"
	ruleCombinedChanged           = "COMBINED_TYPE_CHANGED"
	ruleProductExtended           = "PRODUCT_TYPE_EXTENDED"
	ruleProductNarrowed           = "PRODUCT_TYPE_NARROWED"
	ruleSumExtended               = "SUM_TYPE_EXTENDED"
	ruleSumNarrowed               = "SUM_TYPE_NARROWED"
	ruleCombinedSubschemasChanged = "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
	ruleNotExtended               = "NOT_TYPE_EXTENDED"
	ruleNotNarrowed               = "NOT_TYPE_NARROWED"
)

// bounded names a keyword whose value bounds what a schema accepts. Its
// rules follow Confluent's pattern: "maxLength" gives MAX_LENGTH_ADDED,
// _REMOVED, _INCREASED and _DECREASED; compatibleRules says which widen.
type bounded struct {
	keyword string
}

// rule is the difference type for a change of a bound ("ADDED", "REMOVED",
// "INCREASED" or "DECREASED").
func (b bounded) rule(change string) string {
	var sb strings.Builder
	for i, r := range b.keyword {
		if r >= 'A' && r <= 'Z' && i > 0 {
			sb.WriteByte('_')
		}
		sb.WriteRune(r)
	}
	return strings.ToUpper(sb.String()) + "_" + change
}

// compatibleRules is Confluent's COMPATIBLE_CHANGES_STRICT, the set its
// registry applies by default (CompatibilityPolicy.STRICT).
var compatibleRules = map[string]bool{}

func init() {
	for _, r := range []string{
		ruleIDChanged, ruleDescriptionChanged, ruleTitleChanged, ruleDefaultChanged,
		ruleSchemaRemoved, ruleTypeExtended,
		"MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
		rulePatternRemoved,
		"MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
		"EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED",
		"EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED",
		ruleMultipleOfReduced, ruleMultipleOfRemoved,
		ruleRequiredAttributeWithDefaultAdded, ruleRequiredAttributeRemoved,
		ruleDependencyArrayNarrowed, ruleDependencyArrayRemoved, ruleDependencySchemaRemoved,
		"MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED",
		"MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
		"ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
		"UNEVALUATED_PROPERTIES_ADDED", "UNEVALUATED_PROPERTIES_EXTENDED",
		rulePropertyWithEmptySchemaAddedToOpen, ruleRequiredPropertyWithDefaultToUnopen,
		ruleOptionalPropertyAddedToUnopen, rulePropertyWithFalseRemovedFromClosed,
		rulePropertyRemovedFromOpen, rulePropertyAddedCovered, rulePropertyRemovedCovered,
		"MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
		"MAX_CONTAINS_INCREASED", "MAX_CONTAINS_REMOVED",
		"MIN_CONTAINS_DECREASED", "MIN_CONTAINS_REMOVED",
		ruleUniqueItemsRemoved,
		"ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
		"UNEVALUATED_ITEMS_ADDED", "UNEVALUATED_ITEMS_EXTENDED",
		ruleItemWithEmptyAddedToOpen, ruleItemAddedToClosed, ruleItemWithFalseRemovedClosed,
		ruleItemRemovedFromOpen, ruleItemAddedCovered, ruleItemRemovedCovered,
		ruleEnumExtended,
		ruleCombinedExtended, ruleProductNarrowed, ruleSumExtended, ruleNotNarrowed,
	} {
		compatibleRules[r] = true
	}
}
