package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/pgsource"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/txlog"
	"github.com/deltabus/deltabus/usererr"
)

// ErrSlotAfterFork is wrapped by FollowTimeline's refusal of a slot made
// on the new timeline after the fork: only a recovery can use the source.
var ErrSlotAfterFork = errors.New("replication slot created after the fork")

// FollowTimeline brings the record of the relay's progress (its marker)
// onto the timeline the source is on now, and returns the marker as it
// then stands. The relay calls it when its marker names another timeline
// than the source's (a promotion, or a point-in-time recovery, happened
// since it last streamed), before it streams; Recover calls it before it
// creates a slot.
//
// From the new timeline's history it reads where the relay's timeline
// ended (the fork). Every event of this source that the topics hold with a
// commit LSN at or past the fork was published from the abandoned
// timeline: those are recorded as phantoms (catalog.Fork), and when the
// topics' positions reach past the fork, a new epoch (catalog.Positions)
// lifts the new timeline's transactions above them. The fork record is
// written before the marker, and both before anything of the new timeline
// is committed, so a run that dies is simply run again.
//
// slot is the confirmed position of the slot the relay would stream from,
// nil when a recovery will create one. A slot confirmed past the fork was
// made on the new timeline after the promotion: streaming from it would
// skip the new timeline's transactions before it, so it is refused, naming
// `relay bootstrap --recover`. A source on an older timeline than the
// relay's, or on one that does not descend from it, is refused too.
func FollowTimeline(ctx context.Context, cfg Config, store storage.Store, id catalog.Identity, src pgsource.Identity,
	slot *pglogrepl.LSN, opts Options) (catalog.Marker, error) {
	cfg, opts = cfg.withDefaults(), opts.withDefaults()
	if id.Marker == nil {
		return catalog.Marker{}, errors.New("follow timeline: the relay has no marker")
	}
	m := *id.Marker
	log := opts.Log.With("slot", cfg.Slot, "app_id", id.AppID)
	switch {
	case src.Timeline == 0 || m.Timeline == src.Timeline:
		return m, nil
	case m.Timeline == 0 && slot != nil:
		// A marker of an earlier release, and a slot of this server: the
		// slot was made on this server, so the relay's progress since is on
		// this server's timeline.
		log.Info("recording the source's timeline in the relay marker", "timeline", src.Timeline)
		m.Timeline = src.Timeline
		return m, writeMarker(ctx, store, m)
	case m.Timeline == 0:
		log.Warn("the relay marker does not say which timeline its progress was made on (an earlier release wrote it): "+
			"a recovery re-reads the outbox and starts above every position, and `relay reconcile` names any event the source lacks",
			"timeline", src.Timeline)
		return m, nil
	case m.Timeline > src.Timeline:
		return m, usererr.New(nil, "the relay's progress was made on timeline %d of %s, but the source is on timeline %d: "+
			"DELTABUS_SOURCE leads to a server behind it (the old primary, or a restored backup); point it at the current primary",
			m.Timeline, id.Source, src.Timeline)
	}
	h, err := readHistory(ctx, cfg.Source, src.Timeline)
	if err != nil {
		return m, err
	}
	fork, _, ok := h.End(m.Timeline)
	if !ok {
		return m, usererr.New(nil, "the source's timeline %d does not descend from timeline %d, where the relay's progress was made: "+
			"the relay cannot tell which of its events the source still holds; run `relay bootstrap --recover` (it re-reads the outbox), then `relay reconcile`",
			src.Timeline, m.Timeline)
	}
	if slot != nil && *slot > fork {
		return m, usererr.New(ErrSlotAfterFork, "replication slot %q was created on timeline %d after the source left timeline %d at %s, where the relay's progress was made: "+
			"streaming from it would skip the new timeline's first transactions; run `relay bootstrap --recover`",
			cfg.Slot, src.Timeline, m.Timeline, fork)
	}
	return recordFork(ctx, store, id, m, src.Timeline, fork, log)
}

