package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/storage"
)

// CommitActions is one blind append: data files plus, for exactly-once, the
// txn recording the batch's position in the source.
type CommitActions struct {
	Adds []Add
	Txn  *Txn // LastUpdated is set by Commit
	// Txns are further txns of the commit, one per appId (a topic group's
	// table records each of its topics' positions: catalog.Placement).
	Txns []Txn
	// Operation defaults to "STREAMING UPDATE" with a Txn, else "WRITE".
	Operation string
	// OperationParameters are JSON-encoded strings, as delta-spark writes
	// them; nil = defaults for the operation.
	OperationParameters map[string]string
	// Conflict, if set, judges each commit that won a version this commit
	// tried (after the txn checks): an error stops the commit, which then
	// writes nothing. A writer whose appends must not repeat rows another
	// writer may have added meanwhile (package republish) reads the
	// winners' files here.
	Conflict func(version int64, winner []Action) error
}

// putRetries bounds re-sending the same bytes after an unknown outcome.
const putRetries = 3

// Commit appends actions as the next version and returns it. Every add gets
// dataChange=true and non-null partitionValues. The file holds commitInfo
// first, then the adds, then the txn, via PutIfAbsent. When another writer
// won the version, Commit reads the winners: a protocol/metaData change it
// cannot follow gives an IncompatibleChangeError (ErrIncompatibleChange;
// changes of table properties, name or description are followed); our
// appId at a version ≥ ours gives ErrAlreadyCommitted; our appId at a lower
// version gives ErrConcurrentWriter; otherwise it retries at the next
// version. A batch whose txn is already reached returns ErrAlreadyCommitted
// without writing. On error the returned version is -1. A checkpoint is
// written after versions that are multiples of delta.checkpointInterval;
// its failure is logged, never returned.
func (t *Table) Commit(ctx context.Context, ca CommitActions) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.ready(ctx); err != nil {
		return -1, err
	}
	if err := t.validate(&ca); err != nil {
		return -1, fmt.Errorf("commit to %s: %w", t.store, err)
	}
	txns := ca.txns()
	for i := range txns {
		if err := t.checkTxn(&txns[i]); err != nil {
			return -1, err
		}
	}
	readVersion, txnID := t.snap.Version, uuid.NewString()
	render := func() ([]Action, error) { return t.build(ca, readVersion, txnID) }
	check := func(v int64, acts []Action) error {
		for i := range txns {
			if err := txnConflict(v, acts, &txns[i]); err != nil {
				return err
			}
		}
		if ca.Conflict != nil {
			return ca.Conflict(v, acts)
		}
		return nil
	}
	return t.commitLoop(ctx, render, check)
}

// ready reloads the log when the in-memory state may be behind or wrong,
// or has not been synced for Options.ReloadAfter, and checks that the
// version the next commit follows is still there (checkPrevious).
func (t *Table) ready(ctx context.Context) error {
	if t.stale || time.Since(t.synced) > t.opts.ReloadAfter {
		if err := t.reload(ctx); err != nil {
			return err
		}
	}
	return t.checkPrevious(ctx)
}

// commitLoop writes the commit render makes at the next version. On a lost
// race it catches up with the winners (check may refuse one; catchUp has
// already applied it) and renders again for the next version.
func (t *Table) commitLoop(ctx context.Context, render func() ([]Action, error), check func(int64, []Action) error) (int64, error) {
	for attempt := 0; attempt < t.opts.MaxAttempts; attempt++ {
		v := t.snap.Version + 1
		acts, err := render()
		if err != nil {
			return -1, fmt.Errorf("commit to %s version %d: %w", t.store, v, err)
		}
		data, err := EncodeCommit(acts)
		if err != nil {
			return -1, fmt.Errorf("commit to %s version %d: %w", t.store, v, err)
		}
		err = t.put(ctx, v, data)
		if err == nil {
			t.applyCommit(v, acts, t.opts.Now())
			t.synced = time.Now()
			t.maybeCheckpoint(ctx)
			return v, nil
		}
		if !errors.Is(err, storage.ErrExists) {
			t.stale = true // outcome unknown: the reload's txn check settles a retry
			return -1, fmt.Errorf("commit to %s version %d: %w", t.store, v, err)
		}
		t.lostRaces.Add(1)
		if err := t.catchUp(ctx, check); err != nil {
			return -1, fmt.Errorf("commit to %s version %d: %w", t.store, v, err)
		}
	}
	return -1, fmt.Errorf("commit to %s: gave up after %d conflicting attempts", t.store, t.opts.MaxAttempts)
}

