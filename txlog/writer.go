package txlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/storage"
)

// ErrFenced: the table already holds records of this appId at or past the
// commit's: another instance of the relay (a zombie after a takeover)
// wrote them. The caller stops, as a fenced topic commit does.
var ErrFenced = delta.ErrAlreadyCommitted

// Writer commits one source's transaction records. It is not safe for
// concurrent use; one relay session's committer owns it.
type Writer struct {
	st    storage.Store // the table's folder
	appID string
	tbl   *delta.Table
	enc   encoder
}

// NewWriter returns the writer of appID's records under root.
func NewWriter(root storage.Store, appID string) *Writer {
	return &Writer{st: storage.Sub(root, Table), appID: appID}
}

func (w *Writer) open(ctx context.Context) error {
	if w.tbl != nil {
		return nil
	}
	meta, proto := newTable()
	if err := delta.CreateTable(ctx, w.st, meta, proto, nil); err != nil {
		return fmt.Errorf("create %s: %w", Table, err)
	}
	tbl, err := delta.OpenTable(ctx, w.st, delta.Options{})
	if err != nil {
		return fmt.Errorf("open %s: %w", Table, err)
	}
	w.tbl = tbl
	return nil
}

// Position is the commit LSN of the last transaction recorded for the
// source (the txn version of its appId), 0 when none: a transaction at or
// below it has its record already.
func (w *Writer) Position(ctx context.Context) (int64, error) {
	if err := w.open(ctx); err != nil {
		return 0, err
	}
	v, ok := w.tbl.TxnVersion(w.appID)
	if !ok {
		return 0, nil
	}
	return v, nil
}

// Commit appends ents, in commit order, as one Delta commit whose txn is
// {appId, commit LSN of the last}. A commit already made by this appId at
// or past it fails with ErrFenced.
func (w *Writer) Commit(ctx context.Context, ents []Entry) error {
	if len(ents) == 0 {
		return nil
	}
	if err := w.open(ctx); err != nil {
		return err
	}
	data, err := w.enc.encode(w.appID, ents)
	if err != nil {
		return fmt.Errorf("encode transaction records: %w", err)
	}
	name := fmt.Sprintf("part-00000-%s.c000.snappy.parquet", uuid.NewString())
	if err := w.st.Put(ctx, name, data); err != nil {
		return fmt.Errorf("write %s/%s: %w", Table, name, err)
	}
	add := delta.Add{Path: name, PartitionValues: map[string]*string{}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: stats(w.appID, ents)}
	txn := &delta.Txn{AppID: w.appID, Version: ents[len(ents)-1].CommitLSN}
	if _, err := w.tbl.Commit(ctx, delta.CommitActions{Adds: []delta.Add{add}, Txn: txn}); err != nil {
		if errors.Is(err, delta.ErrAlreadyCommitted) {
			_ = w.st.Delete(ctx, name)
		}
		return fmt.Errorf("commit %d transaction records to %s: %w", len(ents), Table, err)
	}
	return nil
}
