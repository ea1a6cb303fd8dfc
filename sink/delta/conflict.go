package delta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deltabus/deltabus/storage"
)

// catchUp reads the commits that beat us, in order, and applies them to the
// in-memory snapshot. A winner that changes the protocol or metaData in a
// way this handle cannot follow stops it (IncompatibleChangeError; the
// winner is not applied and the handle must be reopened); a compatible
// change is applied and logged. check then judges each winner against the
// commit being retried: a winner it refuses is still applied (the snapshot
// keeps matching the log) and its error returned.
func (t *Table) catchUp(ctx context.Context, check func(int64, []Action) error) error {
	for {
		v := t.snap.Version + 1
		data, err := t.store.Get(ctx, CommitKey(v))
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read winning commit %d: %w", v, err)
		}
		acts, err := ParseCommit(data)
		if err != nil {
			t.stale = true
			return fmt.Errorf("parse winning commit %d: %w", v, err)
		}
		if p, m, changed := commitTableState(acts, t.snap.Protocol, t.snap.Metadata); changed {
			if err := checkChange(v, t.snap.Protocol, t.snap.Metadata, p, m); err != nil {
				t.stale = true
				return err
			}
			t.opts.Logger.Info("delta: another writer changed the table's protocol or metadata compatibly; carrying on",
				"table", t.store.String(), "version", v)
		}
		var refused error
		if check != nil {
			refused = check(v, acts)
		}
		t.applyCommit(v, acts, time.Time{})
		if refused != nil {
			return refused
		}
	}
}

// txnConflict judges a winning commit against a blind append carrying txn:
// our appId at a version ≥ ours means the batch is committed (a zombie
// won); at a lower version, another live writer shares our appId.
func txnConflict(v int64, acts []Action, txn *Txn) error {
	if txn == nil {
		return nil
	}
	for _, a := range acts {
		switch {
		case a.Txn == nil || a.Txn.AppID != txn.AppID:
		case a.Txn.Version >= txn.Version:
			return fmt.Errorf("version %d holds appId %q txn %d ≥ batch %d: %w", v, txn.AppID, a.Txn.Version, txn.Version, ErrAlreadyCommitted)
		default:
			return fmt.Errorf("version %d holds appId %q txn %d < batch %d: %w", v, txn.AppID, a.Txn.Version, txn.Version, ErrConcurrentWriter)
		}
	}
	return nil
}
