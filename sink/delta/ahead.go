package delta

import (
	"context"
	"time"
)

// aheadFresh is how old a read started by CheckAhead may be for the next
// commit to rely on it. A batch's data files take milliseconds on local
// disk and tens of milliseconds on S3; an older answer (a batch that
// waited, or failed and was retried) is read again.
const aheadFresh = 250 * time.Millisecond

// aheadCheck is one read of the version the next commit follows, made
// while that commit's data files are written.
type aheadCheck struct {
	version int64
	started time.Time // monotonic
	done    chan struct{}
	err     error  // set before done is closed
	data    []byte // the commit file's bytes, set before done is closed
}

// CheckAhead starts, in the background, the read Commit makes before its
// put (checkPrevious: the version the commit follows must still be in the
// log), so that a writer that calls it while it writes the commit's data
// files takes that round trip off the commit's path: on S3 a GET before
// the log entry's PUT. The next Commit relies on the answer only if it was
// found, is at most aheadFresh old and is of the version the commit
// follows; otherwise it reads as it always did. A table that is stale, has
// no version yet or has a commit in progress (whose version would make
// this read useless) is not read ahead. The read's context is ctx without
// its cancellation, so that a caller's scope ending (an errgroup's) does
// not throw the answer away; it is bounded by aheadFresh.
func (t *Table) CheckAhead(ctx context.Context) {
	if !t.mu.TryLock() {
		return
	}
	v, stale := t.snap.Version, t.stale
	t.mu.Unlock()
	if v < 0 || stale {
		return
	}
	a := &aheadCheck{version: v, started: time.Now(), done: make(chan struct{})}
	t.ahead.Store(a)
	go func() {
		defer close(a.done)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), aheadFresh)
		defer cancel()
		a.data, a.err = t.store.Get(rctx, CommitKey(v))
	}()
}

// foundAhead reports whether a read started by CheckAhead found version
// v, the commit known (sameCommitData), waiting for it if it is still
// under way. It consumes the read: each serves one commit at most.
func (t *Table) foundAhead(ctx context.Context, v int64, known *CommitInfo) (bool, error) {
	a := t.ahead.Swap(nil)
	if a == nil || a.version != v || time.Since(a.started) > aheadFresh {
		return false, nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return a.err == nil && sameCommitData(known, a.data), nil
}
