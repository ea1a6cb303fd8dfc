package txlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Filter selects records: of one source (all when empty), with a commit
// LSN in (After, Through] (Through 0: no upper bound), that count events
// of at least one of Topics (all when empty).
type Filter struct {
	Source         string
	After, Through int64
	Topics         []string
}

func (f Filter) keep(r Record) bool {
	if (f.Source != "" && r.Source != f.Source) || r.CommitLSN <= f.After || (f.Through > 0 && r.CommitLSN > f.Through) {
		return false
	}
	if len(f.Topics) == 0 {
		return true
	}
	for _, t := range f.Topics {
		if r.Topics[t] > 0 {
			return true
		}
	}
	return false
}

// Read returns the records f selects, ordered by source, then commit LSN.
// Files whose statistics exclude the source or the range are not read. A
// store without the table has no records.
func Read(ctx context.Context, root storage.Store, f Filter) ([]Record, error) {
	st := storage.Sub(root, Table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", Table, err)
	}
	var out []Record
	for _, add := range snap.Files {
		if !f.mayHold(add.Stats) { // by source and commit LSN
			continue
		}
		err := delta.ReadParquetRows(ctx, st, add.Path, func(row map[string]any) error {
			r, err := fromRow(row)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", Table, add.Path, err)
			}
			if f.keep(r) {
				out = append(out, r)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].CommitLSN < out[j].CommitLSN
	})
	return out, nil
}

// mayHold reads a file's statistics: false when they exclude f.
func (f Filter) mayHold(stats string) bool {
	hi := f.Through
	if hi <= 0 {
		hi = math.MaxInt64
	}
	return topic.MayHoldLSNs(stats, f.Source, f.After+1, hi)
}

func fromRow(row map[string]any) (Record, error) {
	var r Record
	var ok [7]bool
	r.Source, ok[0] = row["source"].(string)
	r.Xid, ok[1] = row["xid"].(int64)
	r.CommitLSN, ok[2] = row["commit_lsn"].(int64)
	r.EndLSN, ok[3] = row["end_lsn"].(int64)
	r.CommitTime, ok[4] = row["commit_time"].(time.Time)
	r.Events, ok[5] = row["events"].(int64)
	var topics string
	topics, ok[6] = row["topics"].(string)
	for i, good := range ok {
		if !good {
			return r, fmt.Errorf("column %s is missing or of another type", columns[i].name)
		}
	}
	if err := json.Unmarshal([]byte(topics), &r.Topics); err != nil {
		return r, fmt.Errorf("topics is not a JSON object of counts: %w", err)
	}
	r.CommitTime = r.CommitTime.UTC()
	return r, nil
}
