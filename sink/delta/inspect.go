package delta

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"

	"github.com/deltabus/deltabus/storage"
)

// InspectResult is what `relay inspect` prints. Its JSON encoding has
// exactly the keys version, protocol, metadata, numFiles, numRecords, txns;
// feature lists, partitionColumns and configuration are never null.
type InspectResult struct {
	Version    int64            `json:"version"`
	Protocol   InspectProtocol  `json:"protocol"`
	Metadata   InspectMetadata  `json:"metadata"`
	NumFiles   int64            `json:"numFiles"`
	NumRecords *int64           `json:"numRecords"` // null when an active file has no stats and is missing
	Txns       map[string]int64 `json:"txns"`
}

// InspectProtocol is the protocol part of InspectResult.
type InspectProtocol struct {
	MinReaderVersion int32    `json:"minReaderVersion"`
	MinWriterVersion int32    `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures"`
	WriterFeatures   []string `json:"writerFeatures"`
}

// InspectMetadata is the metadata part of InspectResult; Schema lists the
// top-level columns as "name:type" (see StructType.Columns).
type InspectMetadata struct {
	ID               string            `json:"id"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	Schema           []string          `json:"schema"`
}

// Inspect loads the latest snapshot and summarises it. numRecords is exact:
// the sum of stats.numRecords where present, else the file's parquet footer
// num_rows (read through store).
func Inspect(ctx context.Context, store storage.Store) (InspectResult, error) {
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		return InspectResult{}, fmt.Errorf("inspect %s: %w", store, err)
	}
	schema, err := snap.Schema()
	if err != nil {
		return InspectResult{}, fmt.Errorf("inspect %s: %w", store, err)
	}
	res := InspectResult{
		Version: snap.Version,
		Protocol: InspectProtocol{
			MinReaderVersion: snap.Protocol.MinReaderVersion,
			MinWriterVersion: snap.Protocol.MinWriterVersion,
			ReaderFeatures:   nonNil(snap.Protocol.ReaderFeatures),
			WriterFeatures:   nonNil(snap.Protocol.WriterFeatures),
		},
		Metadata: InspectMetadata{
			ID:               snap.Metadata.ID,
			PartitionColumns: nonNil(snap.Metadata.PartitionColumns),
			Configuration:    snap.Metadata.Configuration,
			Schema:           schema.Columns(),
		},
		NumFiles: int64(len(snap.Files)),
		Txns:     map[string]int64{},
	}
	if res.Metadata.Configuration == nil {
		res.Metadata.Configuration = map[string]string{}
	}
	for id, t := range snap.Txns {
		res.Txns[id] = t.Version
	}
	if res.NumRecords, err = countRecords(ctx, store, snap); err != nil {
		return InspectResult{}, fmt.Errorf("inspect %s: %w", store, err)
	}
	return res, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// countRecords sums numRecords over the active files; nil when a file
// without stats is missing from storage.
func countRecords(ctx context.Context, store storage.Store, snap *Snapshot) (*int64, error) {
	keys := make([]string, 0, len(snap.Files))
	for k := range snap.Files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var total int64
	for _, k := range keys {
		add := snap.Files[k]
		if n, ok := StatsNumRecords(add.Stats); ok {
			total += n
			continue
		}
		n, err := FooterNumRows(ctx, store, add.Path)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		total += n
	}
	return &total, nil
}

// StatsNumRecords extracts numRecords from an add's JSON stats string.
func StatsNumRecords(stats string) (int64, bool) {
	if stats == "" {
		return 0, false
	}
	var s struct {
		NumRecords *int64 `json:"numRecords"`
	}
	if json.Unmarshal([]byte(stats), &s) != nil || s.NumRecords == nil {
		return 0, false
	}
	return *s.NumRecords, true
}

// FooterNumRows reads the row count from the parquet footer of the data file
// at the log path (URL-decoded once, relative to the table root).
func FooterNumRows(ctx context.Context, store storage.Store, logPath string) (n int64, err error) {
	data, err := getDataFile(ctx, store, logPath)
	if err != nil {
		return 0, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt parquet %s: %v", logPath, r)
		}
	}()
	pf, err := openParquet(data)
	if err != nil {
		return 0, fmt.Errorf("parquet footer of %s: %w", logPath, err)
	}
	defer pf.Close()
	return pf.NumRows(), nil
}

// getDataFile reads a data or cdc file named by its log path.
func getDataFile(ctx context.Context, store storage.Store, logPath string) ([]byte, error) {
	key, err := dataKey(logPath)
	if err != nil {
		return nil, err
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read data file %s: %w", key, err)
	}
	return data, nil
}

// dataKey converts a log path (a relative URI) to a store key.
func dataKey(logPath string) (string, error) {
	u, err := url.Parse(logPath)
	if err == nil && u.Scheme != "" {
		return "", fmt.Errorf("absolute data file path %q is not supported", logPath)
	}
	p, err := url.PathUnescape(logPath)
	if err != nil {
		return "", fmt.Errorf("data file path %q: %w", logPath, err)
	}
	return p, nil
}

// Tail writes the change feed of versions from..to (see ReadChanges) to w as
// JSON lines, one per row: the table's columns in schema order (partition
// values taken from the log and typed by the schema), then _change_type,
// _commit_version and _commit_timestamp (RFC 3339, UTC, milliseconds).
func Tail(ctx context.Context, store storage.Store, from, to int64, w io.Writer) error {
	return TailJSON(ctx, store, from, to, w, nil)
}

// TailJSON is Tail where the string columns named in jsonColumns are
// written as nested JSON (compacted) when their value is valid JSON, and
// as JSON strings otherwise: `relay tail` prints an event's payload and
// headers as objects, not as strings holding JSON.
func TailJSON(ctx context.Context, store storage.Store, from, to int64, w io.Writer, jsonColumns []string) error {
	return TailJSONFiltered(ctx, store, from, to, w, jsonColumns, TailFilter{})
}

// RowField is one named value of a change row, in output order.
type RowField struct {
	Name  string
	Value any
}

// ReadChangeRows reads the rows of one change file as ordered fields: the
// schema's columns (partition columns from the log), then _change_type,
// _commit_version and _commit_timestamp.
func ReadChangeRows(ctx context.Context, store storage.Store, schema *StructType, cf ChangeFile, fn func([]RowField) error) error {
	parts := map[string]any{}
	for name, raw := range cf.PartitionValues {
		f, ok := schema.Field(name)
		if !ok {
			continue
		}
		v, err := PartitionValue(raw, f.PrimitiveType())
		if err != nil {
			return fmt.Errorf("version %d file %s: partition %s: %w", cf.Version, cf.Path, name, err)
		}
		parts[f.Name] = v
	}
	ts := cf.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return ReadParquetRows(ctx, store, cf.Key, func(row map[string]any) error {
		out := make([]RowField, 0, len(schema.Fields)+3)
		for _, f := range schema.Fields {
			v, ok := parts[f.Name]
			if !ok {
				v = row[f.Name]
			}
			out = append(out, RowField{f.Name, v})
		}
		ct := cf.ChangeType
		if cf.CDC {
			ct, _ = row["_change_type"].(string)
		}
		out = append(out, RowField{"_change_type", ct}, RowField{"_commit_version", cf.Version},
			RowField{"_commit_timestamp", ts})
		return fn(out)
	})
}

func writeRow(w *bufio.Writer, row []RowField, nested map[string]bool) error {
	w.WriteByte('{')
	var compact bytes.Buffer
	for i, f := range row {
		if i > 0 {
			w.WriteByte(',')
		}
		k, _ := json.Marshal(f.Name)
		w.Write(k)
		w.WriteByte(':')
		if s, ok := f.Value.(string); ok && nested[f.Name] {
			compact.Reset()
			if json.Compact(&compact, []byte(s)) == nil {
				w.Write(compact.Bytes())
				continue
			}
		}
		v, err := json.Marshal(jsonSafe(f.Value))
		if err != nil {
			return fmt.Errorf("column %s: %w", f.Name, err)
		}
		w.Write(v)
	}
	w.WriteByte('}')
	return w.WriteByte('\n')
}
