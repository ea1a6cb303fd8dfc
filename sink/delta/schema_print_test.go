package delta

import (
	"bufio"
	"io"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

func printSchema(w io.Writer, pf *file.Reader) {
	schema.PrintSchema(pf.MetaData().Schema.Root(), w, 2)
}

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriter(w) }
