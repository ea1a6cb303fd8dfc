package delta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/storage"
)

// fetchParallelism bounds concurrent commit-file reads (S3 latency hiding).
const fetchParallelism = 8

// replayFrom builds the snapshot at version from the listing: the newest
// readable checkpoint ≤ version, else JSON from version 0. Unless full,
// the checkpoint is read as readCheckpoint says (Snapshot.Tombstones then
// has the removes of later commits only).
func replayFrom(ctx context.Context, store storage.Store, l *logListing, version int64, log *slog.Logger, full bool) (*Snapshot, error) {
	for i := len(l.Checkpoints) - 1; i >= 0; i-- {
		cp := l.Checkpoints[i]
		if cp.Version > version {
			continue
		}
		if err := checkContiguous(l, cp.Version+1, version); err != nil {
			return nil, cleanedOr(l, version, err)
		}
		acts, err := readCheckpoint(ctx, store, cp, full)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			log.Warn("delta: skipping unreadable checkpoint", "version", cp.Version, "err", err)
			continue
		}
		snap := newSnapshot()
		for j := range acts {
			snap.apply(&acts[j])
		}
		snap.Version, snap.CheckpointVersion = cp.Version, cp.Version
		if err := replayCommits(ctx, store, l, snap, cp.Version+1, version); err != nil {
			return nil, err
		}
		if snap.Version == cp.Version {
			loadCheckpointCommitInfo(ctx, store, l, snap)
		}
		return snap, validateSnapshot(snap)
	}
	if _, ok := l.Commits[0]; !ok {
		err := fmt.Errorf("commit version 0 is missing from the log and no usable checkpoint precedes version %d: %w", version, ErrBrokenLog)
		return nil, cleanedOr(l, version, err)
	}
	if err := checkContiguous(l, 0, version); err != nil {
		return nil, cleanedOr(l, version, err)
	}
	snap := newSnapshot()
	if err := replayCommits(ctx, store, l, snap, 0, version); err != nil {
		return nil, err
	}
	return snap, validateSnapshot(snap)
}

func checkContiguous(l *logListing, from, to int64) error {
	for v := from; v <= to; v++ {
		if _, ok := l.Commits[v]; !ok {
			return fmt.Errorf("commit version %d is missing from the log (versions must be contiguous up to %d): %w", v, to, ErrBrokenLog)
		}
	}
	return nil
}

// cleanedOr returns a LogCleanedError when version is older than the
// oldest version the listing can reconstruct (log cleanup deleted what it
// needs), else broken (a real gap).
func cleanedOr(l *logListing, version int64, broken error) error {
	if e := l.earliestVersion(); e > version {
		return &LogCleanedError{Version: version, Earliest: e}
	}
	return broken
}

func validateSnapshot(s *Snapshot) error {
	if s.Protocol.MinReaderVersion == 0 {
		return fmt.Errorf("table state at version %d has no protocol action", s.Version)
	}
	if s.Metadata.ID == "" && s.Metadata.SchemaString == "" {
		return fmt.Errorf("table state at version %d has no metaData action", s.Version)
	}
	return nil
}

// loadCheckpointCommitInfo fills CommitInfo/CommitTime when the snapshot
// version is the checkpoint's: only that version's JSON carries them.
func loadCheckpointCommitInfo(ctx context.Context, store storage.Store, l *logListing, snap *Snapshot) {
	obj, ok := l.Commits[snap.Version]
	if !ok {
		return
	}
	data, err := store.Get(ctx, obj.Key)
	if err != nil {
		return
	}
	ci, err := firstCommitInfo(data)
	if err != nil {
		return
	}
	snap.CommitInfo = ci
	snap.CommitTime = CommitTime(snap.CommitInfo, obj.ModTime)
}

// replayCommits applies commits from..to (inclusive) in order, fetching them
// concurrently in windows.
func replayCommits(ctx context.Context, store storage.Store, l *logListing, snap *Snapshot, from, to int64) error {
	for start := from; start <= to; start += 64 {
		end := min(start+63, to)
		commits, err := fetchCommits(ctx, store, l, start, end)
		if err != nil {
			return err
		}
		for i, acts := range commits {
			v := start + int64(i)
			snap.applyCommit(v, acts, l.Commits[v].ModTime)
		}
	}
	return nil
}

func fetchCommits(ctx context.Context, store storage.Store, l *logListing, from, to int64) ([][]Action, error) {
	out := make([][]Action, to-from+1)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallelism)
	for v := from; v <= to; v++ {
		g.Go(func() error {
			acts, err := readCommit(gctx, store, l.Commits[v].Key)
			out[v-from] = acts
			return err
		})
	}
	return out, g.Wait()
}

func readCommit(ctx context.Context, store storage.Store, key string) ([]Action, error) {
	data, err := store.Get(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("read commit %s: vanished after listing (concurrent log cleanup?): %w", key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", key, err)
	}
	acts, err := ParseCommit(data)
	if err != nil {
		return nil, fmt.Errorf("parse commit %s: %w", key, err)
	}
	return acts, nil
}
