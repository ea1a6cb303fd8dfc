package txlog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// Compaction. A relay commits its records once per batch, one small file
// each, so a busy source adds thousands of files an hour: without
// compaction the table's log, its checkpoints and every reader's (and the
// writer's) file list grow for as long as the relay runs. Compact merges
// each source's small files into larger ones (maintenance runs it with the
// topics' compaction): the same records, in commit order, with the same
// statistics, committed as a rewrite (dataChange=false), which appends
// commute with and which carries no txn, so the relay's position in the
// table is untouched. Log clean-up and VACUUM then retire the old files
// as they do a topic's.

// Compaction limits: a file past smallFileBytes is left as it is, and a
// merge takes at most mergeRecords records.
const (
	smallFileBytes = 8 << 20
	mergeRecords   = 1 << 20
)

// CompactResult says what Compact did.
type CompactResult struct {
	FilesRemoved, FilesAdded int
	Versions                 []int64
}

// Compact merges the small files of the records table under root, each
// source's apart. A merge that loses a race for a file it replaces (a
// concurrent compaction) is dropped; the next run tries again. A table
// that does not exist is nothing to do.
func Compact(ctx context.Context, root storage.Store, log *slog.Logger) (CompactResult, error) {
	var res CompactResult
	st := storage.Sub(root, Table)
	tbl, err := delta.OpenTable(ctx, st, delta.Options{Logger: log})
	if errors.Is(err, delta.ErrNoTable) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", Table, err)
	}
	defer tbl.Wait()
	for _, chunk := range planMerges(tbl.Files()) {
		v, err := mergeChunk(ctx, tbl, st, chunk)
		if errors.Is(err, delta.ErrRewriteConflict) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("compact %s: %w", Table, err)
		}
		res.Versions = append(res.Versions, v)
		res.FilesRemoved += len(chunk.files)
		res.FilesAdded++
	}
	if len(res.Versions) > 0 && log != nil {
		log.Info("txlog: compacted", "table", Table, "commits", len(res.Versions), "removed", res.FilesRemoved, "added", res.FilesAdded)
	}
	return res, nil
}

// merge is one rewrite: small files of one source, in commit order.
type merge struct {
	source string
	files  []delta.Add
}

// fileStats is what a file's statistics say of it.
type fileStats struct {
	NumRecords int64 `json:"numRecords"`
	MinValues  struct {
		Source    *string `json:"source"`
		CommitLSN *int64  `json:"commit_lsn"`
	} `json:"minValues"`
	MaxValues struct {
		Source *string `json:"source"`
	} `json:"maxValues"`
}

// planMerges groups the small files of each source (files whose stats do
// not bound them to one source are left alone) into merges of at least
// two files and at most mergeRecords records, in commit order.
func planMerges(files []delta.Add) []merge {
	type small struct {
		add     delta.Add
		records int64
		lsn     int64
	}
	bySource := map[string][]small{}
	for _, a := range files {
		var s fileStats
		if a.Size >= smallFileBytes || json.Unmarshal([]byte(a.Stats), &s) != nil || s.MinValues.Source == nil ||
			s.MaxValues.Source == nil || *s.MinValues.Source != *s.MaxValues.Source || s.MinValues.CommitLSN == nil {
			continue
		}
		src := *s.MinValues.Source
		bySource[src] = append(bySource[src], small{a, s.NumRecords, *s.MinValues.CommitLSN})
	}
	var out []merge
	for _, src := range slices.Sorted(maps.Keys(bySource)) {
		fs := bySource[src]
		slices.SortFunc(fs, func(a, b small) int { return cmp.Compare(a.lsn, b.lsn) })
		cur, n := merge{source: src}, int64(0)
		flush := func() {
			if len(cur.files) > 1 {
				out = append(out, cur)
			}
			cur, n = merge{source: src}, 0
		}
		for _, f := range fs {
			if n+f.records > mergeRecords {
				flush()
			}
			cur.files = append(cur.files, f.add)
			n += f.records
		}
		flush()
	}
	return out
}

// mergeChunk reads a merge's records, writes them as one file and commits
// the rewrite.
func mergeChunk(ctx context.Context, tbl *delta.Table, st storage.Store, m merge) (int64, error) {
	var ents []Entry
	for _, a := range m.files {
		err := delta.ReadParquetRows(ctx, st, a.Path, func(row map[string]any) error {
			e, err := entryOf(row, m.source)
			ents = append(ents, e)
			return err
		})
		if err != nil {
			return -1, err
		}
	}
	slices.SortStableFunc(ents, func(a, b Entry) int { return cmp.Compare(a.CommitLSN, b.CommitLSN) })
	var enc encoder
	data, err := enc.encode(m.source, ents)
	if err != nil {
		return -1, fmt.Errorf("encode %d records: %w", len(ents), err)
	}
	name := fmt.Sprintf("part-00000-%s.c000.snappy.parquet", uuid.NewString())
	if err := st.Put(ctx, name, data); err != nil {
		return -1, fmt.Errorf("write %s/%s: %w", Table, name, err)
	}
	add := delta.Add{Path: name, PartitionValues: map[string]*string{}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: false, Stats: stats(m.source, ents)}
	removes := make([]string, len(m.files))
	for i, a := range m.files {
		removes[i] = a.Path
	}
	v, err := tbl.CommitRewrite(ctx, delta.Rewrite{Removes: removes, Adds: []delta.Add{add}})
	if err != nil {
		_ = st.Delete(ctx, name) // nothing of ours landed: the rewrite lost cleanly or failed
		return -1, err
	}
	return v, nil
}

// entryOf reads one row back into the entry it was written from; the
// topics column is kept as written.
func entryOf(row map[string]any, source string) (Entry, error) {
	var e Entry
	src, ok0 := row["source"].(string)
	xid, ok1 := row["xid"].(int64)
	lsn, ok2 := row["commit_lsn"].(int64)
	end, ok3 := row["end_lsn"].(int64)
	at, ok4 := row["commit_time"].(time.Time)
	n, ok5 := row["events"].(int64)
	topics, ok6 := row["topics"].(string)
	if !(ok0 && ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return e, errors.New("a record's columns are missing or of another type")
	}
	if src != source {
		return e, fmt.Errorf("a record of source %s in a file whose statistics say %s", src, source)
	}
	return Entry{Xid: xid, CommitLSN: lsn, EndLSN: end, CommitTime: at.UnixMicro(), Events: n, Topics: topics}, nil
}