// TimelineHook returns the relay's FollowTimeline hook
// (relay.Relay.FollowTimeline): FollowTimeline for the slot the relay is
// about to stream from.
func TimelineHook(cfg Config, store storage.Store, opts Options) func(context.Context, catalog.Identity, pgsource.Identity, pglogrepl.LSN) (catalog.Marker, error) {
	return func(ctx context.Context, id catalog.Identity, src pgsource.Identity, slot pglogrepl.LSN) (catalog.Marker, error) {
		cfg := cfg
		cfg.AppID = id.AppID
		return FollowTimeline(ctx, cfg, store, id, src, &slot, opts)
	}
}

// recordFork scans the topics for what the abandoned timeline published
// past fork, writes the fork record, then the marker on the new timeline.
func recordFork(ctx context.Context, store storage.Store, id catalog.Identity, m catalog.Marker, tl uint32, fork pglogrepl.LSN,
	log *slog.Logger) (catalog.Marker, error) {
	known, err := knownPhantoms(ctx, store, id.AppID, tl)
	if err != nil {
		return m, err
	}
	scan, err := scanSince(ctx, store, id.AppID, fork, known)
	if err != nil {
		return m, fmt.Errorf("follow timeline: %w", err)
	}
	txs, err := phantomTransactions(ctx, store, id.AppID, fork, tl)
	if err != nil {
		return m, fmt.Errorf("follow timeline: %w", err)
	}
	epochs, err := catalog.Next(m.Epochs, tl, fork, scan.highest)
	if err != nil {
		return m, usererr.New(err, "timeline %d of %s: %s; run `relay bootstrap --recover`", tl, id.Source, err)
	}
	f := catalog.Fork{AppID: id.AppID, Source: id.Source, FromTimeline: m.Timeline, ToTimeline: tl, ForkLSN: fork.String(),
		DetectedAt: time.Now().UTC(), Highest: scan.highest, Phantoms: scan.phantoms, PhantomTransactions: txs}
	if len(epochs) > len(m.Epochs) {
		f.Epoch = &epochs[len(epochs)-1]
	}
	if err := catalog.WriteFork(ctx, store, f); err != nil {
		return m, err
	}
	attrs := []any{"from_timeline", m.Timeline, "to_timeline", tl, "fork_lsn", fork, "phantoms", f.Count(), "topics", f.Topics()}
	if f.Count() > 0 {
		log.Warn("the source failed over to a standby that had not received every event the relay published: "+
			"those events (phantoms) stay in their topics and are recorded; `relay reconcile` and `relay status` name them", attrs...)
	} else {
		log.Info("the source is on a new timeline; every event the relay published is in its history", attrs...)
	}
	m.Timeline, m.Epochs = tl, epochs
	if err := writeMarker(ctx, store, m); err != nil {
		return m, err
	}
	return m, nil
}

