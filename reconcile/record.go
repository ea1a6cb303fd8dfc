package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// ReconciliationTable is the Delta table, under the store root, that every
// recorded run appends one row per (topic, window) to.
const ReconciliationTable = "_reconciliation"

type recCol struct {
	name, delta string
	typ         arrow.DataType
	nullable    bool
}

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

var recColumns = []recCol{
	{"run_id", "string", arrow.BinaryTypes.String, false},
	{"run_at", "timestamp", tsType, false},
	{"topic", "string", arrow.BinaryTypes.String, false},
	{"window_start", "timestamp", tsType, false},
	{"window_end", "timestamp", tsType, false},
	{"status", "string", arrow.BinaryTypes.String, false},
	{"check", "string", arrow.BinaryTypes.String, true},
	{"source_count", "long", arrow.PrimitiveTypes.Int64, false},
	{"log_count", "long", arrow.PrimitiveTypes.Int64, true},
	{"distinct_count", "long", arrow.PrimitiveTypes.Int64, true},
	{"missing", "long", arrow.PrimitiveTypes.Int64, false},
	{"duplicates", "long", arrow.PrimitiveTypes.Int64, false},
	{"unexpected", "long", arrow.PrimitiveTypes.Int64, false},
	{"cleaned", "long", arrow.PrimitiveTypes.Int64, false},
	{"sample_missing", "string", arrow.BinaryTypes.String, false},    // JSON array
	{"sample_duplicates", "string", arrow.BinaryTypes.String, false}, // JSON array
	{"sample_unexpected", "string", arrow.BinaryTypes.String, false}, // JSON array
	{"error", "string", arrow.BinaryTypes.String, true},              // error or unreadable files
	// Added later, nullable at the end: tables recorded before gain them
	// (upgradeRecTable) and their older rows read NULL.
	{"repaired", "long", arrow.PrimitiveTypes.Int64, true},  // missing events `reconcile --repair` published
	{"repair_id", "string", arrow.BinaryTypes.String, true}, // the republish run that did
}

func recSchemaString() string {
	type field struct {
		Name     string         `json:"name"`
		Type     string         `json:"type"`
		Nullable bool           `json:"nullable"`
		Metadata map[string]any `json:"metadata"`
	}
	fs := make([]field, len(recColumns))
	for i, c := range recColumns {
		fs[i] = field{c.name, c.delta, c.nullable, map[string]any{}}
	}
	b, _ := json.Marshal(map[string]any{"type": "struct", "fields": fs})
	return string(b)
}

func recArrowSchema() *arrow.Schema {
	fs := make([]arrow.Field, len(recColumns))
	for i, c := range recColumns {
		fs[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.nullable}
	}
	return arrow.NewSchema(fs, nil)
}

// Record appends the report's results to the _reconciliation table
// (creating it, protocol (1,7,[appendOnly,changeDataFeed]), on first use)
// and returns the committed version. Skipped windows are not recorded.
func Record(ctx context.Context, root storage.Store, rep *Report) (int64, error) {
	if len(rep.Results) == 0 {
		return -1, nil
	}
	st := storage.Sub(root, ReconciliationTable)
	data, err := encodeResults(rep)
	if err != nil {
		return -1, fmt.Errorf("encode reconciliation rows: %w", err)
	}
	name := fmt.Sprintf("part-00000-%s.c000.zstd.parquet", uuid.NewString()) // encodeResults writes zstd
	if err := st.Put(ctx, name, data); err != nil {
		return -1, fmt.Errorf("write %s/%s: %w", ReconciliationTable, name, err)
	}
	add := delta.Add{Path: name, PartitionValues: map[string]*string{}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: recStats(rep)}
	create := newRecTable()
	// A table an earlier release created has fewer columns: it exists,
	// and is upgraded below.
	if err := delta.CreateTable(ctx, st, *create[1].Metadata, *create[0].Protocol, nil); err != nil && !errors.Is(err, delta.ErrTableExists) {
		return -1, fmt.Errorf("create %s: %w", ReconciliationTable, err)
	}
	tbl, err := delta.OpenTable(ctx, st, delta.Options{EngineInfo: "deltabus-reconcile"})
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", ReconciliationTable, err)
	}
	if err := upgradeRecTable(ctx, tbl); err != nil {
		return -1, err
	}
	// delta.Table.Commit retries lost races and writes checkpoints at the
	// table's interval, so the history of checks stays cheap to read.
	v, err := tbl.Commit(ctx, delta.CommitActions{Adds: []delta.Add{add}, Operation: "WRITE"})
	if err != nil {
		return -1, fmt.Errorf("commit to %s: %w", ReconciliationTable, err)
	}
	return v, nil
}

func newRecTable() []delta.Action {
	name := ReconciliationTable
	created := time.Now().UnixMilli()
	return []delta.Action{
		{Protocol: &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "changeDataFeed"}}},
		{Metadata: &delta.Metadata{ID: uuid.NewString(), Name: &name,
			Format:       delta.Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: recSchemaString(), PartitionColumns: []string{},
			Configuration: map[string]string{"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true", "delta.checkpointInterval": "100"},
			CreatedTime:   &created}},
	}
}