// checkPrevious makes sure the version the next commit follows is still in
// the log before anything is put. A commit file name freed by log clean-up
// (or a deleted table) would take a put-if-absent, and a commit there is
// one no reader ever sees: when the handle's latest version is gone, the
// log is read again; when no table is left, the commit fails with
// ErrTableGone. (The winners a lost race reads are checked the same way,
// by being read.) A read CheckAhead started, if it found the version,
// stands for the read here.
//
// The version found must be the commit the handle knows (its commitInfo's
// txnId): a table restored from an older copy and written on by others up
// to that version again would otherwise take the commit on top of a log
// that lost commits (ErrRolledBack; so does a reload that finds the log's
// latest version below the handle's).
func (t *Table) checkPrevious(ctx context.Context) error {
	v := t.snap.Version
	if v < 0 {
		return nil
	}
	found, err := t.foundAhead(ctx, v, t.snap.CommitInfo)
	if err != nil {
		return fmt.Errorf("commit to %s: check version %d: %w", t.store, v, err)
	}
	if found {
		return nil
	}
	data, err := t.store.Get(ctx, CommitKey(v))
	if errors.Is(err, storage.ErrNotFound) {
		err = t.reload(ctx)
		if errors.Is(err, ErrNoTable) || errors.Is(err, ErrBrokenLog) {
			return fmt.Errorf("commit to %s: %w: commit %d is missing (the table was deleted or its log truncated): %w", t.store, ErrTableGone, v, err)
		}
	} else if err == nil && !sameCommitData(t.snap.CommitInfo, data) {
		err = t.rolledBack(fmt.Sprintf("its version %d is another commit than the one this writer saw", v))
	}
	if err != nil {
		return fmt.Errorf("commit to %s: check version %d: %w", t.store, v, err)
	}
	return nil
}

// sameCommit reports whether the commitInfo read of a version (nil when
// it could not be read: a checkpoint whose commit file was cleaned up)
// may be of the commit known, the handle's: their txnIds are equal, or
// either is unknown (a writer that records none leaves nothing to tell
// commits apart by).
func sameCommit(known, read *CommitInfo) bool {
	if known == nil || known.TxnID == "" || read == nil {
		return true
	}
	return known.TxnID == read.TxnID
}

// sameCommitData is sameCommit of known and a commit file's bytes, which
// hold the commit's commitInfo if it has one.
func sameCommitData(known *CommitInfo, data []byte) bool {
	if known == nil || known.TxnID == "" {
		return true
	}
	ci, err := firstCommitInfo(data)
	return err == nil && ci != nil && ci.TxnID == known.TxnID
}

// LostRaces returns how many times this handle's commits lost a version to
// another writer and were retried at the next one.
func (t *Table) LostRaces() int64 { return t.lostRaces.Load() }

// txns returns every txn of the commit: Txn, then Txns.
func (ca *CommitActions) txns() []Txn {
	if ca.Txn == nil {
		return ca.Txns
	}
	return append([]Txn{*ca.Txn}, ca.Txns...)
}

func (t *Table) validate(ca *CommitActions) error {
	txns := ca.txns()
	seen := make(map[string]bool, len(txns))
	for _, x := range txns {
		if x.AppID == "" {
			return errors.New("txn has an empty appId")
		}
		if seen[x.AppID] {
			return fmt.Errorf("two txns of appId %q in one commit", x.AppID)
		}
		seen[x.AppID] = true
	}
	if len(ca.Adds) == 0 && len(txns) == 0 {
		return errors.New("nothing to commit")
	}
	return t.validateAdds(ca.Adds, true)
}

