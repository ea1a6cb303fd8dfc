package delta

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/deltabus/deltabus/storage"
)

// VacuumOptions configure Vacuum. Zero values take the table's settings.
type VacuumOptions struct {
	Now time.Time // zero = time.Now()
	// Retention overrides delta.deletedFileRetentionDuration (default 7
	// days). A table property below MinRetention is refused, an explicit
	// Retention (tests, accelerated soak runs) below MinExplicitRetention
	// too.
	Retention time.Duration
	// InFlightSince, if set, keeps every file no snapshot references that
	// was written at or after it, whatever its age: another writer's files
	// uploaded but not committed yet (catalog.Lease).
	InFlightSince time.Time
	// KeepRemovedSince, if set, keeps every file removed at or after it
	// (by its remove's deletionTimestamp; one without counts as recent),
	// whatever the retention: a reader of the versions from then on still
	// needs the files (a protected consumer group).
	KeepRemovedSince time.Time
	DryRun           bool         // list what would be deleted, delete nothing
	Logger           *slog.Logger // nil = slog.Default()
	// SweepTemp, when set, is called once with the table's root prefix ("")
	// and the horizon, after the data files: the storage layer's sweep of
	// hidden temporary files left by killed writers (storage.Sweeper), which
	// List never returns and Vacuum therefore cannot see.
	SweepTemp func(ctx context.Context, prefix string, olderThan time.Time) error
}

// VacuumResult says what Vacuum found and deleted.
type VacuumResult struct {
	HeldBack     int       // removed files kept only for VacuumOptions.KeepRemovedSince
	Horizon      time.Time // files removed, or written, at or before it are expired
	Version      int64     // the snapshot judged against
	Active       int       // files the snapshot references (kept)
	Retained     int       // removed files still inside the retention (kept)
	Deleted      []string  // keys deleted (with DryRun: that would be), sorted
	DeletedBytes int64
}

// Vacuum deletes the data files of the table under store that no reader
// within the retention needs (delta-spark's VACUUM): files the latest
// snapshot no longer references whose remove is older than the horizon
// (now − delta.deletedFileRetentionDuration; a remove without
// deletionTimestamp counts as removed at time 0), and files never
// referenced at all (orphans of killed writers, uncommitted compaction
// output) — in both cases only when the file itself was last written at or
// before the horizon, which protects files being written or committed
// right now. It never deletes a file the snapshot references or one
// removed inside the retention, and never looks into directories whose
// name starts with "_" or "." (so never into _delta_log) except
// _change_data, whose cdc files no snapshot references and which expire
// by age alone. The table's writer protocol is checked first (the
// vacuumProtocolCheck rule). Deletes no log file and commits nothing.
func Vacuum(ctx context.Context, store storage.Store, opts VacuumOptions) (VacuumResult, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	res := VacuumResult{Version: -1}
	snap, err := loadSnapshot(ctx, store, -1, opts.Logger, true)
	if err == nil {
		err = CheckWritable(snap.Protocol, snap.Metadata)
	}
	if err != nil {
		return res, fmt.Errorf("vacuum %s: %w", store, err)
	}
	retention := opts.Retention
	if retention > 0 && retention < MinExplicitRetention {
		return res, fmt.Errorf("vacuum %s: retention %s is below the minimum of %s", store, retention, MinExplicitRetention)
	}
	if retention <= 0 {
		retention = Retention(snap.Metadata, PropDeletedFileRetention, DefaultDeletedFileRetention)
		if retention < MinRetention {
			return res, fmt.Errorf("vacuum %s: %s is %s, below the safe minimum of %s (files of commits in flight could be deleted); pass an explicit retention to override",
				store, PropDeletedFileRetention, retention, MinRetention)
		}
	}
	res.Version, res.Horizon = snap.Version, opts.Now.Add(-retention)
	objs, err := store.List(ctx, "", "")
	if err != nil {
		return res, fmt.Errorf("vacuum %s: list: %w", store, err)
	}
	for _, o := range objs {
		v := vacuumVerdict(snap, o, res.Horizon)
		if v == expired && !opts.InFlightSince.IsZero() && !o.ModTime.Before(opts.InFlightSince) {
			if _, removed := snap.Tombstones[o.Key]; !removed {
				v = keepRetained // not removed by anyone: maybe a lease holder's uncommitted file
			}
		}
		if v == expired && !opts.KeepRemovedSince.IsZero() {
			if r, ok := snap.Tombstones[o.Key]; ok && (r.DeletionTimestamp == nil || *r.DeletionTimestamp >= opts.KeepRemovedSince.UnixMilli()) {
				v = keepRetained
				res.HeldBack++
			}
		}
		switch v {
		case keepActive:
			res.Active++
		case keepRetained:
			res.Retained++
		case expired:
			res.Deleted = append(res.Deleted, o.Key)
			res.DeletedBytes += o.Size
		}
	}
	if opts.DryRun {
		return res, nil
	}
	if err := deleteAll(ctx, store, res.Deleted); err != nil {
		return res, fmt.Errorf("vacuum %s: %w", store, err)
	}
	if opts.SweepTemp != nil {
		if err := opts.SweepTemp(ctx, "", res.Horizon); err != nil {
			return res, fmt.Errorf("vacuum %s: sweep temporary files: %w", store, err)
		}
	}
	opts.Logger.Info("delta: vacuumed", "table", store.String(), "version", snap.Version,
		"deleted", len(res.Deleted), "bytes", res.DeletedBytes, "retained", res.Retained)
	return res, nil
}

type verdict int

const (
	ignored      verdict = iota // not a data file Vacuum manages
	keepActive                  // referenced by the snapshot
	keepRetained                // removed, or written, inside the retention
	expired
)

// vacuumVerdict judges one listed object. Snapshot keys are paths decoded
// once, which is what a store key of a relative path is.
func vacuumVerdict(snap *Snapshot, o storage.Object, horizon time.Time) verdict {
	if hiddenPath(o.Key) {
		return ignored
	}
	if _, ok := snap.Files[o.Key]; ok {
		return keepActive
	}
	if o.ModTime.After(horizon) {
		return keepRetained
	}
	if r, ok := snap.Tombstones[o.Key]; ok && r.DeletionTimestamp != nil && *r.DeletionTimestamp > horizon.UnixMilli() {
		return keepRetained
	}
	return expired
}

// hiddenPath reports whether a key lies in, or is, a file or directory
// whose name starts with "_" or "." (_delta_log, _deltabus, temp files),
// _change_data and partition directories (col=value) excepted, as
// delta-spark's VACUUM decides.
func hiddenPath(key string) bool {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		if seg == "_change_data" || (i < len(segs)-1 && strings.Contains(seg, "=")) {
			continue
		}
		if strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// deleteAll deletes keys concurrently.
func deleteAll(ctx context.Context, store storage.Store, keys []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cleanupParallelism)
	for _, k := range keys {
		g.Go(func() error { return store.Delete(gctx, k) })
	}
	return g.Wait()
}
