package txlog

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/deltabus/deltabus/sink/delta"
)

// Table is the transaction records' table, under the store root.
const Table = "_transactions"

// DeadLetterKey is the key of Record.Topics that counts the rows of a
// transaction the relay sent to the dead-letter table.
const DeadLetterKey = "_dead_letter"

// Record is one source transaction that published events.
type Record struct {
	Source     string           `json:"source"` // the relay's appId, as in the topics' source column
	Xid        int64            `json:"xid"`
	CommitLSN  int64            `json:"commit_lsn"`
	EndLSN     int64            `json:"end_lsn"`
	CommitTime time.Time        `json:"commit_time"`
	Events     int64            `json:"events"` // the sum of Topics
	Topics     map[string]int64 `json:"topics"`
}

type column struct {
	name, delta string
	typ         arrow.DataType
}

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

var columns = []column{
	{"source", "string", arrow.BinaryTypes.String},
	{"xid", "long", arrow.PrimitiveTypes.Int64},
	{"commit_lsn", "long", arrow.PrimitiveTypes.Int64},
	{"end_lsn", "long", arrow.PrimitiveTypes.Int64},
	{"commit_time", "timestamp", tsType},
	{"events", "long", arrow.PrimitiveTypes.Int64},
	{"topics", "string", arrow.BinaryTypes.String}, // JSON object, keys sorted
}

func schemaString() string {
	type field struct {
		Name     string         `json:"name"`
		Type     string         `json:"type"`
		Nullable bool           `json:"nullable"`
		Metadata map[string]any `json:"metadata"`
	}
	fs := make([]field, len(columns))
	for i, c := range columns {
		fs[i] = field{c.name, c.delta, false, map[string]any{}}
	}
	b, _ := json.Marshal(map[string]any{"type": "struct", "fields": fs})
	return string(b)
}

func arrowSchema() *arrow.Schema {
	fs := make([]arrow.Field, len(columns))
	for i, c := range columns {
		fs[i] = arrow.Field{Name: c.name, Type: c.typ}
	}
	return arrow.NewSchema(fs, nil)
}

// newTable is version 0 of the table: protocol (1, 7, [appendOnly,
// changeDataFeed]), as the topic tables.
func newTable() (delta.Metadata, delta.Protocol) {
	name := Table
	created := time.Now().UnixMilli()
	return delta.Metadata{ID: uuid.NewString(), Name: &name,
			Format:       delta.Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: schemaString(), PartitionColumns: []string{},
			Configuration: map[string]string{"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true",
				"delta.checkpointInterval": "100", "delta.logRetentionDuration": "interval 30 days"},
			CreatedTime: &created},
		delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "changeDataFeed"}}
}

// topicsJSON renders counts as a JSON object with sorted keys, by hand:
// encoding/json per key cost single-row transactions a third of the
// relay's CPU. Keys are topic names (a-z, 0-9, '.', '_', '-'), which JSON
// needs no escape for; any other byte is escaped all the same.
func topicsJSON(m map[string]int64) string {
	var one [1]string
	keys := one[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 32*len(keys))
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, m[k], 10)
	}
	return string(append(b, '}'))
}

func appendKey(b []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			kb, _ := json.Marshal(k)
			return append(b, kb...)
		}
	}
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"')
}

// encode writes records as one Parquet file (snappy).
func encode(recs []Record) ([]byte, error) {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchema())
	defer rb.Release()
	for _, r := range recs {
		rb.Field(0).(*array.StringBuilder).Append(r.Source)
		rb.Field(1).(*array.Int64Builder).Append(r.Xid)
		rb.Field(2).(*array.Int64Builder).Append(r.CommitLSN)
		rb.Field(3).(*array.Int64Builder).Append(r.EndLSN)
		rb.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(r.CommitTime.UnixMicro()))
		rb.Field(5).(*array.Int64Builder).Append(r.Events)
		rb.Field(6).(*array.StringBuilder).Append(topicsJSON(r.Topics))
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	// No dictionaries: every xid and LSN is unique, and the dictionary
	// encoder hashed each (most of a single-row drain's cost of records).
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy), parquet.WithCreatedBy("deltabus"),
		parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor("source", true))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// stats are the file's Delta statistics: exact bounds of source (one
// source per file), commit_lsn and commit_time, so a reader of one source
// or one range skips other files unread.
func stats(recs []Record) string {
	first, last := recs[0], recs[len(recs)-1]
	minT, maxT := first.CommitTime, first.CommitTime
	for _, r := range recs {
		minT, maxT = minTime(minT, r.CommitTime), maxTime(maxT, r.CommitTime)
	}
	f := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	ceil := func(t time.Time) string { return f(t.Add(999 * time.Microsecond).Truncate(time.Millisecond)) }
	zero := map[string]int{}
	for _, c := range columns {
		zero[c.name] = 0
	}
	b, _ := json.Marshal(map[string]any{
		"numRecords": len(recs),
		"minValues":  map[string]any{"source": first.Source, "commit_lsn": first.CommitLSN, "commit_time": f(minT.Truncate(time.Millisecond))},
		"maxValues":  map[string]any{"source": first.Source, "commit_lsn": last.CommitLSN, "commit_time": ceil(maxT)},
		"nullCount":  zero,
	})
	return string(b)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