// validateAdds checks adds (unique non-empty paths, sizes, a partition
// value for exactly the table's partition columns) and sets their
// dataChange and non-null partitionValues.
func (t *Table) validateAdds(adds []Add, dataChange bool) error {
	parts := t.snap.Metadata.PartitionColumns
	seen := map[string]bool{}
	for i := range adds {
		a := &adds[i]
		if a.Path == "" || a.Size < 0 {
			return fmt.Errorf("add %d: empty path or negative size", i)
		}
		if k := FileKey(a.Path, a.DeletionVector); seen[k] {
			return fmt.Errorf("add %d: path %q added twice", i, a.Path)
		} else {
			seen[k] = true
		}
		a.DataChange = dataChange
		if a.PartitionValues == nil {
			a.PartitionValues = map[string]*string{}
		}
		for _, c := range parts {
			if _, ok := a.PartitionValues[c]; !ok {
				return fmt.Errorf("add %q: partitionValues lacks partition column %q", a.Path, c)
			}
		}
		if len(a.PartitionValues) != len(parts) {
			return fmt.Errorf("add %q: partitionValues has %d keys, table has %d partition columns", a.Path, len(a.PartitionValues), len(parts))
		}
	}
	return nil
}

// checkTxn refuses a batch the table already holds.
func (t *Table) checkTxn(txn *Txn) error {
	if txn == nil {
		return nil
	}
	if cur, ok := t.snap.Txns[txn.AppID]; ok && cur.Version >= txn.Version {
		return fmt.Errorf("commit to %s: appId %q is at txn version %d, batch %d: %w",
			t.store, txn.AppID, cur.Version, txn.Version, ErrAlreadyCommitted)
	}
	return nil
}

// build renders the commit: commitInfo first, then adds, then txn.
func (t *Table) build(ca CommitActions, readVersion int64, txnID string) ([]Action, error) {
	now := t.opts.Now()
	ms := now.UnixMilli()
	ci, err := t.commitInfo(ca, ms, readVersion, txnID)
	if err != nil {
		return nil, err
	}
	txns := ca.txns()
	acts := make([]Action, 0, len(ca.Adds)+len(txns)+1)
	acts = append(acts, Action{CommitInfo: ci})
	for i := range ca.Adds {
		acts = append(acts, Action{Add: &ca.Adds[i]})
	}
	for _, txn := range txns {
		txn.LastUpdated = &ms
		acts = append(acts, Action{Txn: &txn})
	}
	return acts, nil
}

func (t *Table) commitInfo(ca CommitActions, ms, readVersion int64, txnID string) (*CommitInfo, error) {
	txns := ca.txns()
	var first *Txn
	if len(txns) > 0 {
		first = &txns[0]
	}
	op := ca.Operation
	if op == "" {
		op = "WRITE"
		if first != nil {
			op = "STREAMING UPDATE"
		}
	}
	params := ca.OperationParameters
	if params == nil {
		params = t.defaultParams(op, first)
	}
	var bytes, rows int64
	rowsKnown := true
	for _, a := range ca.Adds {
		bytes += a.Size
		n, ok := StatsNumRecords(a.Stats)
		rows, rowsKnown = rows+n, rowsKnown && ok
	}
	metrics := map[string]string{"numAddedFiles": strconv.Itoa(len(ca.Adds)), "numRemovedFiles": "0",
		"numOutputBytes": strconv.FormatInt(bytes, 10)}
	if rowsKnown {
		metrics["numOutputRows"] = strconv.FormatInt(rows, 10)
	}
	return t.opCommitInfo(opInfo{op: op, params: params, blind: true, metrics: metrics}, ms, readVersion, txnID)
}

// opInfo is what commitInfo records of an operation besides its timing.
type opInfo struct {
	op string
	// isolation is commitInfo.isolationLevel: "" = Serializable (appends,
	// metadata); a rewrite that changes no data (OPTIMIZE) records
	// SnapshotIsolation, as delta-spark does.
	isolation string
	params    any // operationParameters
	blind     bool
	metrics   map[string]string
}

// opCommitInfo builds the commitInfo of a commit based on readVersion, with
// inCommitTimestamp max(ms, previous ICT + 1) when the table has ICT on.
func (t *Table) opCommitInfo(o opInfo, ms, readVersion int64, txnID string) (*CommitInfo, error) {
	isolation := o.isolation
	if isolation == "" {
		isolation = "Serializable"
	}
	raw := map[string]any{"operation": o.op, "operationParameters": o.params, "readVersion": readVersion,
		"isolationLevel": isolation, "isBlindAppend": o.blind, "engineInfo": t.opts.EngineInfo,
		"operationMetrics": o.metrics}
	ci, err := newCommitInfo(raw, ms, txnID)
	if err != nil {
		return nil, err
	}
	if ictEnabled(t.snap.Protocol, t.snap.Metadata) {
		ict := ms
		if prev := t.snap.CommitInfo; prev != nil && prev.InCommitTimestamp != nil {
			ict = max(ict, *prev.InCommitTimestamp+1)
		}
		ci.InCommitTimestamp = &ict
	}
	return ci, nil
}

