package republish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// AuditTable is the Delta table, under the store root, that every run
// appends one row per event to: what became of it (republished, present,
// refused with the reason), in which table version, by which run, who ran
// it and when. Readable by any Delta reader (DuckDB, Spark); `relay
// deadletter list` and `show` read a dead letter's latest reason there.
const AuditTable = "_republished"

type auditCol struct {
	name, delta string
	typ         arrow.DataType
	nullable    bool
}

var tsUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

var auditColumns = []auditCol{
	{"run_id", "string", arrow.BinaryTypes.String, false},
	{"kind", "string", arrow.BinaryTypes.String, false},
	{"actor", "string", arrow.BinaryTypes.String, false},
	{"run_at", "timestamp", tsUTC, false},
	{"topic", "string", arrow.BinaryTypes.String, false},
	{"event_id", "string", arrow.BinaryTypes.String, false},
	{"source", "string", arrow.BinaryTypes.String, false},
	{"commit_lsn", "long", arrow.PrimitiveTypes.Int64, false},
	{"seq", "integer", arrow.PrimitiveTypes.Int32, false},
	{"outcome", "string", arrow.BinaryTypes.String, false},
	{"reason", "string", arrow.BinaryTypes.String, true},
	{"table", "string", arrow.BinaryTypes.String, true},
	{"version", "long", arrow.PrimitiveTypes.Int64, true},
}

// AuditRow is one row of the AuditTable.
type AuditRow struct {
	RunID, Kind, Actor string
	RunAt              time.Time
	Outcome
}

func auditSchema() (string, *arrow.Schema) {
	type field struct {
		Name     string         `json:"name"`
		Type     string         `json:"type"`
		Nullable bool           `json:"nullable"`
		Metadata map[string]any `json:"metadata"`
	}
	fs := make([]field, len(auditColumns))
	afs := make([]arrow.Field, len(auditColumns))
	for i, c := range auditColumns {
		fs[i] = field{c.name, c.delta, c.nullable, map[string]any{}}
		afs[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.nullable}
	}
	b, _ := json.Marshal(map[string]any{"type": "struct", "fields": fs})
	return string(b), arrow.NewSchema(afs, nil)
}

// recordOutcomes appends the run's outcomes to the AuditTable, creating it
// (protocol (1,7,[appendOnly,changeDataFeed])) on first use.
func recordOutcomes(ctx context.Context, root storage.Store, res *Result) error {
	st := storage.Sub(root, AuditTable)
	rows := 0
	for _, o := range res.Outcomes {
		if o.Status != "" {
			rows++
		}
	}
	if rows == 0 {
		return nil
	}
	data, err := encodeOutcomes(res)
	if err != nil {
		return fmt.Errorf("encode %s rows: %w", AuditTable, err)
	}
	name := fmt.Sprintf("part-00000-%s.c000.zstd.parquet", uuid.NewString())
	if err := st.Put(ctx, name, data); err != nil {
		return fmt.Errorf("write %s/%s: %w", AuditTable, name, err)
	}
	schema, _ := auditSchema()
	created := time.Now().UnixMilli()
	tableName := AuditTable
	meta := delta.Metadata{ID: uuid.NewString(), Name: &tableName, Format: delta.Format{Provider: "parquet", Options: map[string]string{}},
		SchemaString: schema, PartitionColumns: []string{}, CreatedTime: &created,
		Configuration: map[string]string{"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true", "delta.checkpointInterval": "100"}}
	proto := delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "changeDataFeed"}}
	if err := delta.CreateTable(ctx, st, meta, proto, nil); err != nil && !errors.Is(err, delta.ErrTableExists) {
		return fmt.Errorf("create %s: %w", AuditTable, err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{EngineInfo: "deltabus-republish"})
	if err != nil {
		return fmt.Errorf("open %s: %w", AuditTable, err)
	}
	stats, _ := json.Marshal(map[string]any{"numRecords": rows,
		"minValues": map[string]string{"run_at": statTime(res.Run.Started, false)},
		"maxValues": map[string]string{"run_at": statTime(res.Run.Started, true)}})
	add := delta.Add{Path: name, PartitionValues: map[string]*string{}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: string(stats)}
	if _, err := tbl.Commit(ctx, delta.CommitActions{Adds: []delta.Add{add}, Operation: "WRITE"}); err != nil {
		return fmt.Errorf("commit to %s: %w", AuditTable, err)
	}
	return nil
}

