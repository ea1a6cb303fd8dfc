package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// noTime marks a null occurred_at: it falls in no window.
const noTime = math.MinInt64

// fileColumns are the columns the reconciler reads from one data file:
// occurred_at in microseconds since the epoch (noTime for null) and, when
// asked for, event_id, row for row.
type fileColumns struct {
	occurred []int64
	ids      []string
	sources  []string // the source column when asked for and the file has it; nil otherwise
	topics   []string // the topic column when asked for (a group's table); nil otherwise
}

// readColumns decodes occurred_at (and event_id when withIDs, source when
// withSources and the file has it, topic when withTopics) from the parquet
// bytes of one data file, reading no other column.
func readColumns(ctx context.Context, data []byte, withIDs, withSources, withTopics bool) (*fileColumns, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	sc := pf.MetaData().Schema
	occIdx := sc.ColumnIndexByName("occurred_at")
	if occIdx < 0 {
		return nil, fmt.Errorf("parquet file has no occurred_at column")
	}
	cols := []int{occIdx}
	if withIDs {
		idIdx := sc.ColumnIndexByName("event_id")
		if idIdx < 0 {
			return nil, fmt.Errorf("parquet file has no event_id column")
		}
		cols = append(cols, idIdx)
	}
	withSources = withSources && sc.ColumnIndexByName("source") >= 0
	if withSources {
		cols = append(cols, sc.ColumnIndexByName("source"))
	}
	if withTopics {
		topicIdx := sc.ColumnIndexByName("topic")
		if topicIdx < 0 {
			return nil, fmt.Errorf("parquet file has no topic column")
		}
		cols = append(cols, topicIdx)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("open parquet columns: %w", err)
	}
	rr, err := fr.GetRecordReader(ctx, cols, nil)
	if err != nil {
		return nil, fmt.Errorf("read columns %v: %w", cols, err)
	}
	defer rr.Release()
	out := &fileColumns{occurred: make([]int64, 0, pf.NumRows())}
	if withIDs {
		out.ids = make([]string, 0, pf.NumRows())
	}
	for rr.Next() {
		if err := out.appendRecord(rr.RecordBatch(), withIDs, withSources, withTopics); err != nil {
			return nil, err
		}
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	return out, nil
}

func (fc *fileColumns) appendRecord(rec arrow.RecordBatch, withIDs, withSources, withTopics bool) error {
	sch := rec.Schema()
	for i, f := range sch.Fields() {
		switch f.Name {
		case "occurred_at":
			if err := fc.appendTimes(rec.Column(i)); err != nil {
				return err
			}
		case "event_id":
			if withIDs {
				if err := fc.appendIDs(rec.Column(i)); err != nil {
					return err
				}
			}
		case "source":
			if withSources {
				var err error
				if fc.sources, err = appendStrings(fc.sources, rec.Column(i), "source"); err != nil {
					return err
				}
			}
		case "topic":
			if withTopics {
				var err error
				if fc.topics, err = appendStrings(fc.topics, rec.Column(i), "topic"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// appendStrings appends a string column's values to list ("" for null).
func appendStrings(list []string, col arrow.Array, name string) ([]string, error) {
	s, ok := col.(*array.String)
	if !ok {
		return nil, fmt.Errorf("%s is %s, want a string", name, col.DataType())
	}
	for k := 0; k < s.Len(); k++ {
		v := ""
		if s.IsValid(k) {
			v = strings.Clone(s.Value(k))
		}
		list = append(list, v)
	}
	return list, nil
}

func (fc *fileColumns) appendTimes(col arrow.Array) error {
	ts, ok := col.(*array.Timestamp)
	if !ok {
		return fmt.Errorf("occurred_at is %s, want a timestamp", col.DataType())
	}
	unit := ts.DataType().(*arrow.TimestampType).Unit
	for i := 0; i < ts.Len(); i++ {
		if ts.IsNull(i) {
			fc.occurred = append(fc.occurred, noTime)
			continue
		}
		fc.occurred = append(fc.occurred, toMicros(int64(ts.Value(i)), unit))
	}
	return nil
}

func toMicros(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1_000_000
	case arrow.Millisecond:
		return v * 1000
	case arrow.Nanosecond:
		return floorDiv(v, 1000)
	}
	return v
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func (fc *fileColumns) appendIDs(col arrow.Array) error {
	switch s := col.(type) {
	case *array.String:
		for i := 0; i < s.Len(); i++ {
			fc.ids = append(fc.ids, strings.Clone(s.Value(i)))
		}
	case *array.LargeString:
		for i := 0; i < s.Len(); i++ {
			fc.ids = append(fc.ids, strings.Clone(s.Value(i)))
		}
	case *array.Binary:
		for i := 0; i < s.Len(); i++ {
			fc.ids = append(fc.ids, string(s.Value(i)))
		}
	default:
		return fmt.Errorf("event_id is %s, want a string", col.DataType())
	}
	return nil
}

// keep drops the rows for which want(source, topic) is false (a row
// without a source column has source "", a row whose topic was not read
// topic ""), and the source column.
func (fc *fileColumns) keep(want func(source, topic string) bool) {
	n := 0
	for i := range fc.occurred {
		src, tp := "", ""
		if fc.sources != nil {
			src = fc.sources[i]
		}
		if fc.topics != nil {
			tp = fc.topics[i]
		}
		if !want(src, tp) {
			continue
		}
		fc.occurred[n] = fc.occurred[i]
		if fc.ids != nil {
			fc.ids[n] = fc.ids[i]
		}
		if fc.topics != nil {
			fc.topics[n] = fc.topics[i]
		}
		n++
	}
	fc.occurred = fc.occurred[:n]
	if fc.ids != nil {
		fc.ids = fc.ids[:n]
	}
	if fc.topics != nil {
		fc.topics = fc.topics[:n]
	}
	fc.sources = nil
}
