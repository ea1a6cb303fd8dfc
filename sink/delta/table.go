package delta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deltabus/deltabus/storage"
)

var (
	// ErrAlreadyCommitted: the table's txn for the appId is already at or
	// beyond the batch version, so the batch is committed (by us earlier or
	// by a zombie instance). Write nothing more for this batch.
	ErrAlreadyCommitted = errors.New("delta: batch already committed (txn version already reached)")
	// ErrConcurrentWriter: another live writer commits with our appId.
	ErrConcurrentWriter = errors.New("delta: concurrent writer with the same appId")
	// ErrTableExists: CreateTable found a different table at the location.
	ErrTableExists = errors.New("delta: a different table already exists")
	// ErrBrokenLog: commits are missing from the log (files deleted under
	// the table); no reader can reconstruct it.
	ErrBrokenLog = errors.New("delta: broken log")
	// ErrTableGone: the version a commit would follow is no longer in the
	// log and no table is left: it was deleted (or its log truncated)
	// under the writer; nothing was written.
	ErrTableGone = errors.New("delta: the table is gone")
	// ErrRolledBack: the log no longer holds what the handle read or
	// wrote: its latest version went back (the table was restored from an
	// older copy: a backup, S3 object versions), or the version a commit
	// would follow is another commit than the one the handle knows
	// (restored, then written on by others). The commits that vanished
	// took their rows with them; nothing was written. Errors that wrap it
	// wrap ErrTableGone too: to this writer the table is as good as
	// deleted.
	ErrRolledBack = errors.New("delta: the table went back to an older state")
)

// rolledBack is the error of a log found behind what the handle knew.
func (t *Table) rolledBack(what string) error {
	t.stale = true // keep the state known: every later use refuses too
	return fmt.Errorf("table %s: %w: %w: %s", t.store, ErrTableGone, ErrRolledBack, what)
}

// DefaultReloadAfter is Options.ReloadAfter's default.
const DefaultReloadAfter = time.Minute

// Options configure OpenTable.
type Options struct {
	Logger      *slog.Logger     // nil = slog.Default()
	EngineInfo  string           // commitInfo.engineInfo; "" = "DeltaBus/<module version>"
	Now         func() time.Time // nil = time.Now
	MaxAttempts int              // commit attempts across conflicts; 0 = 1000
	// ReloadAfter: a handle idle for longer (no commit, no reload) re-reads
	// the log before it commits, so it never commits on top of a log that
	// CleanupLog cleaned past its last known version (a cleaned version
	// number is free for PutIfAbsent again). 0 = DefaultReloadAfter;
	// CleanupLog's retention must stay longer.
	ReloadAfter time.Duration
	// AsyncCheckpoints writes checkpoints in the background instead of
	// inside the Commit that reaches the interval (see Table.Wait).
	AsyncCheckpoints bool
	// CheckpointGate, shared by the tables of one writer, lets their
	// background checkpoints take turns (see NewCheckpointGate). nil = no
	// gate.
	CheckpointGate *CheckpointGate
	// CheckpointSpacing, with AsyncCheckpoints, is the least time between
	// two checkpoints of a table: one due sooner is skipped, unless
	// maxSpacedIntervals intervals of versions have passed since the last
	// (see Table.spaced). 0 = every interval.
	CheckpointSpacing time.Duration
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.EngineInfo == "" {
		o.EngineInfo = defaultEngineInfo()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 1000
	}
	if o.ReloadAfter <= 0 {
		o.ReloadAfter = DefaultReloadAfter
	}
}

// defaultEngineInfo is the commitInfo's engineInfo, "DeltaBus/<module
// version>". It is read once: debug.ReadBuildInfo parses the binary's
// whole module list at every call (19 KB of garbage each), and a relay
// opening 10,000 new tables called it twice per table, 16% of what it
// allocated.
var defaultEngineInfo = sync.OnceValue(func() string {
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return "DeltaBus/" + v
})

// Table is a writer's handle on one table: it keeps the snapshot in memory
// and advances it with every commit it makes or observes, so appends never
// re-read the log. Safe for concurrent use; commits are serialised.
type Table struct {
	store storage.Store
	opts  Options
	mu    sync.Mutex
	snap  *Snapshot
	stale bool // in-memory state may be behind or wrong: reload before use
	// synced is when the state was last known to be the log's tip (a
	// reload, a commit of ours, or a catch-up), by the monotonic clock.
	synced time.Time

	lostRaces     atomic.Int64   // commits retried at the next version (LostRaces)
	checkpointing atomic.Bool    // a background checkpoint is being written
	checkpoints   sync.WaitGroup // background checkpoints in flight
	cp            shadowState    // the checkpointer's copy of the state (checkpoint_shadow.go)
	// ahead is the read of the log's latest version started by CheckAhead,
	// for the next commit (ahead.go).
	ahead atomic.Pointer[aheadCheck]
	// files and tombstones are the state's sizes as of its latest change,
	// for StateSize to read without waiting for a commit in progress.
	files, tombstones atomic.Int64
}

