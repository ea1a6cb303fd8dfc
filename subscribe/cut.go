package subscribe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/txlog"
)

// Consistent cuts and whole transactions. A relay publishes, for its
// source, a resolved position R (catalog.Resolved): every event of that
// source whose commit LSN is below R is in its topic, and every source
// transaction below R that published events has its transaction record
// (package txlog). ReadCut reads several topics up to one source's R: a
// cut consistent across the topics, each source transaction whole or
// absent, handed over transaction by transaction, each with its record.
// Reading cut after cut, each from the previous one's Resolved, reads every
// event of the source once (Cuts does that).
//
// Cuts are in positions, not commit LSNs: a row's position is its
// commit_lsn mapped by the source's epochs (catalog.Positions, from its
// marker), the commit_lsn itself unless the source failed over to a
// standby that lacked events it had published. Then the new timeline's
// LSNs restart below positions already resolved, and a reader comparing
// commit LSNs would skip them; in positions they come after everything
// before. The events and transaction records that the fork records name
// as phantoms (published from the abandoned timeline) are in no cut.

// CutOptions select what ReadCut reads.
type CutOptions struct {
	Topics []string // the topics read (a topic of a topic group is read from its group's table)
	Source string   // the source (relay appId, the source column); "" when the store has one
	// After is where the cut starts: events whose position is at least
	// After (the previous cut's Resolved; 0 reads from the start).
	After int64
}

// Cut is every event of the topics from one source whose position is in
// [After, Resolved), by transaction in commit order.
type Cut struct {
	Source       string
	After        int64
	Resolved     int64
	Transactions []Transaction
}

// Transaction is one source transaction's events of the topics read, in
// (commit_lsn, seq) order. Record is its transaction record: nil for rows
// a bootstrap or rebuild copied from a snapshot (xid 0, no transaction),
// and for transactions a relay streamed with transaction records off.
type Transaction struct {
	Source     string
	Xid        int64
	CommitLSN  int64
	CommitTime time.Time
	Record     *txlog.Record
	Events     []outbox.Event
}

// ErrNoResolved: the source has no resolved position yet (its relay has
// not acknowledged anything with transaction records on).
var ErrNoResolved = errors.New("no resolved position")

// ReadCut reads one cut (see the package doc). A transaction whose record
// counts more events of a topic read than the topic holds fails the read:
// the table lost rows (or was rewritten), and the cut is not whole.
func ReadCut(ctx context.Context, store storage.Store, o CutOptions) (*Cut, error) {
	src, err := cutSource(ctx, store, o.Source)
	if err != nil {
		return nil, err
	}
	res, ok, err := catalog.ReadResolved(ctx, store, src)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("source %s: %w", src, ErrNoResolved)
	}
	cut := &Cut{Source: src, After: o.After, Resolved: max(res.Position, o.After)}
	h, err := readHistory(ctx, store, src)
	if err != nil {
		return nil, err
	}
	// The commit LSNs of the current timeline whose positions are in
	// [After, Resolved).
	lo, hi := h.pos.Through(cut.After-1)+1, h.pos.Through(cut.Resolved-1)
	var events []outbox.Event
	for _, tp := range o.Topics {
		evs, err := readTopicRange(ctx, store, tp, src, lo, hi+1)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if !h.phantoms[e.ID] {
				events = append(events, e)
			}
		}
	}
	sort.SliceStable(events, func(i, j int) bool {
		a, b := &events[i], &events[j]
		if a.CommitLSN != b.CommitLSN {
			return a.CommitLSN < b.CommitLSN
		}
		return a.Seq < b.Seq
	})
	recs, err := txlog.Read(ctx, store, txlog.Filter{Source: src, After: lo - 1, Through: hi, Topics: o.Topics})
	if err != nil {
		return nil, err
	}
	recs = slices.DeleteFunc(recs, func(r txlog.Record) bool { return h.phantomTxs[catalog.PhantomTx{Xid: r.Xid, CommitLSN: r.CommitLSN}] })
	cut.Transactions, err = group(events, recs, o.Topics, src)
	return cut, err
}

// group gathers events by transaction and checks each against its record.
func group(events []outbox.Event, recs []txlog.Record, topics []string, src string) ([]Transaction, error) {
	byLSN := make(map[int64]*txlog.Record, len(recs))
	for i := range recs {
		byLSN[recs[i].CommitLSN] = &recs[i]
	}
	var out []Transaction
	for _, e := range events {
		if n := len(out); n == 0 || out[n-1].CommitLSN != e.CommitLSN {
			out = append(out, Transaction{Source: src, Xid: e.Xid, CommitLSN: e.CommitLSN, CommitTime: e.CommitTime, Record: byLSN[e.CommitLSN]})
			delete(byLSN, e.CommitLSN)
		}
		out[len(out)-1].Events = append(out[len(out)-1].Events, e)
	}
	for i := range out {
		if err := out[i].whole(topics); err != nil {
			return nil, err
		}
	}
	if len(byLSN) > 0 {
		for _, r := range byLSN {
			return nil, fmt.Errorf("transaction %d (commit LSN %d) of %s has a record of %v but none of its events is in the topics read: a topic table lost rows", r.Xid, r.CommitLSN, src, r.Topics)
		}
	}
	return out, nil
}

