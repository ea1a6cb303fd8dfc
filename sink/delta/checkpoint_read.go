package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/deltabus/deltabus/storage"
)

// checkpointColumns are the top-level checkpoint columns replay needs;
// commitInfo, cdc, checkpointMetadata and sidecar columns are never read.
var checkpointColumns = map[string]bool{
	"txn": true, "add": true, "remove": true, "metaData": true, "protocol": true, "domainMetadata": true,
}

// skippedChildren are typed duplicates of JSON fields (writeStatsAsStruct);
// skipping them keeps odd physical types in stats from breaking replay.
var skippedChildren = map[string]bool{"stats_parsed": true, "partitionValues_parsed": true}

// writerOnlyChildren are add fields a reader's load leaves out (see
// readCheckpoint).
var writerOnlyChildren = map[string]bool{"deletionVector": true, "baseRowId": true, "defaultRowCommitVersion": true}

// readCheckpoint reads every part of a checkpoint into actions. full is a
// writer's read; a reader's (not full) leaves out what only writers and
// VACUUM use: tombstones (and the row groups holding only them), deletion
// vectors and row-tracking fields (tables using either are refused by
// CheckReadable anyway), and decodes the rest with the flat reader
// (parseFlat) when it knows the file's layout.
//
// On a store that reads objects in parts (local disk), a reader's load
// reads the footer and the column chunks it decodes, not the tombstones:
// a month of compactions leaves a checkpoint of a week of tombstones
// (234,070 in the month benchmark, 9 MB) around a few adds.
func readCheckpoint(ctx context.Context, store storage.Store, ref checkpointRef, full bool) ([]Action, error) {
	var out []Action
	for _, key := range ref.Keys {
		acts, err := readCheckpointPart(ctx, store, key, full)
		if err != nil {
			return nil, fmt.Errorf("read checkpoint %s: %w", key, err)
		}
		out = append(out, acts...)
	}
	return out, nil
}

func readCheckpointPart(ctx context.Context, store storage.Store, key string, full bool) ([]Action, error) {
	if !full {
		obj, err := storage.OpenObject(ctx, store, key)
		if err == nil {
			defer obj.Close()
			return parseCheckpointFrom(ctx, io.NewSectionReader(obj, 0, obj.Size()), obj.Size(), full)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return nil, err
		}
	}
	data, err := store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return parseCheckpoint(ctx, data, full)
}

// ParseCheckpoint decodes one checkpoint parquet file (classic or one part
// of a multi-part checkpoint) into actions. It accepts the delta-spark MAP
// layout (repeated group key_value), the arrow-rs layout (entries), old
// checkpoints with fewer columns (missing columns read as null) and never
// panics on corrupt input.
func ParseCheckpoint(ctx context.Context, data []byte) (acts []Action, err error) {
	return parseCheckpoint(ctx, data, true)
}

func parseCheckpoint(ctx context.Context, data []byte, full bool) (acts []Action, err error) {
	return parseCheckpointFrom(ctx, bytes.NewReader(data), int64(len(data)), full)
}

// parseCheckpointFrom is parseCheckpoint of a file of size bytes read
// from src where needed.
func parseCheckpointFrom(ctx context.Context, src parquet.ReaderAtSeeker, size int64, full bool) (acts []Action, err error) {
	defer func() {
		if r := recover(); r != nil {
			acts, err = nil, fmt.Errorf("corrupt checkpoint parquet: %v", r)
		}
	}()
	pf, err := openParquetAt(src, size)
	if err != nil {
		return nil, fmt.Errorf("open parquet: %w", err)
	}
	defer pf.Close()
	var rowGroups []int // nil = all
	if !full {
		if rowGroups = rowGroupsWithout(pf, "remove.path"); len(rowGroups) == 0 {
			return nil, nil
		}
		if acts, err := parseFlat(ctx, pf, src, size, rowGroups); !errors.Is(err, errFlatUnfit) {
			return acts, err
		}
	}
	return parseArrow(ctx, pf, rowGroups, full)
}