// appendCommit blind-appends actions at the next version with put-if-absent,
// creating the table (create()'s actions at version 0) when there is none.
// Appends never conflict, so a lost race just moves to the next version.
func appendCommit(ctx context.Context, st storage.Store, acts []delta.Action, create func() []delta.Action) (int64, error) {
	for attempt := 0; attempt < 20; attempt++ {
		next := int64(0)
		snap, err := delta.LoadSnapshot(ctx, st, -1)
		switch {
		case errors.Is(err, delta.ErrNoTable):
		case err != nil:
			return -1, err
		default:
			next = snap.Version + 1
		}
		all := []delta.Action{{CommitInfo: commitInfo()}}
		if next == 0 {
			all = append(all, create()...)
		}
		all = append(all, acts...)
		body, err := delta.EncodeCommit(all)
		if err != nil {
			return -1, err
		}
		err = st.PutIfAbsent(ctx, delta.CommitKey(next), body)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, storage.ErrExists) {
			return -1, fmt.Errorf("put commit %d: %w", next, err)
		}
	}
	return -1, errors.New("lost 20 commit races in a row")
}

func commitInfo() *delta.CommitInfo {
	ts := time.Now().UnixMilli()
	op, _ := json.Marshal("WRITE")
	eng, _ := json.Marshal("deltabus-reconcile")
	mode, _ := json.Marshal(map[string]string{"mode": "Append"})
	return &delta.CommitInfo{Timestamp: &ts, Raw: map[string]json.RawMessage{
		"operation": op, "engineInfo": eng, "operationParameters": mode, "isBlindAppend": json.RawMessage("true")}}
}

func recStats(rep *Report) string {
	minW, maxW := rep.Results[0].Window.Start, rep.Results[0].Window.End
	for _, r := range rep.Results {
		if r.Window.Start.Before(minW) {
			minW = r.Window.Start
		}
		if r.Window.End.After(maxW) {
			maxW = r.Window.End
		}
	}
	f := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	ceil := func(t time.Time) string { return f(t.Add(999 * time.Microsecond).Truncate(time.Millisecond)) }
	b, _ := json.Marshal(map[string]any{
		"numRecords": len(rep.Results),
		"minValues":  map[string]string{"run_at": f(rep.RunAt.Truncate(time.Millisecond)), "window_start": f(minW.Truncate(time.Millisecond))},
		"maxValues":  map[string]string{"run_at": ceil(rep.RunAt), "window_start": ceil(maxW)},
	})
	return string(b)
}

func encodeResults(rep *Report) ([]byte, error) {
	rb := array.NewRecordBuilder(memory.DefaultAllocator, recArrowSchema())
	defer rb.Release()
	for _, r := range rep.Results {
		appendResult(rb, rep, r)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	return delta.EncodeParquet(rec)
}

func appendResult(rb *array.RecordBuilder, rep *Report, r Result) {
	str := func(i int, s string) { rb.Field(i).(*array.StringBuilder).Append(s) }
	ts := func(i int, t time.Time) { rb.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro())) }
	i64 := func(i int, v int64) { rb.Field(i).(*array.Int64Builder).Append(v) }
	opt := func(i int, p *int64) {
		if p == nil {
			rb.Field(i).AppendNull()
		} else {
			i64(i, *p)
		}
	}
	str(0, rep.RunID)
	ts(1, rep.RunAt)
	str(2, r.Topic)
	ts(3, r.Window.Start)
	ts(4, r.Window.End)
	str(5, string(r.Status))
	str(6, r.Check)
	i64(7, r.SourceCount)
	opt(8, r.LogCount)
	opt(9, r.DistinctCount)
	i64(10, r.MissingCount)
	i64(11, r.DuplicateCount)
	i64(12, r.UnexpectedCount)
	i64(13, r.Cleaned)
	dups := make([]string, 0, len(r.Duplicates))
	for _, d := range r.Duplicates {
		dups = append(dups, d.ID)
	}
	str(14, jsonList(r.Missing))
	str(15, jsonList(dups))
	str(16, jsonList(r.Unexpected))
	errText := r.Error
	if len(r.Unreadable) > 0 {
		b, _ := json.Marshal(r.Unreadable)
		errText = "unreadable: " + string(b)
	}
	if errText == "" {
		rb.Field(17).AppendNull()
	} else {
		str(17, errText)
	}
	if r.Repaired == 0 {
		rb.Field(18).AppendNull()
		rb.Field(19).AppendNull()
	} else {
		i64(18, r.Repaired)
		str(19, r.RepairID)
	}
}

// upgradeRecTable adds the columns this release records to a table an
// earlier one created (nullable, at the end: delta.UpdateMetadata).
func upgradeRecTable(ctx context.Context, tbl *delta.Table) error {
	if strings.Contains(tbl.Metadata().SchemaString, `"repair_id"`) {
		return nil
	}
	_, err := tbl.UpdateMetadata(ctx, delta.MetadataChange{Operation: "ADD COLUMNS",
		Update: func(m *delta.Metadata) error {
			if !strings.Contains(m.SchemaString, `"repair_id"`) {
				m.SchemaString = recSchemaString()
			}
			return nil
		}})
	if err != nil {
		return fmt.Errorf("add this release's columns to %s: %w", ReconciliationTable, err)
	}
	return nil
}

func jsonList(ids []string) string {
	if len(ids) > DefaultSampleIDs {
		ids = ids[:DefaultSampleIDs]
	}
	if ids == nil {
		ids = []string{}
	}
	b, _ := json.Marshal(ids)
	return string(b)
}