// statTime renders a timestamp bound: milliseconds, the maximum rounded up.
func statTime(t time.Time, up bool) string {
	if up {
		t = t.Add(999 * time.Microsecond)
	}
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}

func encodeOutcomes(res *Result) ([]byte, error) {
	_, schema := auditSchema()
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	str := func(i int, s string) { rb.Field(i).(*array.StringBuilder).Append(s) }
	opt := func(i int, s string) {
		if s == "" {
			rb.Field(i).AppendNull()
		} else {
			str(i, s)
		}
	}
	for _, o := range res.Outcomes {
		if o.Status == "" {
			continue // not reached: the run stopped before it
		}
		str(0, res.Run.ID)
		str(1, res.Run.Kind)
		str(2, res.Run.Actor)
		rb.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(res.Run.Started.UnixMicro()))
		str(4, o.Topic)
		str(5, o.ID)
		str(6, o.Source)
		rb.Field(7).(*array.Int64Builder).Append(o.CommitLSN)
		rb.Field(8).(*array.Int32Builder).Append(o.Seq)
		str(9, string(o.Status))
		opt(10, o.Reason)
		opt(11, o.Table)
		if o.Version < 0 {
			rb.Field(12).AppendNull()
		} else {
			rb.Field(12).(*array.Int64Builder).Append(o.Version)
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	return delta.EncodeParquet(rec)
}

// ReadAudit calls fn with every row of the AuditTable, file by file (in
// no particular order: sort by RunAt for history); an absent table has no
// rows.
func ReadAudit(ctx context.Context, root storage.Store, fn func(AuditRow) error) error {
	st := storage.Sub(root, AuditTable)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", AuditTable, err)
	}
	for _, a := range snap.Files {
		data, err := st.Get(ctx, a.Path)
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", AuditTable, a.Path, err)
		}
		if err := readAuditFile(ctx, data, fn); err != nil {
			return fmt.Errorf("%s/%s: %w", AuditTable, a.Path, err)
		}
	}
	return nil
}

func readAuditFile(ctx context.Context, data []byte, fn func(AuditRow) error) error {
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		cols := map[string]arrow.Array{}
		for i, f := range rec.Schema().Fields() {
			cols[f.Name] = rec.Column(i)
		}
		s := func(name string, i int) string {
			if a, ok := cols[name].(*array.String); ok && a.IsValid(i) {
				return a.Value(i)
			}
			return ""
		}
		i64 := func(name string, i int, def int64) int64 {
			if a, ok := cols[name].(*array.Int64); ok && a.IsValid(i) {
				return a.Value(i)
			}
			return def
		}
		for i := range int(rec.NumRows()) {
			r := AuditRow{RunID: s("run_id", i), Kind: s("kind", i), Actor: s("actor", i),
				Outcome: Outcome{ID: s("event_id", i), Topic: s("topic", i), Source: s("source", i), CommitLSN: i64("commit_lsn", i, 0),
					Status: Status(s("outcome", i)), Reason: s("reason", i), Table: s("table", i), Version: i64("version", i, -1)}}
			if a, ok := cols["run_at"].(*array.Timestamp); ok && a.IsValid(i) {
				r.RunAt = time.UnixMicro(int64(a.Value(i))).UTC()
			}
			if a, ok := cols["seq"].(*array.Int32); ok && a.IsValid(i) {
				r.Seq = a.Value(i)
			}
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return rr.Err()
}
