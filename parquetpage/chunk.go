package parquetpage

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// ChunkAt describes column col of row group rg, of a file of size bytes,
// as a Chunk without its Data, and says where Data lies in the file: size
// bytes from off. A chunk whose range lies outside the file, or whose
// uncompressed size passes 1 GiB, is an error; one this package does not
// read (encrypted, in another file, another physical type or codec) is
// ErrUnsupported.
func ChunkAt(rg *metadata.RowGroupMetaData, col int, fileSize int64) (c Chunk, off, size int64, err error) {
	cc, err := rg.ColumnChunk(col)
	if err != nil {
		return c, 0, 0, err
	}
	off = cc.DataPageOffset()
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < off {
		off = cc.DictionaryPageOffset()
	}
	size = cc.TotalCompressedSize()
	if off < 0 || size < 0 || off > fileSize || size > fileSize-off ||
		cc.TotalUncompressedSize() < 0 || cc.TotalUncompressedSize() > maxPageBytes {
		return c, 0, 0, fmt.Errorf("corrupt parquet footer: column chunk [%d,+%d) of %d bytes uncompressed, in a file of %d bytes",
			off, size, cc.TotalUncompressedSize(), fileSize)
	}
	if cc.CryptoMetadata() != nil || cc.FilePath() != "" {
		return c, 0, 0, ErrUnsupported
	}
	switch cc.Type() {
	case parquet.Types.ByteArray:
		c.Kind = ByteArray
	case parquet.Types.Int32:
		c.Kind = Int32
	case parquet.Types.Int64:
		c.Kind = Int64
	case parquet.Types.Boolean:
		c.Kind = Boolean
	default:
		return c, 0, 0, ErrUnsupported
	}
	switch codec := Codec(cc.Compression()); codec {
	case Uncompressed, Snappy, Zstd:
		c.Codec = codec
	default:
		return c, 0, 0, ErrUnsupported
	}
	descr := rg.Schema.Column(col)
	c.MaxDef, c.MaxRep = descr.MaxDefinitionLevel(), descr.MaxRepetitionLevel()
	c.MaxPage, c.Levels = cc.TotalUncompressedSize(), cc.NumValues()
	return c, off, size, nil
}
