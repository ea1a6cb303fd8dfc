package delta

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// ErrLogCleaned is wrapped by LogCleanedError.
var ErrLogCleaned = errors.New("delta: log cleaned up")

// LogCleanedError: a reader asked for a version older than the earliest
// the log still holds, because log cleanup (CleanupLog, or another
// engine's) deleted the commits before it. It is not a broken log
// (ErrBrokenLog): start again from Earliest.
type LogCleanedError struct {
	Version  int64 // the version asked for
	Earliest int64 // the earliest version that can still be read
}

func (e *LogCleanedError) Error() string {
	return fmt.Sprintf("log cleaned up: version %d is no longer in the log, the earliest version is %d", e.Version, e.Earliest)
}

// Is matches ErrLogCleaned.
func (e *LogCleanedError) Is(target error) bool { return target == ErrLogCleaned }

// CleanupOptions configure CleanupLog. Zero values take the table's
// settings.
type CleanupOptions struct {
	Now       time.Time     // zero = time.Now()
	Retention time.Duration // 0 = delta.logRetentionDuration (default 30 days)
	DryRun    bool          // list what would be deleted, delete nothing
	Logger    *slog.Logger  // nil = slog.Default()
	// KeepFrom > 0 keeps every commit from this version on whatever its
	// age: a reader still needs them (a protected consumer group).
	KeepFrom int64
}

// CleanupResult says what CleanupLog kept and deleted.
type CleanupResult struct {
	// HeldBack: KeepFrom kept commits the retention alone would have
	// expired.
	HeldBack   bool
	Horizon    time.Time // commits last written at or before it are expired
	Checkpoint int64     // the kept checkpoint everything older was deleted before; -1 when nothing could be deleted
	Earliest   int64     // the earliest version readable afterwards
	Deleted    []string  // keys deleted (with DryRun: that would be), oldest first
	Skipped    string    // why nothing was considered, e.g. delta.enableExpiredLogCleanup=false
}

var (
	crcRE       = regexp.MustCompile(`^(\d{20})\.crc$`)
	compactedRE = regexp.MustCompile(`^(\d{20})\.(\d{20})\.compacted\.json$`)
)

// cleanupParallelism bounds concurrent deletes.
const cleanupParallelism = 16

// CleanupLog deletes expired log files, the rule of the Delta protocol's
// "Metadata Cleanup" (delta-spark, delta-rs cleanup_expired_logs_for):
//
//   - the horizon is now − delta.logRetentionDuration (30 days by default),
//     rounded down to midnight UTC when the retention is a day or more;
//   - a commit is expired when its file was last written at or before the
//     horizon (modification times are made monotonic in version order, so
//     one late mtime cannot expire later commits before it);
//   - the kept checkpoint is the newest complete, readable checkpoint at or
//     before the newest expired commit, from which the commits run to the
//     latest without a gap;
//   - every commit, checkpoint (classic or multi-part), .crc and log
//     compaction file of a version before it is deleted, oldest version
//     first (an interrupted cleanup leaves a readable suffix); the kept
//     checkpoint, its JSON commit and everything after stay.
//
// Without such a checkpoint nothing is deleted. Nothing outside _delta_log
// and no other _delta_log file is touched. Readers asking for a deleted
// version get a LogCleanedError. Tables with delta.enableExpiredLogCleanup
// set to false are left alone unless opts.Retention is given, and a
// property below MinRetention is refused: a writer handle idle for up to
// Options.ReloadAfter (a minute) commits at the version after the last it
// knows, which must not be a cleaned-up one (an explicit opts.Retention
// must stay above the writers' ReloadAfter too).
func CleanupLog(ctx context.Context, store storage.Store, opts CleanupOptions) (CleanupResult, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	res := CleanupResult{Checkpoint: -1, Earliest: -1}
	objs, err := store.List(ctx, LogDir, "")
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: list: %w", store, err)
	}
	l := parseListing(objs)
	if l.MaxVersion < 0 {
		return res, fmt.Errorf("clean up log of %s: %w", store, ErrNoTable)
	}
	snap, err := replayFrom(ctx, store, l, l.MaxVersion, opts.Logger, false)
	if err == nil {
		err = CheckReadable(snap.Protocol, snap.Metadata)
	}
	if err != nil {
		return res, fmt.Errorf("clean up log of %s: %w", store, err)
	}
	res.Earliest = l.earliestVersion()
	retention := opts.Retention
	if retention > 0 && retention < MinExplicitRetention {
		return res, fmt.Errorf("clean up log of %s: retention %s is below the minimum of %s", store, retention, MinExplicitRetention)
	}
	if retention <= 0 {
		if snap.Metadata.Configuration[PropExpiredLogCleanup] == "false" {
			res.Skipped = PropExpiredLogCleanup + "=false"
			return res, nil
		}
		retention = Retention(snap.Metadata, PropLogRetention, DefaultLogRetention)
		if retention < MinRetention {
			return res, fmt.Errorf("clean up log of %s: %s is %s, below the safe minimum of %s; pass an explicit retention to override",
				store, PropLogRetention, retention, MinRetention)
		}
	}
	res.Horizon = cleanupHorizon(opts.Now, retention)
	through := expiredThrough(l, res.Horizon)
	if opts.KeepFrom > 0 && through >= opts.KeepFrom {
		through, res.HeldBack = opts.KeepFrom-1, true
	}
	cp, err := keptCheckpoint(ctx, store, l, through)
	if err != nil || cp < 0 {
		return res, err
	}
	res.Checkpoint, res.Earliest = cp, cp
	res.Deleted = deletableBefore(objs, cp)
	if opts.DryRun || len(res.Deleted) == 0 {
		return res, nil
	}
	if err := deleteInOrder(ctx, store, res.Deleted); err != nil {
		return res, fmt.Errorf("clean up log of %s before checkpoint %d: %w", store, cp, err)
	}
	opts.Logger.Info("delta: log cleaned up", "table", store.String(), "checkpoint", cp, "deleted", len(res.Deleted))
	return res, nil
}

