package delta

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// ErrRewriteConflict: a file a rewrite replaces is no longer active (a
// concurrent compaction or delete removed it first). Nothing was
// committed; the rewrite's new files are orphans.
var ErrRewriteConflict = errors.New("delta: rewrite conflict: a file it replaces was removed by another commit")

// Rewrite is a commit that rearranges data without changing it, as
// OPTIMIZE does: Removes are active files, Adds new files holding exactly
// their rows. Both are written with dataChange=false, so change-feed and
// streaming readers see nothing, and appendOnly tables allow it.
type Rewrite struct {
	Removes []string // paths (as in the log) of the active files replaced
	Adds    []Add
	// Operation defaults to "OPTIMIZE"; OperationParameters to delta-spark's
	// {"predicate":"[]","zOrderBy":"[]"}.
	Operation           string
	OperationParameters map[string]string
}

// CommitRewrite commits rw as the next version and returns it. Each remove
// copies the active file's partitionValues and size, with
// deletionTimestamp now and extendedFileMetadata true; commitInfo has
// isBlindAppend false. It carries no txn and touches none: every appId's
// txn stays as it is.
//
// Blind appends commute with it: on a lost race it catches up with the
// winners and, unless one of them removed a file it replaces
// (ErrRewriteConflict) or changed the table incompatibly
// (ErrIncompatibleChange), retries at the next version. A file already
// inactive before the first attempt is ErrRewriteConflict too.
func (t *Table) CommitRewrite(ctx context.Context, rw Rewrite) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.ready(ctx); err != nil {
		return -1, err
	}
	removed, err := t.validateRewrite(&rw)
	if err != nil {
		return -1, fmt.Errorf("rewrite %s: %w", t.store, err)
	}
	readVersion, txnID := t.snap.Version, uuid.NewString()
	render := func() ([]Action, error) { return t.buildRewrite(rw, removed, readVersion, txnID) }
	check := func(v int64, acts []Action) error {
		for _, a := range acts {
			if a.Remove != nil && removed[FileKey(a.Remove.Path, a.Remove.DeletionVector)] {
				return fmt.Errorf("version %d removed %s: %w", v, a.Remove.Path, ErrRewriteConflict)
			}
		}
		return nil
	}
	return t.commitLoop(ctx, render, check)
}

// validateRewrite checks rw against the snapshot and returns the keys of
// the files it removes.
func (t *Table) validateRewrite(rw *Rewrite) (map[string]bool, error) {
	if len(rw.Removes) == 0 || len(rw.Adds) == 0 {
		return nil, errors.New("a rewrite needs files to remove and files to add")
	}
	removed := make(map[string]bool, len(rw.Removes))
	for _, p := range rw.Removes {
		k := FileKey(p, nil)
		if _, ok := t.snap.Files[k]; !ok {
			return nil, fmt.Errorf("%s is not an active file at version %d: %w", p, t.snap.Version, ErrRewriteConflict)
		}
		if removed[k] {
			return nil, fmt.Errorf("%s removed twice", p)
		}
		removed[k] = true
	}
	if err := t.validateAdds(rw.Adds, false); err != nil {
		return nil, err
	}
	for _, a := range rw.Adds {
		if _, ok := t.snap.Files[FileKey(a.Path, a.DeletionVector)]; ok {
			return nil, fmt.Errorf("add %q: path is already an active file", a.Path)
		}
	}
	return removed, nil
}

// buildRewrite renders the commit: commitInfo, the removes, the adds.
func (t *Table) buildRewrite(rw Rewrite, removed map[string]bool, readVersion int64, txnID string) ([]Action, error) {
	ms := t.opts.Now().UnixMilli()
	acts := make([]Action, 1, 1+len(rw.Removes)+len(rw.Adds))
	var removedBytes, addedBytes int64
	for _, p := range rw.Removes {
		f := t.snap.Files[FileKey(p, nil)]
		ext, size := true, f.Size
		removedBytes += size
		acts = append(acts, Action{Remove: &Remove{Path: f.Path, DeletionTimestamp: &ms, DataChange: false,
			ExtendedFileMetadata: &ext, PartitionValues: f.PartitionValues, Size: &size}})
	}
	for i := range rw.Adds {
		addedBytes += rw.Adds[i].Size
		acts = append(acts, Action{Add: &rw.Adds[i]})
	}
	op, params := rw.Operation, rw.OperationParameters
	if op == "" {
		op = "OPTIMIZE"
	}
	if params == nil {
		params = map[string]string{"predicate": "[]", "zOrderBy": "[]"}
	}
	metrics := map[string]string{
		"numRemovedFiles": strconv.Itoa(len(rw.Removes)), "numAddedFiles": strconv.Itoa(len(rw.Adds)),
		"numRemovedBytes": strconv.FormatInt(removedBytes, 10), "numAddedBytes": strconv.FormatInt(addedBytes, 10),
	}
	ci, err := t.opCommitInfo(opInfo{op: op, isolation: "SnapshotIsolation", params: params, blind: false, metrics: metrics}, ms, readVersion, txnID)
	if err != nil {
		return nil, err
	}
	acts[0] = Action{CommitInfo: ci}
	return acts, nil
}
