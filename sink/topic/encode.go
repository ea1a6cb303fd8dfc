package topic

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/parquetpage"
)

// Columns written without a dictionary: unique or nearly unique values
// (ids, documents, positions, times), whose dictionary would only cost.
var noDictionary = map[string]bool{
	"event_id": true, "payload": true, "raw_row": true, "occurred_at": true,
	"commit_lsn": true, "seq": true, "xid": true, "commit_time": true,
}

// Columns written without Parquet statistics: min/max of a JSON document
// or a random uuid prunes nothing and costs a comparison per value (Delta
// keeps the statistics readers prune with).
var noStatistics = map[string]bool{"event_id": true, "payload": true, "headers": true, "raw_row": true}

// Encodings of the two schemas' data files, built once.
var (
	eventEncoding      = mustEncoding(false)
	deadLetterEncoding = mustEncoding(true)
)

// fileEncoding returns the Parquet encoding of a table's data files.
func fileEncoding(deadLetter bool) *parquetpage.Schema {
	if deadLetter {
		return deadLetterEncoding
	}
	return eventEncoding
}

// mustEncoding builds the Parquet schema of the data files the way pqarrow
// derives it from the Arrow schema (so files read as before), with each
// column's dictionary and statistics choice.
func mustEncoding(deadLetter bool) *parquetpage.Schema {
	pq, err := pqarrow.ToParquet(ArrowSchema(deadLetter), parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		panic(fmt.Sprintf("parquet schema of topic data files: %v", err))
	}
	cols := tableColumns(deadLetter)
	specs := make([]parquetpage.Spec, len(cols))
	for i, c := range cols {
		specs[i] = parquetpage.Spec{Dictionary: !noDictionary[c.name], Statistics: !noStatistics[c.name]}
	}
	s, err := parquetpage.NewSchema(pq, specs, "deltabus")
	if err != nil {
		panic(fmt.Sprintf("parquet encoding of topic data files: %v", err))
	}
	return s
}

// encode writes the pending rows as one row group of f, then recycles the
// buffers.
func (b *pendingRows) encode(f *parquetpage.File, ncols int) error {
	if b.rows == 0 {
		return nil
	}
	var cols [numDeadLetterCols]parquetpage.Column
	for i := range ncols {
		c := &b.bufs.cols[i]
		cols[i] = parquetpage.Column{Data: c.data, Offs: c.offs, I32: c.i32, I64: c.i64}
		if c.bitmap {
			cols[i].Valid = c.valid
		}
		if c.repN > 0 {
			cols[i] = parquetpage.Column{Data: []byte(c.rep), Repeat: true}
		}
	}
	err := f.WriteRowGroup(b.rows, cols[:ncols])
	b.release()
	return err
}
