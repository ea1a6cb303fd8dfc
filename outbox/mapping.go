package outbox

import (
	"fmt"
	"strings"
)

// Mapping names the outbox-table columns that hold each event field.
// ID, Topic, Key, Type and Payload are required. SchemaVersion, Headers and
// OccurredAt are optional: an empty name means the table has no such column
// and the field takes its default (schema version 1, no headers, occurred_at
// = the source commit time). The zero Mapping stands for DeltaBusMapping.
type Mapping struct {
	ID            string
	Topic         string
	Key           string
	Type          string
	SchemaVersion string
	Payload       string
	Headers       string
	OccurredAt    string
}

// DeltaBusMapping returns the layout created by package migrations.
func DeltaBusMapping() Mapping { return deltaBusMapping }

// DebeziumMapping returns the layout of a Debezium outbox-event-router
// table (id, aggregatetype, aggregateid, type, payload).
func DebeziumMapping() Mapping { return debeziumMapping }

var deltaBusMapping = Mapping{
	ID: "id", Topic: "topic", Key: "key", Type: "type", SchemaVersion: "schema_version",
	Payload: "payload", Headers: "headers", OccurredAt: "occurred_at",
}

var debeziumMapping = Mapping{
	ID: "id", Topic: "aggregatetype", Key: "aggregateid", Type: "type", Payload: "payload",
}

// Preset returns the mapping called name: "deltabus" or "debezium".
func Preset(name string) (Mapping, bool) {
	switch name {
	case "deltabus":
		return deltaBusMapping, true
	case "debezium":
		return debeziumMapping, true
	}
	return Mapping{}, false
}

// mappingFields lists the configuration names of the fields, in event order.
var mappingFields = []string{"id", "topic", "key", "type", "schema_version", "payload", "headers", "occurred_at"}

// field returns a pointer to the field with configuration name f, or nil.
func (m *Mapping) field(f string) *string {
	switch f {
	case "id":
		return &m.ID
	case "topic":
		return &m.Topic
	case "key":
		return &m.Key
	case "type":
		return &m.Type
	case "schema_version":
		return &m.SchemaVersion
	case "payload":
		return &m.Payload
	case "headers":
		return &m.Headers
	case "occurred_at":
		return &m.OccurredAt
	}
	return nil
}

// columns returns the column names by field, in mappingFields order.
func (m Mapping) columns() [8]string {
	return [8]string{m.ID, m.Topic, m.Key, m.Type, m.SchemaVersion, m.Payload, m.Headers, m.OccurredAt}
}

// IsZero reports whether m is the zero Mapping.
func (m Mapping) IsZero() bool { return m == Mapping{} }

// orDefault returns m, or DeltaBusMapping for the zero Mapping.
func (m Mapping) orDefault() Mapping {
	if m.IsZero() {
		return deltaBusMapping
	}
	return m
}

// Required returns the field -> column pairs a table must have for m,
// optional fields included when mapped, in event order. Field names are the
// configuration names ("id", "topic", ...).
func (m Mapping) Required() [][2]string {
	m = m.orDefault()
	cols := m.columns()
	out := make([][2]string, 0, len(cols))
	for i, c := range cols {
		if c != "" {
			out = append(out, [2]string{mappingFields[i], c})
		}
	}
	return out
}

// Validate reports a mapping that lacks a required column.
func (m Mapping) Validate() error {
	m = m.orDefault()
	for _, f := range []string{"id", "topic", "key", "type", "payload"} {
		if *m.field(f) == "" {
			return fmt.Errorf("outbox mapping: field %q needs a column", f)
		}
	}
	return nil
}

// String returns m in the form ParseMapping reads.
func (m Mapping) String() string {
	m = m.orDefault()
	cols := m.columns()
	parts := make([]string, len(cols))
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		parts[i] = mappingFields[i] + "=" + c
	}
	return strings.Join(parts, ",")
}

// ParseMapping reads a mapping from a comma-separated spec. An item without
// "=" names a preset ("deltabus" or "debezium") and must come first; items
// field=column then override single fields. Fields are id, topic, key, type,
// schema_version, payload, headers and occurred_at; column "-" (or empty)
// unmaps an optional field. Without a preset the base is DeltaBusMapping:
//
//	debezium
//	topic=aggregatetype,key=aggregateid
//	debezium,occurred_at=created_at
func ParseMapping(spec string) (Mapping, error) {
	m := deltaBusMapping
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, col, ok := strings.Cut(item, "=")
		if !ok {
			p, found := Preset(item)
			if !found || i != 0 {
				return Mapping{}, fmt.Errorf("outbox mapping %q: %q is not a field=column pair or a leading preset (deltabus, debezium)", spec, item)
			}
			m = p
			continue
		}
		f, col = strings.TrimSpace(f), strings.TrimSpace(col)
		p := m.field(f)
		if p == nil {
			return Mapping{}, fmt.Errorf("outbox mapping %q: unknown field %q (fields: %s)", spec, f, strings.Join(mappingFields, ", "))
		}
		if col == "-" {
			col = ""
		}
		*p = col
	}
	if err := m.Validate(); err != nil {
		return Mapping{}, fmt.Errorf("outbox mapping %q: %w", spec, err)
	}
	return m, nil
}

// Mappings chooses the Mapping of each outbox table: Tables by
// "schema.table", Default for every other table. The zero Mappings maps
// every table with DeltaBusMapping.
type Mappings struct {
	Default Mapping
	Tables  map[string]Mapping
}

// For returns the mapping of the table schema.table.
func (ms Mappings) For(schema, table string) Mapping {
	if m, ok := ms.Tables[schema+"."+table]; ok {
		return m.orDefault()
	}
	return ms.Default.orDefault()
}

// ParseMappings builds Mappings from a default spec and per-table specs
// keyed by "schema.table", each in the ParseMapping form. An empty default
// spec means DeltaBusMapping.
func ParseMappings(defaultSpec string, tables map[string]string) (Mappings, error) {
	ms := Mappings{Default: deltaBusMapping}
	var err error
	if defaultSpec != "" {
		if ms.Default, err = ParseMapping(defaultSpec); err != nil {
			return Mappings{}, err
		}
	}
	for name, spec := range tables {
		if s, t, ok := strings.Cut(name, "."); !ok || s == "" || t == "" {
			return Mappings{}, fmt.Errorf("outbox mapping for %q: table must be written schema.table", name)
		}
		m, err := ParseMapping(spec)
		if err != nil {
			return Mappings{}, fmt.Errorf("table %s: %w", name, err)
		}
		if ms.Tables == nil {
			ms.Tables = make(map[string]Mapping)
		}
		ms.Tables[name] = m
	}
	return ms, nil
}
