package delta

import (
	"time"
)

// A background checkpoint encodes the table's state at the version it is
// due at while the writer goes on committing, so it needs a copy of that
// state. Cloning the state on the commit path costs a few milliseconds per
// 10,000 files, every checkpoint interval: on a table that gains hundreds
// of commits a second that is a stall every fraction of a second, seen in
// every commit latency behind it. So a table that checkpoints often keeps
// a shadow: the checkpointer's own copy of the state, which the commit
// path never touches. The commit path only records each commit it applies
// (pending); when a checkpoint is due it hands the recorded commits over
// and the checkpointer replays them onto the shadow before encoding it.
// Ownership moves with Table.checkpointing: the commit path reads shadow
// only after winning it, the checkpointer writes shadow before releasing
// it.
//
// A table whose previous checkpoint is older than shadowKeep does not keep
// one (cloning once a minute stalls nothing, and a writer of many quiet
// tables would otherwise hold their state twice); a reload, which replaces
// the state, drops it.

// shadowKeep is how recent a table's previous checkpoint must be for the
// table to keep a shadow of its state.
const shadowKeep = time.Minute

// shadowCommit is one commit applied to the state since the shadow's
// version.
type shadowCommit struct {
	version int64
	acts    []Action
	mtime   time.Time
}

// shadowState is the Table's part of the above; the commit path's fields
// are guarded by Table.mu, shadow by Table.checkpointing.
type shadowState struct {
	live     bool           // the checkpointer keeps a shadow: record the commits
	pending  []shadowCommit // commits applied since the shadow's version
	handed   time.Time      // when the last checkpoint was handed over
	handedAt int64          // and its version
	shadow   *Snapshot      // the checkpointer's copy, at the last checkpoint's version
}

// applyCommit applies a commit of ours or of another writer to the state
// and records it for the shadow.
func (t *Table) applyCommit(v int64, acts []Action, mtime time.Time) {
	if t.snap.packedStats {
		acts = packAdds(acts)
	}
	t.snap.applyCommit(v, acts, mtime)
	t.noteSize()
	if t.cp.live {
		t.cp.pending = append(t.cp.pending, shadowCommit{version: v, acts: acts, mtime: mtime})
	}
}

// dropShadow forgets the shadow: the state was replaced.
func (t *Table) dropShadow() {
	t.cp.live, t.cp.pending = false, nil
}

// handOver returns the state for the checkpoint due now, as the
// checkpointer will see it once it has replayed pending onto base (base is
// a fresh clone when there is no usable shadow), and whether the
// checkpointer should keep it as the next shadow. The caller has won
// Table.checkpointing.
func (t *Table) handOver(now time.Time, v int64) (base *Snapshot, pending []shadowCommit, keep bool) {
	keep = !t.cp.handed.IsZero() && now.Sub(t.cp.handed) < shadowKeep
	if t.cp.live && t.cp.shadow != nil {
		base, pending = t.cp.shadow, t.cp.pending
	} else {
		base = t.snap.clone()
	}
	t.cp.shadow, t.cp.handed, t.cp.handedAt = nil, now, v
	t.cp.live, t.cp.pending = keep, nil
	return base, pending, keep
}

// replayShadow brings base up to version v with pending, on the
// checkpointer's goroutine. It returns nil when the result is not at v (a
// commit was not recorded: a bug this check turns into one clone).
func replayShadow(base *Snapshot, pending []shadowCommit, v int64) *Snapshot {
	for _, c := range pending {
		base.applyCommit(c.version, c.acts, c.mtime)
	}
	if base.Version != v {
		return nil
	}
	return base
}

// maxSpacedIntervals bounds the checkpoints CheckpointSpacing skips: a
// reader of a hot table replays at most this many intervals of commits
// after the checkpoint it reads (1,000 commits at the relay's interval).
const maxSpacedIntervals = 10

// spaced reports whether the background checkpoint due at version v is
// skipped to keep the table's checkpoints CheckpointSpacing apart. A
// checkpoint's cost grows with the table's files and a hot table's
// checkpoints with its commit rate: a table gaining hundreds of commits a
// second and thousands of files a minute would otherwise checkpoint every
// fraction of a second, each time encoding its whole state beside the
// commits (on the relay's one core, a tenth of the processor and the tail
// of every commit's latency). Quiet tables, reaching the interval less
// often than the spacing, checkpoint at every interval.
func (t *Table) spaced(v, interval int64) bool {
	c := &t.cp
	return t.opts.AsyncCheckpoints && t.opts.CheckpointSpacing > 0 && !c.handed.IsZero() &&
		t.opts.Now().Sub(c.handed) < t.opts.CheckpointSpacing && v-c.handedAt < maxSpacedIntervals*interval
}
