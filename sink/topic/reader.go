package topic

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// EventRef is what the reconciler needs of a stored event: its identity and
// its position in the source.
type EventRef struct {
	ID         string
	Topic      string // a group's table holds many topics' rows (catalog.Placement)
	CommitLSN  int64
	Seq        int32
	OccurredAt time.Time // zero when NULL
	Source     string    // the appId of the relay that wrote it; "" when NULL
}

// readBatchRows is the number of rows decoded at a time.
const readBatchRows = 16 << 10

var refColumns = []int{colEventID, colTopic, colCommitLSN, colSeq, colOccurredAt, colSource}

// ReadEventIDs calls fn for every row of the data file of add, in file
// order, decoding only event_id, topic, commit_lsn, seq, occurred_at and
// source.
func ReadEventIDs(ctx context.Context, store storage.Store, add delta.Add, fn func(EventRef) error) error {
	return scan(ctx, store, add, eventColumnList, refColumns, func(v *recordView, i int) error {
		return fn(EventRef{
			ID:         v.str(colEventID, i),
			Topic:      v.str(colTopic, i),
			CommitLSN:  v.i64(colCommitLSN, i),
			Seq:        v.i32(colSeq, i),
			OccurredAt: v.ts(colOccurredAt, i),
			Source:     v.str(colSource, i),
		})
	})
}

var eventColumns = seq(0, numEventCols)

// ReadEvents calls fn for every row of the data file of add, in file order.
// It reads the event columns only, so it works on dead-letter files too.
func ReadEvents(ctx context.Context, store storage.Store, add delta.Add, fn func(outbox.Event) error) error {
	return scan(ctx, store, add, eventColumnList, eventColumns, func(v *recordView, i int) error {
		return fn(v.event(i))
	})
}

var deadLetterColumns = seq(0, numDeadLetterCols)

// ReadDeadLetters calls fn for every row of a dead-letter data file, in
// file order.
func ReadDeadLetters(ctx context.Context, store storage.Store, add delta.Add, fn func(outbox.DeadLetter) error) error {
	return scan(ctx, store, add, columns[:], deadLetterColumns, func(v *recordView, i int) error {
		return fn(outbox.DeadLetter{
			Event:       v.event(i),
			Reason:      v.str(colReason, i),
			SourceTable: v.str(colSourceTable, i),
			RawRow:      v.str(colRawRow, i),
		})
	})
}

func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// scan reads the file of add and calls row for every row with the wanted
// columns (positions in list, a table's column list) decoded.
func scan(ctx context.Context, store storage.Store, add delta.Add, list []column, want []int, row func(*recordView, int) error) error {
	key, err := url.PathUnescape(add.Path)
	if err != nil || strings.Contains(key, "://") || strings.HasPrefix(key, "/") {
		return fmt.Errorf("read data file: unsupported add.path %q", add.Path)
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read data file %s from %s: %w", key, store, err)
	}
	if err := scanParquet(ctx, data, list, want, row); err != nil {
		return fmt.Errorf("read data file %s: %w", key, err)
	}
	return nil
}

func scanParquet(ctx context.Context, data []byte, list []column, want []int, row func(*recordView, int) error) error {
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	present, leaves, err := presentColumns(pf, list, want)
	if err != nil {
		return err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: readBatchRows}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("open arrow reader: %w", err)
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return fmt.Errorf("open record reader: %w", err)
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		v, err := newRecordView(rec, list, present)
		if err != nil {
			return err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			if err := row(v, i); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return rr.Err()
}

// presentColumns returns the wanted columns the file has and their leaf
// indexes. A nullable column the file lacks (written before the column was
// added to the table) reads as NULL, as Delta requires.
func presentColumns(pf *file.Reader, list []column, want []int) (present, leaves []int, err error) {
	for _, c := range want {
		leaf := pf.MetaData().Schema.ColumnIndexByName(list[c].name)
		if leaf < 0 && !list[c].nullable {
			return nil, nil, fmt.Errorf("column %q missing", list[c].name)
		}
		if leaf >= 0 {
			present, leaves = append(present, c), append(leaves, leaf)
		}
	}
	return present, leaves, nil
}

// recordView gives typed access to the columns of one record batch by
// their position in a table's column list; a column the batch lacks reads
// as NULL.
type recordView struct {
	srcCol int // the position of source in the list
	strs   [numDeadLetterCols]*array.String
	ints   [numDeadLetterCols]*array.Int32
	longs  [numDeadLetterCols]*array.Int64
	times  [numDeadLetterCols]*array.Timestamp
}

func newRecordView(rec arrow.RecordBatch, list []column, want []int) (*recordView, error) {
	v := &recordView{srcCol: sourceCol(len(list) == numDeadLetterCols)}
	for _, c := range want {
		name := list[c].name
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("column %q missing from record", name)
		}
		col := rec.Column(idx[0])
		ok := false
		switch list[c].kind {
		case kindString:
			v.strs[c], ok = col.(*array.String)
		case kindInt:
			v.ints[c], ok = col.(*array.Int32)
		case kindLong:
			v.longs[c], ok = col.(*array.Int64)
		case kindTimestamp:
			v.times[c], ok = col.(*array.Timestamp)
		}
		if !ok {
			return nil, fmt.Errorf("column %q has type %s, want Delta %s", name, col.DataType(), list[c].kind.deltaType())
		}
	}
	return v, nil
}

func (v *recordView) event(i int) outbox.Event {
	return outbox.Event{
		ID:            v.str(colEventID, i),
		Topic:         v.str(colTopic, i),
		Key:           v.str(colKey, i),
		Type:          v.str(colType, i),
		SchemaVersion: v.i32(colSchemaVersion, i),
		Payload:       v.str(colPayload, i),
		Headers:       v.strPtr(colHeaders, i),
		OccurredAt:    v.ts(colOccurredAt, i),
		CommitLSN:     v.i64(colCommitLSN, i),
		Seq:           v.i32(colSeq, i),
		Xid:           v.i64(colXid, i),
		CommitTime:    v.ts(colCommitTime, i),
		Source:        v.str(v.srcCol, i),
	}
}

// str copies the value out of the Arrow buffer, so callers may keep it.
func (v *recordView) str(c, i int) string {
	if a := v.strs[c]; a != nil && a.IsValid(i) {
		return strings.Clone(a.Value(i))
	}
	return ""
}

func (v *recordView) strPtr(c, i int) *string {
	if a := v.strs[c]; a == nil || !a.IsValid(i) {
		return nil
	}
	s := strings.Clone(v.strs[c].Value(i))
	return &s
}

func (v *recordView) i32(c, i int) int32 {
	if a := v.ints[c]; a != nil && a.IsValid(i) {
		return a.Value(i)
	}
	return 0
}

func (v *recordView) i64(c, i int) int64 {
	if a := v.longs[c]; a != nil && a.IsValid(i) {
		return a.Value(i)
	}
	return 0
}

func (v *recordView) ts(c, i int) time.Time {
	a := v.times[c]
	if a == nil || !a.IsValid(i) {
		return time.Time{}
	}
	return a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit)
}
