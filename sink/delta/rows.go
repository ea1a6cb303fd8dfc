package delta

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/storage"
)

// EncodeParquet writes rec as one zstd-compressed Parquet file: the data
// file of a small internal table (reconcile's results, the republish
// audit), which ReadParquetRows reads back.
func EncodeParquet(rec arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithCreatedBy("deltabus"))
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadParquetRows calls fn for every row of the parquet file at key (a store
// key: a log path already URL-decoded), as a map from top-level column name
// to value (see arrowValue for the value types). Timestamps become time.Time
// from INT96, MILLIS, MICROS or NANOS without int64-nanosecond overflow (year
// 9999 is fine); dates become Date, decimals Decimal, lists []any, structs
// and string-keyed maps map[string]any.
func ReadParquetRows(ctx context.Context, store storage.Store, key string, fn func(row map[string]any) error) (err error) {
	data, err := store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read parquet %s: %w", key, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read parquet %s: corrupt file: %v", key, r)
		}
	}()
	if err := readRows(ctx, data, fn); err != nil {
		return fmt.Errorf("read parquet %s: %w", key, err)
	}
	return nil
}

func readRows(ctx context.Context, data []byte, fn func(map[string]any) error) error {
	pf, err := openParquet(data)
	if err != nil {
		return err
	}
	defer pf.Close()
	int96, err := readInt96Columns(pf)
	if err != nil {
		return err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	var leaves []int
	for _, f := range fr.Manifest.Fields {
		if _, ok := int96[f.Field.Name]; !ok {
			leaves = appendAllLeaves(leaves, f)
		}
	}
	row := int64(0)
	emit := func(m map[string]any) error {
		for name, vals := range int96 {
			m[name] = vals[row]
		}
		row++
		return fn(m)
	}
	if len(leaves) == 0 {
		for row < pf.NumRows() {
			if err := emit(map[string]any{}); err != nil {
				return err
			}
		}
		return nil
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			m := make(map[string]any, int(rec.NumCols())+len(int96))
			for c := 0; c < int(rec.NumCols()); c++ {
				m[rec.ColumnName(c)] = arrowValue(rec.Column(c), i)
			}
			if err := emit(m); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return rr.Err()
}

func appendAllLeaves(out []int, f pqarrow.SchemaField) []int {
	if f.IsLeaf() {
		return append(out, f.ColIndex)
	}
	for _, c := range f.Children {
		out = appendAllLeaves(out, c)
	}
	return out
}

// readInt96Columns decodes top-level INT96 columns to time.Time with the
// low-level reader: pqarrow converts INT96 to int64 nanoseconds, which
// cannot hold years past 2262.
func readInt96Columns(pf *file.Reader) (map[string][]any, error) {
	out := map[string][]any{}
	sc := pf.MetaData().Schema
	for ci := 0; ci < sc.NumColumns(); ci++ {
		col := sc.Column(ci)
		if col.PhysicalType() != parquet.Types.Int96 {
			continue
		}
		path := col.ColumnPath()
		if len(path) != 1 || col.MaxRepetitionLevel() != 0 {
			return nil, fmt.Errorf("nested INT96 column %s is not supported", strings.Join(path, "."))
		}
		vals := make([]any, 0, pf.NumRows())
		for rg := 0; rg < pf.NumRowGroups(); rg++ {
			cr, err := pf.RowGroup(rg).Column(ci)
			if err != nil {
				return nil, err
			}
			r, ok := cr.(*file.Int96ColumnChunkReader)
			if !ok {
				return nil, fmt.Errorf("column %s: unexpected reader %T", path[0], cr)
			}
			if vals, err = appendInt96(vals, r, col.MaxDefinitionLevel()); err != nil {
				return nil, fmt.Errorf("column %s: %w", path[0], err)
			}
		}
		if int64(len(vals)) != pf.NumRows() {
			return nil, fmt.Errorf("column %s: %d values for %d rows", path[0], len(vals), pf.NumRows())
		}
		out[path[0]] = vals
	}
	return out, nil
}

func appendInt96(out []any, r *file.Int96ColumnChunkReader, maxDef int16) ([]any, error) {
	values := make([]parquet.Int96, 1024)
	defs := make([]int16, 1024)
	for r.HasNext() {
		n, _, err := r.ReadBatch(int64(len(values)), values, defs, nil)
		if err != nil {
			return nil, err
		}
		vi := 0
		for i := 0; i < int(n); i++ {
			if maxDef > 0 && defs[i] < maxDef {
				out = append(out, nil)
				continue
			}
			out = append(out, values[vi].ToTime())
			vi++
		}
	}
	return out, nil
}

// PartitionValue deserialises a partition value from the log by its Delta
// primitive type: nil (JSON null) or "" is NULL, and the string "null" is
// the string "null", not NULL. Integers become int64, floats float64,
// booleans bool, dates Date, timestamps time.Time (UTC; zone-less values
// are taken as UTC), decimals Decimal, others the string itself.
func PartitionValue(raw *string, typ string) (any, error) {
	if raw == nil || *raw == "" {
		return nil, nil
	}
	s := *raw
	switch {
	case typ == "string" || typ == "binary":
		return s, nil
	case typ == "long" || typ == "integer" || typ == "short" || typ == "byte":
		return strconv.ParseInt(s, 10, 64)
	case typ == "float" || typ == "double":
		return strconv.ParseFloat(s, 64)
	case typ == "boolean":
		return strconv.ParseBool(s)
	case typ == "date":
		t, err := time.Parse(time.DateOnly, s)
		return Date{t}, err
	case typ == "timestamp" || typ == "timestamp_ntz":
		return parsePartitionTime(s)
	case strings.HasPrefix(typ, "decimal"):
		return Decimal(s), nil
	}
	return s, nil
}

func parsePartitionTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unparsable timestamp partition value %q", s)
}