// whole checks that the transaction holds as many events of each topic
// read as its record counts.
func (t *Transaction) whole(topics []string) error {
	if t.Record == nil {
		return nil
	}
	got := map[string]int64{}
	for _, e := range t.Events {
		got[e.Topic]++
	}
	for _, tp := range topics {
		if got[tp] != t.Record.Topics[tp] {
			return fmt.Errorf("transaction %d (commit LSN %d) of %s: its record counts %d events of topic %s, the topic holds %d",
				t.Xid, t.CommitLSN, t.Source, t.Record.Topics[tp], tp, got[tp])
		}
	}
	return nil
}

// history is what a source's marker and fork records say of its commit
// LSNs: their positions, and which events and records are phantoms.
type history struct {
	pos        catalog.Positions
	phantoms   map[string]bool
	phantomTxs map[catalog.PhantomTx]bool
}

func readHistory(ctx context.Context, store storage.Store, src string) (history, error) {
	h := history{phantoms: map[string]bool{}, phantomTxs: map[catalog.PhantomTx]bool{}}
	m, ok, err := catalog.ReadMarker(ctx, store, src)
	if err != nil || !ok || (m.Timeline <= 1 && len(m.Epochs) == 0) {
		return h, err // never failed over: positions are commit LSNs
	}
	if h.pos, err = m.Positions(); err != nil {
		return h, err
	}
	forks, err := catalog.ListForks(ctx, store)
	if err != nil {
		return h, err
	}
	for _, f := range forks {
		if f.AppID != src {
			continue
		}
		for _, p := range f.Phantoms {
			for _, id := range p.IDs {
				h.phantoms[id] = true
			}
		}
		for _, t := range f.PhantomTransactions {
			h.phantomTxs[t] = true
		}
	}
	return h, nil
}

// cutSource returns src, or the store's one source when src is "".
func cutSource(ctx context.Context, store storage.Store, src string) (string, error) {
	if src != "" {
		return src, nil
	}
	all, err := catalog.ListResolved(ctx, store)
	if err != nil {
		return "", err
	}
	switch len(all) {
	case 0:
		return "", fmt.Errorf("the store has no source with a resolved position: %w", ErrNoResolved)
	case 1:
		return all[0].Source, nil
	}
	names := make([]string, len(all))
	for i, r := range all {
		names[i] = r.Source
	}
	return "", fmt.Errorf("the store has %d sources (%v): name one", len(all), names)
}

// readTopicRange reads topic tp's events of source src with after <=
// commit_lsn < through, skipping files whose statistics exclude them.
func readTopicRange(ctx context.Context, store storage.Store, tp, src string, after, through int64) ([]outbox.Event, error) {
	pl, err := catalog.Locate(ctx, store, tp)
	if err != nil {
		return nil, err
	}
	st := storage.Sub(store, pl.Table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil, nil // no event committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("read topic %s: %w", tp, err)
	}
	var out []outbox.Event
	for _, add := range snap.Files {
		if !topic.MayHold(add.Stats, tp) || !topic.MayHoldLSNs(add.Stats, src, after, through-1) {
			continue
		}
		err := topic.ReadEvents(ctx, st, add, func(e outbox.Event) error {
			if e.Topic == tp && e.Source == src && e.CommitLSN >= after && e.CommitLSN < through {
				out = append(out, e)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read topic %s: %w", tp, err)
		}
	}
	return out, nil
}

// Cuts reads cut after cut from o.After, each from the previous one's
// Resolved, and hands each that holds a transaction to fn, polling every
// poll (DefaultPollInterval when 0) once caught up, until ctx ends or fn
// fails. The caller keeps the last Resolved fn returned nil for, to go on
// from there after a restart.
func Cuts(ctx context.Context, store storage.Store, o CutOptions, poll time.Duration, fn func(*Cut) error) error {
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	for {
		cut, err := ReadCut(ctx, store, o)
		switch {
		case errors.Is(err, ErrNoResolved):
		case err != nil:
			return err
		case len(cut.Transactions) > 0:
			if err := fn(cut); err != nil {
				return err
			}
			o.After, o.Source = cut.Resolved, cut.Source
			continue
		default:
			o.After, o.Source = cut.Resolved, cut.Source
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}
