package delta

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// maxUncompressedChunk bounds the decoded size of one column chunk, so a
// corrupt footer cannot make the reader allocate without limit.
const maxUncompressedChunk = 1 << 30

// openParquet opens a parquet file held in memory after checking that the
// footer's column-chunk ranges lie inside the file. arrow-go builds column
// readers on goroutines of its own, where a panic on a corrupt range could
// not be recovered; rejecting such footers first keeps corrupt files an error.
func openParquet(data []byte) (*file.Reader, error) {
	return openParquetAt(bytes.NewReader(data), int64(len(data)))
}

// openParquetAt is openParquet of a file of size bytes read from src
// where needed (its footer, then the column chunks asked for).
func openParquetAt(src parquet.ReaderAtSeeker, size int64) (*file.Reader, error) {
	pf, err := file.NewParquetReader(src)
	if err != nil {
		return nil, err
	}
	if err := checkChunks(pf, size); err != nil {
		pf.Close()
		return nil, err
	}
	hideArrowSchema(pf)
	return pf, nil
}

// hideArrowSchema renames the embedded ARROW:schema footer entry so pqarrow
// derives column types from the parquet schema alone. The entry is an
// unvalidated flatbuffer: a corrupt one makes arrow-go allocate without
// bound. Delta's types are all expressible in parquet logical types.
func hideArrowSchema(pf *file.Reader) {
	for _, kv := range pf.MetaData().KeyValueMetadata() {
		if kv != nil && kv.Key == "ARROW:schema" {
			kv.Key = "ignored:ARROW:schema"
		}
	}
}

func checkChunks(pf *file.Reader, size int64) error {
	md := pf.MetaData()
	if pf.NumRows() < 0 {
		return fmt.Errorf("corrupt parquet footer: negative row count")
	}
	ncols := md.Schema.NumColumns()
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		rgm := md.RowGroup(rg)
		if rgm.NumColumns() != ncols || rgm.NumRows() < 0 {
			return fmt.Errorf("corrupt parquet footer: row group %d", rg)
		}
		for c := 0; c < ncols; c++ {
			cc, err := rgm.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("corrupt parquet footer: row group %d column %d: %w", rg, c, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			n := cc.TotalCompressedSize()
			if start < 0 || n < 0 || start > size || n > size-start || cc.NumValues() < 0 ||
				cc.TotalUncompressedSize() < 0 || cc.TotalUncompressedSize() > maxUncompressedChunk ||
				cc.DictionaryPageOffset() < 0 || cc.DictionaryPageOffset() > size {
				return fmt.Errorf("corrupt parquet footer: row group %d column %d range [%d,+%d) outside file of %d bytes", rg, c, start, n, size)
			}
		}
	}
	return nil
}