// cleanupHorizon is now − retention, rounded down to midnight UTC for
// retentions of a day or more (the protocol counts log retention in days).
func cleanupHorizon(now time.Time, retention time.Duration) time.Time {
	h := now.Add(-retention).UTC()
	if retention >= 24*time.Hour {
		h = time.Date(h.Year(), h.Month(), h.Day(), 0, 0, 0, 0, time.UTC)
	}
	return h
}

// expiredThrough returns the newest version whose commit file was last
// written at or before horizon, with modification times made monotonic in
// version order; -1 when none is.
func expiredThrough(l *logListing, horizon time.Time) int64 {
	versions := make([]int64, 0, len(l.Commits))
	for v := range l.Commits {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	newest := int64(-1)
	var prev time.Time
	for i, v := range versions {
		t := l.Commits[v].ModTime
		if i > 0 && !t.After(prev) {
			t = prev.Add(time.Millisecond)
		}
		prev = t
		if t.After(horizon) {
			break
		}
		newest = v
	}
	return newest
}

// keptCheckpoint returns the newest complete checkpoint at or before
// through whose commits run without a gap to the latest version and which
// reads back with a protocol and a metaData; -1 when none qualifies.
func keptCheckpoint(ctx context.Context, store storage.Store, l *logListing, through int64) (int64, error) {
	low := l.oldestContiguousCommit()
	for i := len(l.Checkpoints) - 1; i >= 0; i-- {
		cp := l.Checkpoints[i]
		if cp.Version > through || cp.Version+1 < low {
			continue
		}
		acts, err := readCheckpoint(ctx, store, cp, false)
		if err != nil {
			if ctx.Err() != nil {
				return -1, err
			}
			continue
		}
		snap := newSnapshot()
		for j := range acts {
			snap.apply(&acts[j])
		}
		if validateSnapshot(snap) == nil {
			return cp.Version, nil
		}
	}
	return -1, nil
}

// deletableBefore returns the log entries of versions before cp, sorted by
// version, each version's commit after its checkpoint and side files.
func deletableBefore(objs []storage.Object, cp int64) []string {
	type entry struct {
		v      int64
		commit bool
		key    string
	}
	var out []entry
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, LogDir)
		if strings.Contains(name, "/") {
			continue // _staged_commits, _sidecars, .tmp and other directories
		}
		var m []string
		for _, re := range []*regexp.Regexp{commitRE, checkpointRE, multipartRE, crcRE, compactedRE} {
			if m = re.FindStringSubmatch(name); m != nil {
				break
			}
		}
		if m == nil {
			continue
		}
		v := atoi(m[1])
		if v < cp || (compactedRE.MatchString(name) && v <= cp) {
			out = append(out, entry{v: v, commit: commitRE.MatchString(name), key: o.Key})
		}
	}
	slices.SortFunc(out, func(a, b entry) int {
		if c := cmp.Compare(a.v, b.v); c != 0 {
			return c
		}
		if a.commit != b.commit {
			if a.commit {
				return 1
			}
			return -1
		}
		return strings.Compare(a.key, b.key)
	})
	keys := make([]string, len(out))
	for i, e := range out {
		keys[i] = e.key
	}
	return keys
}

// deleteInOrder deletes keys in windows, oldest first: a window is deleted
// in parallel, the next one only after it.
func deleteInOrder(ctx context.Context, store storage.Store, keys []string) error {
	const window = 4 * cleanupParallelism
	for start := 0; start < len(keys); start += window {
		if err := deleteAll(ctx, store, keys[start:min(start+window, len(keys))]); err != nil {
			return err
		}
	}
	return nil
}
