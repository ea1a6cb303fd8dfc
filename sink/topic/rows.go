package topic

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/deltabus/deltabus/outbox"
)

// rowBuilders appends events to one Arrow record builder, column by column,
// without per-row allocations, and keeps the file statistics up to date.
// The builders are reused for every row group.
type rowBuilders struct {
	rb      *array.RecordBuilder
	str     [numDeadLetterCols]*array.StringBuilder
	i32     [numDeadLetterCols]*array.Int32Builder
	i64     [numDeadLetterCols]*array.Int64Builder
	ts      [numDeadLetterCols]*array.TimestampBuilder
	rows    int   // rows pending in the builders
	rawSize int64 // approximate bytes pending in the builders
	// noReserve: the next newRecord keeps no capacity (memory is tight).
	noReserve bool
}

func newRowBuilders(schema *arrow.Schema, mem memory.Allocator) *rowBuilders {
	b := &rowBuilders{rb: array.NewRecordBuilder(mem, schema)}
	for i, f := range b.rb.Fields() {
		switch f := f.(type) {
		case *array.StringBuilder:
			b.str[i] = f
		case *array.Int32Builder:
			b.i32[i] = f
		case *array.Int64Builder:
			b.i64[i] = f
		case *array.TimestampBuilder:
			b.ts[i] = f
		}
	}
	return b
}

// fixedRowSize approximates the bytes of the fixed-width columns of a row.
const fixedRowSize = 4 + 4 + 8 + 8 + 8 + 8 + 8

func (b *rowBuilders) appendEvent(e *outbox.Event, st *fileStats) {
	b.putString(colEventID, e.ID)
	b.putString(colTopic, e.Topic)
	b.putString(colKey, e.Key)
	b.putString(colType, e.Type)
	b.putInt32(colSchemaVersion, e.SchemaVersion, st)
	b.putString(colPayload, e.Payload)
	if e.Headers == nil {
		b.str[colHeaders].AppendNull()
		st.nulls[colHeaders]++
	} else {
		b.putString(colHeaders, *e.Headers)
	}
	b.putTime(colOccurredAt, e.OccurredAt, st)
	b.putInt64(colCommitLSN, e.CommitLSN, st)
	b.putInt32(colSeq, e.Seq, st)
	b.putInt64(colXid, e.Xid, st)
	b.putTime(colCommitTime, e.CommitTime, st)
	b.rows++
	b.rawSize += fixedRowSize
	st.rows++
}

func (b *rowBuilders) appendDeadLetter(d *outbox.DeadLetter, st *fileStats) {
	b.putString(colReason, d.Reason)
	b.putString(colSourceTable, d.SourceTable)
	b.putString(colRawRow, d.RawRow)
	b.appendEvent(&d.Event, st)
}

func (b *rowBuilders) putString(col int, v string) {
	b.str[col].Append(v)
	b.rawSize += int64(len(v))
}

func (b *rowBuilders) putInt32(col int, v int32, st *fileStats) {
	b.i32[col].Append(v)
	st.bound[col].add(int64(v))
}

func (b *rowBuilders) putInt64(col int, v int64, st *fileStats) {
	b.i64[col].Append(v)
	st.bound[col].add(v)
}

// putTime appends t in microseconds; the zero time means "unknown" (a dead
// letter whose timestamp could not be read) and is stored as NULL.
func (b *rowBuilders) putTime(col int, t time.Time, st *fileStats) {
	if t.IsZero() {
		b.ts[col].AppendNull()
		st.nulls[col]++
		return
	}
	us := t.UnixMicro()
	b.ts[col].Append(arrow.Timestamp(us))
	st.bound[col].add(us)
}

// Capacity kept for the next row group, so builders are not regrown from
// zero each time (regrowth was about a third of the CPU of a bulk copy);
// capped so idle writers of many topics hold little memory.
const (
	reserveRowsMax = 16 << 10
	reserveDataMax = 2 << 20
)

// newRecord moves the pending rows into a record batch and resets the
// builders for the next row group, reserving about what this one used.
// The caller releases the record.
func (b *rowBuilders) newRecord() arrow.RecordBatch {
	rows := min(b.rows, reserveRowsMax)
	var data [numDeadLetterCols]int
	for i, sb := range b.str {
		if sb != nil {
			data[i] = min(sb.DataLen()*rows/max(b.rows, 1), reserveDataMax)
		}
	}
	b.rows, b.rawSize = 0, 0
	rec := b.rb.NewRecordBatch()
	if b.noReserve {
		return rec
	}
	b.rb.Reserve(rows)
	for i, sb := range b.str {
		if sb != nil && data[i] > 0 {
			sb.ReserveData(data[i])
		}
	}
	return rec
}

func (b *rowBuilders) release() { b.rb.Release() }
