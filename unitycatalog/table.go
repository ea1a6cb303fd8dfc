package unitycatalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/topicmeta"
)

// Properties DeltaBus sets on a registered table.
const (
	PropTopic    = "deltabus.topic"
	PropOwner    = "deltabus.owner"
	PropContract = "deltabus.contracts"
	PropPersonal = "deltabus.personal_columns"
	PropSources  = "deltabus.sources"
	PropVersion  = "deltabus.version" // the release that registered the table; not compared

	// A topic group's table (catalog.Group) is registered once for all
	// its topics, with PropGroup in place of PropTopic.
	PropGroup      = "deltabus.group"
	PropTopics     = "deltabus.topics"      // its registered topics, sorted, comma-separated
	PropTopicCount = "deltabus.topic_count" // how many
	PropPatterns   = "deltabus.topic_patterns"
)

// validName reports whether s is 1-255 characters of [a-zA-Z0-9_@-]. (A
// regexp with that bounded repetition costs 4 ms to compile, a tenth of
// the relay's start-up.)
func validName(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
}

// TableName is the Unity Catalog name of a topic's table: "." becomes "_"
// (UC names are [a-zA-Z0-9_@-]+).
func TableName(topic string) string { return strings.ReplaceAll(topic, ".", "_") }

// CheckName reports whether s can name a Unity Catalog catalog or schema.
func CheckName(what, s string) error {
	if !validName(s) {
		return fmt.Errorf("Unity Catalog %s name %q is invalid: use 1-255 characters of a-z, A-Z, 0-9, '_', '@' and '-'", what, s)
	}
	return nil
}

// TableFor is the registration of a topic's table in catalog.schema.
// version is DeltaBus's release.
func TableFor(in topicmeta.Info, catalog, schema, version string) (CreateTable, error) {
	if in.Shared() {
		return CreateTable{}, fmt.Errorf("topic %q shares group %s's table, registered once for the group (GroupTableFor)", in.Topic, in.Group)
	}
	if in.Version < 0 || in.SchemaString() == "" {
		return CreateTable{}, fmt.Errorf("topic %q has no table yet", in.Topic)
	}
	cols, err := Columns(in.SchemaString())
	if err != nil {
		return CreateTable{}, fmt.Errorf("topic %q: %w", in.Topic, err)
	}
	props := map[string]string{
		PropTopic:    in.Topic,
		PropOwner:    in.Owner,
		PropContract: topicmeta.ContractsText(in.Contracts),
		PropPersonal: topicmeta.PersonalText(in.PersonalColumns),
		PropSources:  sourcesText(in.Sources),
		PropVersion:  version,
	}
	return CreateTable{
		Name: TableName(in.Topic), CatalogName: catalog, SchemaName: schema,
		TableType: "EXTERNAL", DataSourceFormat: "DELTA",
		Columns: cols, StorageLocation: in.Location, Comment: in.Description, Properties: noneIfEmpty(props),
	}, nil
}

func sourcesText(ss []topicmeta.Source) string {
	srcs := make([]string, 0, len(ss))
	for _, s := range ss {
		if s.Database != "" {
			srcs = append(srcs, s.Database+" ("+s.AppID+")")
		} else {
			srcs = append(srcs, s.AppID)
		}
	}
	return strings.Join(srcs, ", ")
}

func noneIfEmpty(props map[string]string) map[string]string {
	for k, v := range props {
		if v == "" {
			props[k] = "none"
		}
	}
	return props
}

// Columns turns a Delta schemaString into Unity Catalog columns: type_json
// is each field's own JSON (compacted), metadata included, which is the
// rule of Unity Catalog OSS (a column without it is refused).
func Columns(schemaString string) ([]ColumnInfo, error) {
	var raw struct {
		Fields []json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal([]byte(schemaString), &raw); err != nil {
		return nil, fmt.Errorf("parse schemaString: %w", err)
	}
	cols := make([]ColumnInfo, 0, len(raw.Fields))
	for i, rf := range raw.Fields {
		var f delta.StructField
		if err := json.Unmarshal(rf, &f); err != nil {
			return nil, fmt.Errorf("parse schemaString field %d: %w", i, err)
		}
		name, text, err := typeOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, rf); err != nil {
			return nil, err
		}
		comment, _ := f.Metadata["comment"].(string)
		cols = append(cols, ColumnInfo{Name: f.Name, TypeText: text, TypeJSON: buf.String(), TypeName: name,
			Position: i, Nullable: f.Nullable, Comment: comment})
	}
	return cols, nil
}