func (t *Table) defaultParams(op string, txn *Txn) map[string]string {
	if op == "STREAMING UPDATE" && txn != nil {
		return map[string]string{"outputMode": "Append", "queryId": txn.AppID, "epochId": strconv.FormatInt(txn.Version, 10)}
	}
	pc, _ := json.Marshal(nonNil(t.snap.Metadata.PartitionColumns))
	return map[string]string{"mode": "Append", "partitionBy": string(pc)}
}

// newCommitInfo builds a CommitInfo from free-form fields.
func newCommitInfo(fields map[string]any, ms int64, txnID string) (*CommitInfo, error) {
	ci := &CommitInfo{Timestamp: &ms, TxnID: txnID, Raw: map[string]json.RawMessage{}}
	for k, v := range fields {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("commitInfo.%s: %w", k, err)
		}
		ci.Raw[k] = b
	}
	return ci, nil
}

// put writes the commit file; an unknown outcome is resolved by re-sending
// the same bytes (the Store contract makes that idempotent).
func (t *Table) put(ctx context.Context, v int64, data []byte) error {
	var err error
	for i := 0; i < putRetries; i++ {
		if err = t.store.PutIfAbsent(ctx, CommitKey(v), data); err == nil || errors.Is(err, storage.ErrExists) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		t.opts.Logger.Warn("delta: commit put failed, retrying same bytes", "table", t.store.String(), "version", v, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(100*(i+1)) * time.Millisecond):
		}
	}
	return err
}

// maybeCheckpoint writes a checkpoint after versions that are multiples of
// the interval; failures are logged only. With Options.AsyncCheckpoints it
// writes a copy of the state in the background (one at a time per table; a
// checkpoint due while one is still being written is skipped), so the next
// commit does not wait for it.
func (t *Table) maybeCheckpoint(ctx context.Context) {
	v, interval := t.snap.Version, CheckpointInterval(t.snap.Metadata)
	if v == 0 || v%interval != 0 {
		return
	}
	if t.spaced(v, interval) {
		t.opts.Logger.Debug("delta: checkpoint skipped, the previous one is recent", "table", t.store.String(), "version", v)
		return
	}
	t.snap.expireTombstones(t.opts.Now())
	t.noteSize()
	if !t.opts.AsyncCheckpoints {
		t.writeCheckpoint(ctx, t.snap)
		return
	}
	if !t.checkpointing.CompareAndSwap(false, true) {
		t.opts.Logger.Debug("delta: checkpoint skipped, previous one still being written", "table", t.store.String(), "version", v)
		return
	}
	now := t.opts.Now()
	base, pending, keep := t.handOver(now, v)
	t.checkpoints.Add(1)
	go func() {
		defer t.checkpoints.Done()
		defer t.checkpointing.Store(false)
		snap := replayShadow(base, pending, v)
		if snap == nil {
			t.opts.Logger.Error("delta: checkpoint skipped, the checkpointer's copy of the state is not at the version due (a bug: please report it); the next one clones the state", "table", t.store.String(), "version", v)
			return
		}
		snap.expireTombstones(now)
		if keep {
			t.cp.shadow = snap // read only after checkpointing is won again
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		if err := t.opts.CheckpointGate.enter(cctx); err != nil {
			t.opts.Logger.Warn("delta: checkpoint skipped, gate held too long", "table", t.store.String(), "version", snap.Version, "err", err)
			return
		}
		defer t.opts.CheckpointGate.leave(time.Now())
		t.writeCheckpoint(cctx, snap)
	}()
}

func (t *Table) writeCheckpoint(ctx context.Context, snap *Snapshot) {
	if err := WriteCheckpoint(ctx, t.store, snap, t.opts.Now()); err != nil {
		t.opts.Logger.Warn("delta: checkpoint failed (commit stands)", "table", t.store.String(), "version", snap.Version, "err", err)
	}
}

// Wait waits for background checkpoints to finish.
func (t *Table) Wait() { t.checkpoints.Wait() }
