// Package parquetpage owns the Parquet pages DeltaBus writes and reads
// itself: the one encoder and decoder of page headers (Thrift compact
// protocol), of the RLE / bit-packed hybrid (levels, dictionary indices,
// booleans), and of PLAIN and dictionary-encoded values.
//
// Writing: File writes Parquet files of a flat schema (top-level
// BYTE_ARRAY, INT32 and INT64 columns, required or optional) straight
// from column buffers: a byte array column as one data buffer and
// offsets, a number column as a slice, NULLs as an Arrow-style validity
// bitmap. It is the encoder of sink/topic's data files, whose schemas are
// fixed; it replaces arrow-go's pqarrow.FileWriter there, which builds
// column writers, encoders and page buffers anew for every row group.
// File also writes nested schemas (NewNestedSchema: groups, MAPs and
// LISTs of BYTE_ARRAY, INT32, INT64 and BOOLEAN leaves) from their leaf
// columns already shredded into levels and values (WriteLeaves): the
// encoder of sink/delta's checkpoints, which shred each action straight
// into its leaves where pqarrow built Arrow arrays and levels from them.
//
// Reading: Reader decodes one column chunk of any file, page by page,
// into a Batch of levels and values (subscribe's event decoder, the
// readers' load of Delta checkpoints in sink/delta). It reads data pages
// v1 and v2, PLAIN and dictionary-encoded (PLAIN_DICTIONARY,
// RLE_DICTIONARY) values of BYTE_ARRAY, INT32, INT64 and BOOLEAN (PLAIN
// or RLE) leaves at any nesting, RLE levels, uncompressed, Snappy or zstd:
// what this project, arrow-go, Spark, delta-rs and DuckDB write by
// default. A page of anything else (DELTA and BYTE_STREAM_SPLIT
// encodings, GZIP, LZ4, BROTLI, encrypted chunks) is ErrUnsupported
// before any of its values is read, and the caller reads the rest of the
// chunk with arrow-go. ChunkAt finds a chunk's bytes from arrow-go's
// footer metadata, which stays the footer's reader and writer.
//
// # What a file holds
//
//   - Data pages v1, Snappy-compressed, no CRC, no page statistics; no
//     page index, bloom filter or key-value metadata.
//   - Definition levels (optional columns) in the RLE / bit-packed hybrid:
//     one RLE run for a page whose rows are all NULL or all present, else
//     the validity bitmap's bytes as one bit-packed run.
//   - Values PLAIN; or, for a column whose Spec asks for a dictionary, a
//     PLAIN dictionary page and RLE_DICTIONARY data pages (bit width at
//     least 1), unless the chunk's dictionary would pass 1 MiB, when the
//     whole chunk is PLAIN (arrow-go falls back at the same size).
//   - Pages of at most 20,480 rows and, past their first 8 rows, about
//     1 MiB of values before compression (a single larger value makes a
//     larger page); page boundaries are multiples of 8 rows.
//   - Nested schemas: PLAIN values, never a dictionary; repetition then
//     definition levels in the hybrid encoding at their bit width; pages
//     of at most 20,480 entries and about 1 MiB of values, each ending
//     before an entry that starts a row.
//   - The footer is built and serialized with arrow-go's public metadata
//     builders (format version 2, type-defined column order, created_by
//     as given), column chunks with their encodings and page encoding
//     stats. For a column whose Spec asks for statistics: null_count, and
//     min/max of the present values when any (numbers signed, byte arrays
//     as unsigned bytes; a bound over 4096 bytes is left out, as arrow-go
//     does), so readers prune row groups as before.
//
// The page headers are the only Thrift this package writes and reads
// itself (thrift.go; arrow-go's Thrift code is internal); they are checked
// against Apache Thrift's own compact-protocol reader and writer.
//
// # Guarantees
//
//   - Round trip: every value written reads back unchanged, NULLs in
//     place, with Reader, arrow-go (pqarrow and file.Reader) and DuckDB
//     (tested, including a fuzz target).
//   - Reading as others do: Reader gives exactly arrow-go's levels and
//     values for every column chunk of the other writers' files the
//     repository holds (Spark, delta-rs and kernel tables, data files and
//     checkpoints), of arrow-go's page layouts and of DuckDB's rewrites of
//     our files, or says ErrUnsupported at a page it does not decode,
//     having read a prefix of the same levels.
//   - Hostile input: a corrupt page is an error, never a panic (fuzzed);
//     a page cannot decompress past its chunk's uncompressed size in the
//     footer (at most 1 GiB), nor the pages of a chunk hold more levels
//     than the footer gives it. A Reader keeps, from chunk to chunk, one
//     decompression buffer (the largest page), the last dictionary and
//     its scratch of indices.
//   - Bounded memory: a File keeps, besides what the io.Writer keeps, only
//     the footer's metadata. Encoding a row group holds one page (and its
//     compressed copy), the chunk's dictionary (at most 1 MiB past its
//     last value) and its dictionary indices (4 bytes per row), in scratch
//     buffers shared through a pool by every File of the process, so
//     nothing is allocated per row group or page once they have grown,
//     and scratch past 8 MiB is not kept.
//   - Failures: a row group of the wrong shape is refused before anything
//     is written; an error of the io.Writer is sticky (the File is then
//     to be abandoned).
//
// Why one package: the writer's pages and the readers' pages are the same
// format, and two copies of the hybrid RLE and of page handling (the
// writer's, subscribe's own decoder, and arrow-go's column readers under
// the checkpoint reader) drifted apart in what they bounded and tested.
// Here one suite checks both directions against arrow-go, Apache Thrift,
// other writers' files and DuckDB.
package parquetpage
