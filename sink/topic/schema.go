package topic

import (
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
)

// kind is the Delta type of a column; it decides the Arrow/parquet type and
// which statistics are collected.
type kind uint8

const (
	kindString    kind = iota // Delta string  / arrow utf8   / parquet BYTE_ARRAY (STRING)
	kindInt                   // Delta integer / arrow int32  / parquet INT32
	kindLong                  // Delta long    / arrow int64  / parquet INT64
	kindTimestamp             // Delta timestamp / arrow timestamp[us, UTC] / parquet INT64 TIMESTAMP(UTC, MICROS)
)

// column is one column of a topic table.
type column struct {
	name     string
	kind     kind
	nullable bool
}

// Column positions. Both schemas begin with the numCommonCols columns up
// to commit_time; an event table then has source (colSource); the
// dead-letter table has colReason, colSourceTable, colRawRow and then its
// source (colDeadLetterSource): each schema only ever appended nullable
// columns, so tables of older releases are upgraded in place. A position
// indexes the table's own column list (tableColumns), which is also how
// row buffers, statistics and readers index columns; sourceCol gives the
// source's position in either.
const (
	colEventID = iota
	colTopic
	colKey
	colType
	colSchemaVersion
	colPayload
	colHeaders
	colOccurredAt
	colCommitLSN
	colSeq
	colXid
	colCommitTime
	colReason
	colSourceTable
	colRawRow
	colDeadLetterSource
	numDeadLetterCols
)

const (
	// numCommonCols is the number of columns both schemas begin with.
	numCommonCols = colReason
	// colSource is the position of source in an event table.
	colSource = numCommonCols
	// numEventCols is the number of columns of an ordinary topic table.
	numEventCols = colSource + 1
)

// sourceCol returns the position of the source column in a table's list.
func sourceCol(deadLetter bool) int {
	if deadLetter {
		return colDeadLetterSource
	}
	return colSource
}

// sourceColumn says which relay wrote a row: its Delta txn appId, the
// identity of its source database (catalog.Source.AppID). NULL in rows
// written before releases kept it.
var sourceColumn = column{"source", kindString, true}

// columns lists the dead-letter table's columns in table order.
var columns = [numDeadLetterCols]column{
	{"event_id", kindString, false},
	{"topic", kindString, true},
	{"key", kindString, true},
	{"type", kindString, true},
	{"schema_version", kindInt, true},
	{"payload", kindString, true},
	{"headers", kindString, true},
	{"occurred_at", kindTimestamp, true},
	{"commit_lsn", kindLong, true},
	{"seq", kindInt, true},
	{"xid", kindLong, true},
	{"commit_time", kindTimestamp, true},
	{"dead_letter_reason", kindString, true},
	{"source_table", kindString, true},
	{"raw_row", kindString, true},
	sourceColumn,
}

// eventColumnList lists an event table's columns in table order.
var eventColumnList = append(append([]column{}, columns[:numCommonCols]...), sourceColumn)

// tableColumns returns the columns of an event table or of the dead-letter
// table, in table order.
func tableColumns(deadLetter bool) []column {
	if deadLetter {
		return columns[:]
	}
	return eventColumnList
}

// timestampType is the Arrow type of every timestamp column: microseconds,
// UTC, which pqarrow writes as INT64 TIMESTAMP(isAdjustedToUTC=true, MICROS).
var timestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func (k kind) deltaType() string {
	switch k {
	case kindInt:
		return "integer"
	case kindLong:
		return "long"
	case kindTimestamp:
		return "timestamp"
	default:
		return "string"
	}
}

func (k kind) arrowType() arrow.DataType {
	switch k {
	case kindInt:
		return arrow.PrimitiveTypes.Int32
	case kindLong:
		return arrow.PrimitiveTypes.Int64
	case kindTimestamp:
		return timestampType
	default:
		return arrow.BinaryTypes.String
	}
}

// SchemaString returns the Delta schemaString (JSON text) of a topic table,
// or of the dead-letter table when deadLetter is true.
func SchemaString(deadLetter bool) string {
	var b strings.Builder
	b.WriteString(`{"type":"struct","fields":[`)
	for i, c := range tableColumns(deadLetter) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":`)
		b.WriteString(strconv.Quote(c.name))
		b.WriteString(`,"type":"`)
		b.WriteString(c.kind.deltaType())
		b.WriteString(`","nullable":`)
		b.WriteString(strconv.FormatBool(c.nullable))
		b.WriteString(`,"metadata":{}}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// ArrowSchema returns the Arrow schema of the parquet data files of a topic
// table, or of the dead-letter table when deadLetter is true. Column order
// and nullability match SchemaString.
func ArrowSchema(deadLetter bool) *arrow.Schema {
	if deadLetter {
		return deadLetterSchema
	}
	return eventSchema
}

var (
	eventSchema      = newArrowSchema(false)
	deadLetterSchema = newArrowSchema(true)
)

func newArrowSchema(deadLetter bool) *arrow.Schema {
	cols := tableColumns(deadLetter)
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.kind.arrowType(), Nullable: c.nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// Table properties every topic table carries from version 0. Values are
// strings, as the Delta protocol requires.
const (
	CheckpointInterval    = "100"
	LogRetentionDuration  = "interval 30 days"
	featureAppendOnly     = "appendOnly"
	featureChangeDataFeed = "changeDataFeed"
)

// TableConfiguration returns the metaData.configuration of a topic table.
func TableConfiguration() map[string]string {
	return map[string]string{
		"delta.appendOnly":           "true",
		"delta.enableChangeDataFeed": "true",
		"delta.checkpointInterval":   CheckpointInterval,
		"delta.logRetentionDuration": LogRetentionDuration,
	}
}

// TableProtocol returns the protocol of a topic table: reader 1, writer 7
// with the appendOnly and changeDataFeed writer features.
func TableProtocol() delta.Protocol {
	return delta.Protocol{
		MinReaderVersion: 1,
		MinWriterVersion: 7,
		WriterFeatures:   []string{featureAppendOnly, featureChangeDataFeed},
	}
}

// NewTableMetadata returns the metaData and protocol actions that create the
// table of topic (version 0). The metadata id is a fresh random UUID, so
// call it once per table and commit the result. The dead-letter topic
// (outbox.DeadLetterTopic) gets the dead-letter schema.
func NewTableMetadata(topic string) (delta.Metadata, delta.Protocol) {
	name := topic
	created := time.Now().UnixMilli()
	md := delta.Metadata{
		ID:               uuid.NewString(),
		Name:             &name,
		Format:           delta.Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString:     SchemaString(topic == outbox.DeadLetterTopic),
		PartitionColumns: []string{},
		Configuration:    TableConfiguration(),
		CreatedTime:      &created,
	}
	return md, TableProtocol()
}
