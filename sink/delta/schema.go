package delta

import (
	"encoding/json"
	"fmt"
	"strings"
)

// StructType is a Delta schema (metaData.schemaString) or a nested struct.
type StructType struct {
	Type   string        `json:"type"`
	Fields []StructField `json:"fields"`
}

// StructField is one column of a StructType. Type is the raw JSON of the
// field's type: a JSON string for primitives ("long", "decimal(10,2)") or an
// object for array, map and struct types.
type StructField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata,omitempty"`
}

// ParseSchema decodes a schemaString.
func ParseSchema(schemaString string) (*StructType, error) {
	var s StructType
	if err := json.Unmarshal([]byte(schemaString), &s); err != nil {
		return nil, fmt.Errorf("parse schemaString: %w", err)
	}
	if s.Type != "struct" {
		return nil, fmt.Errorf("parse schemaString: top-level type %q, want struct", s.Type)
	}
	return &s, nil
}

// Field returns the field with the given name (case-insensitively, as Delta
// column names are unique ignoring case).
func (s *StructType) Field(name string) (StructField, bool) {
	for _, f := range s.Fields {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return StructField{}, false
}

// Columns renders each top-level field as "name:type", e.g. "id:long",
// "m:map<string,string>", "l:array<struct<a:int,b:string>>".
func (s *StructType) Columns() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name + ":" + TypeString(f.Type)
	}
	return out
}

// PrimitiveType returns the primitive type name of a field ("long",
// "decimal(1,0)"), or "" for a nested type.
func (f StructField) PrimitiveType() string {
	var p string
	if json.Unmarshal(f.Type, &p) == nil {
		return p
	}
	return ""
}

// TypeString renders a Delta type (raw JSON) in a compact readable form.
func TypeString(raw json.RawMessage) string {
	var p string
	if json.Unmarshal(raw, &p) == nil {
		return p
	}
	var t struct {
		Type        string          `json:"type"`
		ElementType json.RawMessage `json:"elementType"`
		KeyType     json.RawMessage `json:"keyType"`
		ValueType   json.RawMessage `json:"valueType"`
		Fields      []StructField   `json:"fields"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return "invalid"
	}
	switch t.Type {
	case "array":
		return "array<" + TypeString(t.ElementType) + ">"
	case "map":
		return "map<" + TypeString(t.KeyType) + "," + TypeString(t.ValueType) + ">"
	case "struct":
		parts := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			parts[i] = f.Name + ":" + TypeString(f.Type)
		}
		return "struct<" + strings.Join(parts, ",") + ">"
	}
	return t.Type
}

// walkFields calls fn for every field at every nesting level.
func walkFields(raw json.RawMessage, fn func(StructField)) {
	var t struct {
		ElementType json.RawMessage `json:"elementType"`
		KeyType     json.RawMessage `json:"keyType"`
		ValueType   json.RawMessage `json:"valueType"`
		Fields      []StructField   `json:"fields"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return
	}
	for _, f := range t.Fields {
		fn(f)
		walkFields(f.Type, fn)
	}
	for _, sub := range []json.RawMessage{t.ElementType, t.KeyType, t.ValueType} {
		if len(sub) > 0 {
			walkFields(sub, fn)
		}
	}
}
