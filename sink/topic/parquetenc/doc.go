// Package parquetenc writes Parquet files of a flat schema (top-level
// BYTE_ARRAY, INT32 and INT64 columns, required or optional) straight from
// column buffers: a byte array column as one data buffer and offsets, a
// number column as a slice, NULLs as an Arrow-style validity bitmap. It is
// the encoder of sink/topic's data files, whose schemas are fixed; it
// replaces arrow-go's pqarrow.FileWriter there, which builds column
// writers, encoders and page buffers anew for every row group.
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
//   - The footer is built and serialized with arrow-go's public metadata
//     builders (format version 2, type-defined column order, created_by
//     as given), column chunks with their encodings and page encoding
//     stats. For a column whose Spec asks for statistics: null_count, and
//     min/max of the present values when any (numbers signed, byte arrays
//     as unsigned bytes; a bound over 4096 bytes is left out, as arrow-go
//     does), so readers prune row groups as before.
//
// The page headers are the only Thrift this package writes itself
// (thrift.go; arrow-go's Thrift code is internal); they are checked
// against Apache Thrift's own compact-protocol reader.
//
// # Guarantees
//
//   - Round trip: every value written reads back unchanged, NULLs in
//     place, with arrow-go (pqarrow and file.Reader) and DuckDB (tested,
//     including a fuzz target).
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
package parquetenc