// OpenTable loads the latest snapshot and refuses tables this writer cannot
// append to safely (CheckWritable).
func OpenTable(ctx context.Context, store storage.Store, opts Options) (*Table, error) {
	opts.defaults()
	t := &Table{store: store, opts: opts}
	if err := t.reload(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// reload re-reads the log. A handle that already knew the table refuses a
// protocol or metaData change it cannot follow (checkChange), keeping its
// old state and staying stale, so every later call refuses it too.
func (t *Table) reload(ctx context.Context) error {
	snap, err := replaySnapshot(ctx, t.store, -1, t.opts.Logger, true)
	if err != nil {
		return fmt.Errorf("open table %s: %w", t.store, err)
	}
	if t.snap != nil {
		if snap.Version < t.snap.Version {
			return t.rolledBack(fmt.Sprintf("its latest version is %d, this writer had seen version %d", snap.Version, t.snap.Version))
		}
		if snap.Version == t.snap.Version && !sameCommit(t.snap.CommitInfo, snap.CommitInfo) {
			return t.rolledBack(fmt.Sprintf("its version %d is another commit than the one this writer saw", snap.Version))
		}
		err = checkChange(snap.Version, t.snap.Protocol, t.snap.Metadata, snap.Protocol, snap.Metadata)
	} else {
		err = CheckWritable(snap.Protocol, snap.Metadata)
	}
	if err != nil {
		t.stale = true
		return fmt.Errorf("open table %s: %w", t.store, err)
	}
	snap.packFiles()
	t.snap, t.stale, t.synced = snap, false, time.Now()
	t.dropShadow()
	t.noteSize()
	return nil
}

// noteSize records the state's sizes for StateSize; called with t.mu held
// after the state changed.
func (t *Table) noteSize() {
	t.files.Store(int64(len(t.snap.Files)))
	t.tombstones.Store(int64(len(t.snap.Tombstones)))
}

// StateSize returns the active files and the tombstones the handle's
// state holds in memory, as of its latest load or commit, without waiting
// for a commit in progress (a scrape of the relay's metrics calls it).
// Both grow by one per file a commit adds or removes: active files until
// compaction replaces them, tombstones until the file retention passes.
func (t *Table) StateSize() (files, tombstones int64) {
	return t.files.Load(), t.tombstones.Load()
}

// String returns the table's location (the store's URL).
func (t *Table) String() string { return t.store.String() }

// Version returns the latest version this handle knows.
func (t *Table) Version() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snap.Version
}

// Metadata returns the table's current metaData.
func (t *Table) Metadata() Metadata {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snap.Metadata
}

// NumFiles returns the number of active files this handle knows.
func (t *Table) NumFiles() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.snap.Files)
}

// NumTombstones returns the number of removed files this handle keeps
// for its checkpoints (those not yet expired at its last checkpoint).
func (t *Table) NumTombstones() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.snap.Tombstones)
}

// Files returns the active files this handle knows (a copy, in no
// particular order).
func (t *Table) Files() []Add {
	t.mu.Lock()
	out := make([]Add, 0, len(t.snap.Files))
	for _, a := range t.snap.Files {
		out = append(out, a)
	}
	packed := t.snap.packedStats
	t.mu.Unlock()
	if packed { // outside the lock: commits need not wait for it
		for i := range out {
			out[i].Stats = unpackStats(out[i].Stats)
		}
	}
	return out
}

// TxnVersion returns the latest txn version recorded for appID.
func (t *Table) TxnVersion(appID string) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	txn, ok := t.snap.Txns[appID]
	return txn.Version, ok
}

// TxnVersions returns the latest txn version of every appId the handle
// knows (a copy).
func (t *Table) TxnVersions() map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int64, len(t.snap.Txns))
	for app, txn := range t.snap.Txns {
		out[app] = txn.Version
	}
	return out
}

// Refresh re-reads the log (e.g. before resuming after an error). Like a
// lost commit race, it accepts compatible protocol and metaData changes and
// refuses others with an IncompatibleChangeError.
func (t *Table) Refresh(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reload(ctx)
}

// Check makes sure the handle can commit: the log is read again when the
// handle is stale or idle past Options.ReloadAfter, and its latest version
// must still be there (ErrTableGone, wrapped, when no table is left).
func (t *Table) Check(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready(ctx)
}