// typeOf returns a Delta type's type_name and type_text (Spark's
// catalogString: long is bigint, integer is int).
func typeOf(raw json.RawMessage) (name, text string, err error) {
	var p string
	if json.Unmarshal(raw, &p) == nil {
		if strings.HasPrefix(p, "decimal(") {
			return "DECIMAL", p, nil
		}
		n, ok := primitiveNames[p]
		if !ok {
			return "", "", fmt.Errorf("type %q has no Unity Catalog type", p)
		}
		t := p
		switch p {
		case "long":
			t = "bigint"
		case "integer":
			t = "int"
		case "short":
			t = "smallint"
		case "byte":
			t = "tinyint"
		}
		return n, t, nil
	}
	var c struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", "", fmt.Errorf("type %s: %w", raw, err)
	}
	text = strings.ReplaceAll(delta.TypeString(raw), "integer", "int")
	text = strings.ReplaceAll(text, "long", "bigint")
	switch c.Type {
	case "array":
		return "ARRAY", text, nil
	case "map":
		return "MAP", text, nil
	case "struct":
		return "STRUCT", text, nil
	}
	return "", "", fmt.Errorf("type %s has no Unity Catalog type", raw)
}

var primitiveNames = map[string]string{
	"boolean": "BOOLEAN", "byte": "BYTE", "short": "SHORT", "integer": "INT", "long": "LONG",
	"float": "FLOAT", "double": "DOUBLE", "date": "DATE", "timestamp": "TIMESTAMP",
	"timestamp_ntz": "TIMESTAMP_NTZ", "string": "STRING", "binary": "BINARY", "variant": "VARIANT",
}

// Diff says how a registered table differs from the wanted one ("" when
// it does not), leaving out what the server fills (ids, owner, times) and
// PropVersion.
func Diff(got TableInfo, want CreateTable) string {
	var d []string
	if !strings.EqualFold(got.TableType, want.TableType) || !strings.EqualFold(got.DataSourceFormat, want.DataSourceFormat) {
		d = append(d, fmt.Sprintf("type %s %s", got.TableType, got.DataSourceFormat))
	}
	if got.Comment != want.Comment {
		d = append(d, "comment")
	}
	gp, wp := maps.Clone(got.Properties), maps.Clone(want.Properties)
	delete(gp, PropVersion)
	delete(wp, PropVersion)
	if !maps.Equal(gp, wp) && len(gp)+len(wp) > 0 {
		d = append(d, "properties")
	}
	if len(got.Columns) != len(want.Columns) {
		d = append(d, fmt.Sprintf("%d columns, want %d", len(got.Columns), len(want.Columns)))
	} else {
		for i, g := range got.Columns {
			w := want.Columns[i]
			if g.Name != w.Name || !strings.EqualFold(g.TypeText, w.TypeText) || g.TypeName != w.TypeName || g.Position != w.Position ||
				g.Nullable != w.Nullable || g.Comment != w.Comment || !delta.SameSchema(wrapField(g.TypeJSON), wrapField(w.TypeJSON)) ||
				!sameComment(g.TypeJSON, w.TypeJSON) {
				d = append(d, "column "+w.Name)
				break
			}
		}
	}
	return strings.Join(d, ", ")
}

// wrapField makes a field's JSON a one-field schema, for SameSchema.
func wrapField(f string) string { return `{"type":"struct","fields":[` + f + `]}` }

// sameComment compares the comments within two fields' JSON (SameSchema
// leaves comments out; a registration carries them).
func sameComment(a, b string) bool {
	var x, y delta.StructField
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	cx, _ := x.Metadata["comment"].(string)
	cy, _ := y.Metadata["comment"].(string)
	return cx == cy
}