// parseArrow decodes the given row groups (nil = all) with pqarrow.
func parseArrow(ctx context.Context, pf *file.Reader, rowGroups []int, full bool) (acts []Action, err error) {
	// A small checkpoint gets small batches: every leaf reader allocates
	// a batch's worth of buffers up front.
	batch := int64(4096)
	if n := rowsIn(pf, rowGroups); n < batch {
		batch = max(n, 1)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: batch}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("parquet schema: %w", err)
	}
	var leaves []int
	for _, f := range fr.Manifest.Fields {
		if checkpointColumns[f.Field.Name] && (full || f.Field.Name != "remove") {
			leaves = appendLeaves(leaves, f, 0, full)
		}
	}
	if len(leaves) == 0 {
		return nil, fmt.Errorf("no Delta action columns in checkpoint")
	}
	rr, err := fr.GetRecordReader(ctx, leaves, rowGroups)
	if err != nil {
		return nil, fmt.Errorf("parquet record reader: %w", err)
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		batch, err := recordActions(rec)
		if err != nil {
			return nil, err
		}
		acts = append(acts, batch...)
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("read parquet: %w", err)
	}
	return acts, nil
}

func appendLeaves(out []int, f pqarrow.SchemaField, depth int, full bool) []int {
	if f.IsLeaf() {
		return append(out, f.ColIndex)
	}
	for _, c := range f.Children {
		if depth == 0 && (skippedChildren[c.Field.Name] || (!full && writerOnlyChildren[c.Field.Name])) {
			continue
		}
		out = appendLeaves(out, c, depth+1, full)
	}
	return out
}

// rowsIn counts the rows of the given row groups (nil = all).
func rowsIn(pf *file.Reader, rowGroups []int) int64 {
	if rowGroups == nil {
		return pf.NumRows()
	}
	var n int64
	for _, i := range rowGroups {
		n += pf.MetaData().RowGroup(i).NumRows()
	}
	return n
}

// rowGroupsWithout returns the row groups that hold a row whose column
// leaf is null, going by the column chunk statistics: a row group where
// every row has it (null count 0) holds only that action and is left out.
// A row group without statistics is kept.
func rowGroupsWithout(pf *file.Reader, leaf string) []int {
	col := pf.MetaData().Schema.ColumnIndexByName(leaf)
	var out []int
	for i := range pf.NumRowGroups() {
		rg := pf.MetaData().RowGroup(i)
		if col >= 0 && rg.NumRows() > 0 {
			if cc, err := rg.ColumnChunk(col); err == nil {
				if st, err := cc.Statistics(); err == nil && st != nil && st.HasNullCount() && st.NullCount() == 0 && cc.NumValues() == rg.NumRows() {
					continue
				}
			}
		}
		out = append(out, i)
	}
	return out
}

// recordActions turns each row of a batch into the action it holds (the
// one non-null top-level struct); rows holding none are skipped. Add and
// remove columns of the usual types are decoded directly (fileColumn),
// anything else by way of JSON.
func recordActions(rec arrow.RecordBatch) ([]Action, error) {
	var out []Action
	fast := make([]*fileColumn, rec.NumCols())
	for c := range fast {
		if name := rec.ColumnName(c); name == "add" || name == "remove" {
			fast[c], _ = newFileColumn(rec.Column(c))
		}
	}
	for row := 0; row < int(rec.NumRows()); row++ {
		for c := 0; c < int(rec.NumCols()); c++ {
			col := rec.Column(c)
			if col.IsNull(row) {
				continue
			}
			if fc := fast[c]; fc != nil {
				if a := fc.action(rec.ColumnName(c), row); a != nil {
					out = append(out, *a)
				}
				continue
			}
			m, ok := arrowValue(col, row).(map[string]any)
			if !ok {
				continue
			}
			a, err := actionFromMap(rec.ColumnName(c), m)
			if err != nil {
				return nil, fmt.Errorf("checkpoint row %d column %s: %w", row, rec.ColumnName(c), err)
			}
			if a != nil {
				out = append(out, *a)
			}
		}
	}
	return out, nil
}

// actionFromMap builds an action from a decoded checkpoint struct by way of
// its JSON form, so checkpoint and commit parsing share one set of rules.
// Null struct members are dropped first: a missing column and a null value
// mean the same thing.
func actionFromMap(name string, m map[string]any) (*Action, error) {
	dropNulls(m)
	if name == "add" || name == "remove" {
		if path, _ := m["path"].(string); path == "" {
			return nil, nil // a null struct whose members are all null
		}
	}
	b, err := json.Marshal(map[string]any{name: jsonSafe(m)})
	if err != nil {
		return nil, err
	}
	var a Action
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, err
	}
	normalizeAction(&a)
	return &a, nil
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			if k != "partitionValues" && k != "configuration" && k != "options" && k != "tags" {
				dropNulls(x)
			}
		}
	}
}