// phantomTransactions returns the source's transaction records at or past
// the fork that no earlier fork (to a timeline other than tl) names.
func phantomTransactions(ctx context.Context, store storage.Store, appID string, fork pglogrepl.LSN, tl uint32) ([]catalog.PhantomTx, error) {
	recs, err := txlog.Read(ctx, store, txlog.Filter{Source: appID, After: int64(fork) - 1})
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	forks, err := catalog.ListForks(ctx, store)
	if err != nil {
		return nil, err
	}
	known := map[catalog.PhantomTx]bool{}
	for _, f := range forks {
		if f.AppID == appID && f.ToTimeline != tl {
			for _, t := range f.PhantomTransactions {
				known[t] = true
			}
		}
	}
	var out []catalog.PhantomTx
	for _, r := range recs {
		if t := (catalog.PhantomTx{Xid: r.Xid, CommitLSN: r.CommitLSN}); !known[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// readHistory reads a timeline's history over a replication connection of
// its own.
func readHistory(ctx context.Context, dsn string, tl uint32) (pgsource.History, error) {
	conn, err := pgsource.ConnectReplication(ctx, dsn)
	if err != nil {
		return pgsource.History{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pgsource.ReadHistory(ctx, conn, tl)
}

// knownPhantoms returns the ids the source's earlier forks recorded: all
// but the fork to timeline tl, which a run that died before its marker is
// redoing.
func knownPhantoms(ctx context.Context, store storage.Store, appID string, tl uint32) (map[string]bool, error) {
	forks, err := catalog.ListForks(ctx, store)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, f := range forks {
		if f.AppID != appID || f.ToTimeline == tl {
			continue
		}
		for _, p := range f.Phantoms {
			for _, id := range p.IDs {
				known[id] = true
			}
		}
	}
	return known, nil
}

// forkScan is what the topics hold of one source past a fork.
type forkScan struct {
	highest  int64 // the highest position of the source in any table; -1 if none
	phantoms map[string]catalog.Phantoms
}

// scanSince reads every table that holds a position of appID: the highest
// of those positions, and the source's events with a commit LSN at or
// past from that known does not name (by topic). Only data files whose
// stats may hold such rows are read.
func scanSince(ctx context.Context, root storage.Store, appID string, from pglogrepl.LSN, known map[string]bool) (forkScan, error) {
	out := forkScan{highest: -1, phantoms: map[string]catalog.Phantoms{}}
	pl, err := newPlaces(ctx, root)
	if err != nil {
		return out, err
	}
	byTable, tables, err := tablesOf(ctx, root, pl)
	if err != nil {
		return out, err
	}
	for _, table := range tables {
		if err := out.scanTable(ctx, root, table, byTable[table], appID, from, known); err != nil {
			return out, err
		}
	}
	return out, nil
}

// tablesOf lists the registered topics by the table that holds them.
func tablesOf(ctx context.Context, root storage.Store, pl *places) (map[string][]catalog.Placement, []string, error) {
	names, err := catalog.ListTopics(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	byTable := map[string][]catalog.Placement{}
	var tables []string
	for _, name := range names {
		p, err := pl.of(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if byTable[p.Table] == nil {
			tables = append(tables, p.Table)
		}
		byTable[p.Table] = append(byTable[p.Table], p)
	}
	return byTable, tables, nil
}

func (s *forkScan) scanTable(ctx context.Context, root storage.Store, table string, ps []catalog.Placement, appID string,
	from pglogrepl.LSN, known map[string]bool) error {
	st := storage.Sub(root, table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if errors.Is(err, delta.ErrNoTable) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", tableName(table), err)
	}
	ours := map[string]bool{}
	for _, p := range ps {
		if txn, ok := snap.Txns[p.TxnAppID(appID)]; ok {
			s.highest = max(s.highest, txn.Version)
			ours[p.Topic] = true
		}
	}
	if len(ours) == 0 || table == outbox.DeadLetterTopic {
		return nil // a dead letter is not an event a consumer acts on
	}
	mine := func(source string) bool { return source == appID || (source == "" && catalog.LegacyLayout(appID)) }
	for _, add := range snap.Files {
		if !topic.MayHoldLSNs(add.Stats, appID, int64(from), math.MaxInt64) {
			continue
		}
		err := topic.ReadEventIDs(ctx, st, add, func(e topic.EventRef) error {
			name := table
			if ps[0].Shared() {
				name = e.Topic
			}
			if e.CommitLSN < int64(from) || !mine(e.Source) || !ours[name] || known[e.ID] {
				return nil
			}
			s.add(name, table, snap.Version, e)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read events of %s: %w", tableName(table), err)
		}
	}
	return nil
}

func (s *forkScan) add(name, table string, version int64, e topic.EventRef) {
	p := s.phantoms[name]
	lsn := pglogrepl.LSN(e.CommitLSN)
	if len(p.IDs) == 0 {
		p = catalog.Phantoms{Table: table, Version: version, FirstLSN: lsn.String(), LastLSN: lsn.String()}
	}
	p.IDs = append(p.IDs, e.ID)
	if first, _ := pglogrepl.ParseLSN(p.FirstLSN); lsn < first {
		p.FirstLSN = lsn.String()
	}
	if last, _ := pglogrepl.ParseLSN(p.LastLSN); lsn > last {
		p.LastLSN = lsn.String()
	}
	s.phantoms[name] = p
}

// sourcePositions returns the positions of the source whose appId is
// appID, from its marker (commit LSNs when it has none).
func sourcePositions(ctx context.Context, store storage.Store, appID string) (catalog.Positions, error) {
	m, ok, err := catalog.ReadMarker(ctx, store, appID)
	if err != nil || !ok {
		return catalog.Positions{}, err
	}
	return m.Positions()
}
