package topic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/deltabus/deltabus/sink/delta"
)

// ErrForeignSchema: a table's schema is not a DeltaBus topic schema, of
// this release or of an older or newer one (see the package doc).
var ErrForeignSchema = errors.New("topic: table schema is not a DeltaBus topic schema")

// schemaRelation is how a table's schema relates to the one a release
// writes.
type schemaRelation int

const (
	schemaSame    schemaRelation = iota
	schemaOlder                  // the release's schema appends nullable columns to the table's
	schemaNewer                  // the table's schema appends nullable columns to the release's
	schemaForeign                // anything else
)

// relateSchema compares a table's schemaString with the one a release
// writes (want), column by column. deadLetter guards the one structural
// ambiguity: the dead-letter schema is the event schema plus nullable
// columns, yet neither table becomes the other.
func relateSchema(table, want string, deadLetter bool) (schemaRelation, string) {
	t, err := delta.ParseSchema(table)
	if err != nil {
		return schemaForeign, err.Error()
	}
	w, err := delta.ParseSchema(want)
	if err != nil {
		return schemaForeign, err.Error()
	}
	isDeadLetter := len(t.Fields) > numCommonCols && t.Fields[numCommonCols].Name == columns[colReason].name
	if isDeadLetter != deadLetter {
		return schemaForeign, "an event table and the dead-letter table never share a path"
	}
	common := min(len(t.Fields), len(w.Fields))
	for i := range common {
		if !delta.SameField(t.Fields[i], w.Fields[i]) {
			return schemaForeign, fmt.Sprintf("column %d is %s, DeltaBus writes %s", i+1, describe(t.Fields[i]), describe(w.Fields[i]))
		}
	}
	extra, rel := w.Fields[common:], schemaOlder
	if len(t.Fields) > len(w.Fields) {
		extra, rel = t.Fields[common:], schemaNewer
	}
	if len(extra) == 0 {
		return schemaSame, ""
	}
	for _, f := range extra {
		if !f.Nullable {
			return schemaForeign, fmt.Sprintf("extra column %s is NOT NULL", describe(f))
		}
	}
	return rel, ""
}

func describe(f delta.StructField) string {
	null := ""
	if !f.Nullable {
		null = " NOT NULL"
	}
	return fmt.Sprintf("%q %s%s", f.Name, delta.TypeString(f.Type), null)
}

// CheckOrUpgrade is what the relay calls when it opens a topic table
// (deadLetter for outbox.DeadLetterTopic). It returns (false, nil) when the
// table has this release's schema, or a newer DeltaBus release's (this
// release's columns plus appended nullable ones, which rows written here
// leave NULL; a warning is logged); (true, nil) after upgrading an older
// DeltaBus schema in place (a metaData commit "ADD COLUMNS" appending this
// release's nullable columns, same table id and partitioning; data files
// are not touched, old rows read NULL there); and an error wrapping
// ErrForeignSchema, naming the first difference, for any other schema.
func CheckOrUpgrade(ctx context.Context, table *delta.Table, deadLetter bool) (upgraded bool, err error) {
	return checkOrUpgradeTo(ctx, table, SchemaString(deadLetter), deadLetter)
}

func checkOrUpgradeTo(ctx context.Context, table *delta.Table, want string, deadLetter bool) (bool, error) {
	rel, why := relateSchema(table.Metadata().SchemaString, want, deadLetter)
	switch rel {
	case schemaSame:
		return false, nil
	case schemaNewer:
		slog.Warn("topic: table has columns from a newer DeltaBus release; rows written by this one leave them NULL", "table", table.String())
		return false, nil
	case schemaForeign:
		return false, fmt.Errorf("topic table %s: %w: %s", table, ErrForeignSchema, why)
	}
	added := newColumns(table.Metadata().SchemaString, want)
	_, err := table.UpdateMetadata(ctx, delta.MetadataChange{
		Operation:           "ADD COLUMNS",
		OperationParameters: map[string]string{"columns": added},
		Update: func(m *delta.Metadata) error {
			// Run again on a winner's metaData: another relay may have
			// upgraded it already, or changed it otherwise.
			switch rel, why := relateSchema(m.SchemaString, want, deadLetter); rel {
			case schemaOlder:
				m.SchemaString = want
			case schemaForeign:
				return fmt.Errorf("%w: %s", ErrForeignSchema, why)
			}
			return nil
		},
	})
	if err != nil {
		return false, fmt.Errorf("upgrade topic table %s schema: %w", table, err)
	}
	return true, nil
}

// newColumns renders the columns want appends to table as delta-spark's
// ADD COLUMNS operationParameters value: a JSON list of {"column": field}.
func newColumns(table, want string) string {
	t, err1 := delta.ParseSchema(table)
	w, err2 := delta.ParseSchema(want)
	if err1 != nil || err2 != nil || len(w.Fields) < len(t.Fields) {
		return "[]"
	}
	var cols []map[string]delta.StructField
	for _, f := range w.Fields[len(t.Fields):] {
		cols = append(cols, map[string]delta.StructField{"column": f})
	}
	b, _ := json.Marshal(cols)
	return string(b)
}
