package delta

import (
	"context"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// Change types of the change data feed.
const (
	ChangeInsert = "insert"
	ChangeDelete = "delete"
)

// ChangeFile is one file to read for the change feed of one version.
type ChangeFile struct {
	Version   int64     // commit version (_commit_version)
	Timestamp time.Time // _commit_timestamp: inCommitTimestamp, else commitInfo.timestamp, else file mtime
	// ChangeType is "insert" or "delete" for data files; "" for CDC files,
	// whose rows carry their own _change_type column.
	ChangeType      string
	CDC             bool
	Path            string // path as in the log (URL-encoded)
	Key             string // store key of the file (Path decoded once)
	PartitionValues map[string]*string
	Size            int64
	Stats           string // an inserted file's add.stats ("" when none)
}

// cleanedChangesOr returns a LogCleanedError when from is older than the
// oldest version whose change feed the log still holds, else broken.
func cleanedChangesOr(ctx context.Context, store storage.Store, from int64, broken error) error {
	all, err := listLog(ctx, store, 0)
	if err != nil {
		return broken
	}
	if e := all.earliestChangeVersion(); e > from {
		return &LogCleanedError{Version: from, Earliest: e}
	}
	return broken
}

// ReadChanges calls fn, in version order, for the files that make up the
// change feed of versions from..to (to < 0 or beyond the latest = latest).
// A version with cdc actions yields only its cdc files; otherwise adds with
// dataChange=true are inserts and removes with dataChange=true deletes;
// dataChange=false actions (OPTIMIZE) yield nothing. It errors when from > to,
// when from is beyond the latest version, when from is older than what log
// cleanup kept (a LogCleanedError naming the earliest version), when a
// commit in the range is missing (ErrBrokenLog), when the change data feed
// is off at any version in the range, or when a version's protocol is
// unreadable.
func ReadChanges(ctx context.Context, store storage.Store, from, to int64, fn func(ChangeFile) error) error {
	if from < 0 {
		return fmt.Errorf("change feed: negative start version %d", from)
	}
	l, err := listLog(ctx, store, from)
	if err != nil {
		return fmt.Errorf("change feed: %w", err)
	}
	latest := l.MaxVersion
	if from > latest {
		if all, err := listLog(ctx, store, 0); err == nil {
			latest = all.MaxVersion
		}
		return fmt.Errorf("change feed: start version %d is beyond the latest version %d", from, latest)
	}
	if to < 0 || to > latest {
		to = latest
	}
	if from > to {
		return fmt.Errorf("change feed: start version %d is after end version %d", from, to)
	}
	if err := checkContiguous(l, from, to); err != nil {
		return fmt.Errorf("change feed: %w", cleanedChangesOr(ctx, store, from, err))
	}
	snap, err := LoadSnapshot(ctx, store, from)
	if err != nil {
		return fmt.Errorf("change feed: %w", err)
	}
	if err := cdfEnabled(snap.Protocol, snap.Metadata, from); err != nil {
		return err
	}
	for start := from; start <= to; start += 64 {
		end := min(start+63, to)
		commits, err := fetchCommits(ctx, store, l, start, end)
		if err != nil {
			return fmt.Errorf("change feed: %w", err)
		}
		for i, acts := range commits {
			v := start + int64(i)
			if err := versionChanges(v, acts, l.Commits[v].ModTime, snap, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func cdfEnabled(p Protocol, m Metadata, v int64) error {
	if err := CheckReadable(p, m); err != nil {
		return fmt.Errorf("change feed at version %d: %w", v, err)
	}
	if m.Configuration["delta.enableChangeDataFeed"] != "true" {
		return fmt.Errorf("change feed: delta.enableChangeDataFeed is not true at version %d", v)
	}
	return nil
}

// versionChanges emits the change files of one commit.
func versionChanges(v int64, acts []Action, mtime time.Time, snap *Snapshot, fn func(ChangeFile) error) error {
	var ci *CommitInfo
	hasCDC := false
	for _, a := range acts {
		if a.CommitInfo != nil && ci == nil {
			ci = a.CommitInfo
		}
		hasCDC = hasCDC || a.CDC != nil
		if a.Protocol != nil || a.Metadata != nil {
			snap.apply(&a)
			if err := cdfEnabled(snap.Protocol, snap.Metadata, v); err != nil {
				return err
			}
		}
	}
	ts := CommitTime(ci, mtime)
	for _, a := range acts {
		cf := ChangeFile{Version: v, Timestamp: ts}
		switch {
		case hasCDC && a.CDC != nil:
			cf.CDC, cf.Path, cf.PartitionValues, cf.Size = true, a.CDC.Path, a.CDC.PartitionValues, a.CDC.Size
		case !hasCDC && a.Add != nil && a.Add.DataChange:
			cf.ChangeType, cf.Path, cf.PartitionValues, cf.Size, cf.Stats = ChangeInsert, a.Add.Path, a.Add.PartitionValues, a.Add.Size, a.Add.Stats
		case !hasCDC && a.Remove != nil && a.Remove.DataChange:
			cf.ChangeType, cf.Path, cf.PartitionValues = ChangeDelete, a.Remove.Path, a.Remove.PartitionValues
			if a.Remove.Size != nil {
				cf.Size = *a.Remove.Size
			}
		default:
			continue
		}
		key, err := dataKey(cf.Path)
		if err != nil {
			return fmt.Errorf("change feed version %d: %w", v, err)
		}
		cf.Key = key
		if err := fn(cf); err != nil {
			return err
		}
	}
	return nil
}
