package txlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/deltabus/deltabus/parquetpage"
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
// changeDataFeed]), as the topic tables; files replaced by compaction are
// kept one day (Compact).
func newTable() (delta.Metadata, delta.Protocol) {
	name := Table
	created := time.Now().UnixMilli()
	return delta.Metadata{ID: uuid.NewString(), Name: &name,
			Format:       delta.Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: schemaString(), PartitionColumns: []string{},
			Configuration: map[string]string{"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true",
				"delta.checkpointInterval": "100", "delta.logRetentionDuration": "interval 30 days",
				// A tombstone of every file compaction replaces is kept in
				// the writer's memory for this long: a day of them, not
				// the topics' week.
				"delta.deletedFileRetentionDuration": "interval 1 day"},
			CreatedTime: &created},
		delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "changeDataFeed"}}
}

// Count is how many of a transaction's rows one table took.
type Count struct {
	Topic string
	N     int64
}

// AppendTopics appends counts to b as the topics column's JSON object,
// keys sorted (counts is sorted in place), by hand: encoding/json per key
// cost single-row transactions a third of the relay's CPU. Keys are topic
// names (a-z, 0-9, '.', '_', '-'), which JSON needs no escape for; any
// other byte is escaped all the same.
func AppendTopics(b []byte, counts []Count) []byte {
	if len(counts) > 1 {
		slices.SortFunc(counts, func(x, y Count) int { return strings.Compare(x.Topic, y.Topic) })
	}
	b = append(b, '{')
	for i, c := range counts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, c.Topic)
		b = append(b, ':')
		b = strconv.AppendInt(b, c.N, 10)
	}
	return append(b, '}')
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

// Entry is a transaction's record as the relay hands it to Writer.Commit:
// its source is the writer's, its topics already rendered (AppendTopics),
// so that a record costs no map and no per-key work at commit.
type Entry struct {
	Xid, CommitLSN, EndLSN int64
	CommitTime             int64 // microseconds since the Unix epoch
	Events                 int64 // the sum of the topics' counts
	Topics                 string
}

// encoding is how the table's files are encoded: Parquet pages written by
// parquetpage (the codec topic files use; pqarrow built Arrow arrays and
// encoders for every commit, most of what a record cost a single-row
// drain). source and topics are dictionary-encoded (one source per file;
// a few shapes of topics), the rest plain; every column but topics has
// statistics.
var encoding = mustEncoding()

func mustEncoding() *parquetpage.Schema {
	pq, err := pqarrow.ToParquet(arrowSchema(), parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		panic(fmt.Sprintf("parquet schema of %s: %v", Table, err))
	}
	specs := make([]parquetpage.Spec, len(columns))
	for i, c := range columns {
		specs[i] = parquetpage.Spec{Dictionary: c.typ == arrow.BinaryTypes.String, Statistics: c.name != "topics"}
	}
	s, err := parquetpage.NewSchema(pq, specs, "deltabus")
	if err != nil {
		panic(fmt.Sprintf("parquet encoding of %s: %v", Table, err))
	}
	return s
}

// encoder holds a Writer's column buffers and file buffer from one commit
// to the next.
type encoder struct {
	cols [7]parquetpage.Column
	buf  bytes.Buffer
}

// keptFileBytes bounds the file buffer an encoder keeps between commits.
const keptFileBytes = 4 << 20

// encode writes source's entries as one Parquet file (snappy). The bytes
// are the encoder's until its next call.
func (e *encoder) encode(source string, ents []Entry) ([]byte, error) {
	c := &e.cols
	for i := range c {
		c[i] = parquetpage.Column{Data: c[i].Data[:0], Offs: append(c[i].Offs[:0], 0), I64: c[i].I64[:0]}
	}
	c[0] = parquetpage.Column{Data: []byte(source), Repeat: true} // one source per file
	for i := range ents {
		en := &ents[i]
		c[1].I64 = append(c[1].I64, en.Xid)
		c[2].I64 = append(c[2].I64, en.CommitLSN)
		c[3].I64 = append(c[3].I64, en.EndLSN)
		c[4].I64 = append(c[4].I64, en.CommitTime)
		c[5].I64 = append(c[5].I64, en.Events)
		c[6].Data = append(c[6].Data, en.Topics...)
		c[6].Offs = append(c[6].Offs, int32(len(c[6].Data)))
	}
	if e.buf.Cap() > keptFileBytes {
		e.buf = bytes.Buffer{}
	}
	e.buf.Reset()
	f := parquetpage.NewFile(encoding, &e.buf)
	if err := f.WriteRowGroup(len(ents), c[:]); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// stats are the file's Delta statistics: exact bounds of source (one
// source per file), commit_lsn and commit_time, so a reader of one source
// or one range skips other files unread.
func stats(source string, ents []Entry) string {
	minT, maxT := ents[0].CommitTime, ents[0].CommitTime
	for _, e := range ents {
		minT, maxT = min(minT, e.CommitTime), max(maxT, e.CommitTime)
	}
	f := func(us int64) string { return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000Z") }
	floor := func(us int64) int64 { return us - ((us%1000)+1000)%1000 }
	zero := map[string]int{}
	for _, c := range columns {
		zero[c.name] = 0
	}
	b, _ := json.Marshal(map[string]any{
		"numRecords": len(ents),
		"minValues":  map[string]any{"source": source, "commit_lsn": ents[0].CommitLSN, "commit_time": f(floor(minT))},
		"maxValues":  map[string]any{"source": source, "commit_lsn": ents[len(ents)-1].CommitLSN, "commit_time": f(floor(maxT + 999))},
		"nullCount":  zero,
	})
	return string(b)
}
