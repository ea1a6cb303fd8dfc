package delta

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/deltabus/deltabus/storage"
)

// TailFilter narrows a tail to some rows of a table: `relay tail --topic`
// prints one topic's rows of a group's table, whose files mix topics.
type TailFilter struct {
	// File, when set, says whether a change file may hold wanted rows
	// (from its stats); the others are not read.
	File func(ChangeFile) bool
	// Row, when set, says whether a row is written.
	Row func([]RowField) bool
}

// TailJSONFiltered is TailJSON of the rows f lets through.
func TailJSONFiltered(ctx context.Context, store storage.Store, from, to int64, w io.Writer, jsonColumns []string, f TailFilter) error {
	nested := make(map[string]bool, len(jsonColumns))
	for _, c := range jsonColumns {
		nested[c] = true
	}
	snap, err := LoadSnapshot(ctx, store, -1)
	if err != nil {
		return fmt.Errorf("tail %s: %w", store, err)
	}
	if to >= 0 && to < snap.Version {
		if snap, err = LoadSnapshot(ctx, store, to); err != nil {
			return fmt.Errorf("tail %s: %w", store, err)
		}
	}
	schema, err := snap.Schema()
	if err != nil {
		return fmt.Errorf("tail %s: %w", store, err)
	}
	bw := bufio.NewWriter(w)
	err = ReadChanges(ctx, store, from, to, func(cf ChangeFile) error {
		if f.File != nil && !f.File(cf) {
			return nil
		}
		return ReadChangeRows(ctx, store, schema, cf, func(row []RowField) error {
			if f.Row != nil && !f.Row(row) {
				return nil
			}
			return writeRow(bw, row, nested)
		})
	})
	if err != nil {
		return fmt.Errorf("tail %s: %w", store, err)
	}
	return bw.Flush()
}
