// Package verify checks Delta topic tables against the source outbox row by
// row: every source row is in its topic exactly once (or in _dead_letter if
// it could not be routed), nothing is in a topic that the source does not
// hold, and each topic's rows are in source commit order (commit_lsn, seq)
// across Delta versions. The demo and the end-to-end tests use it; the
// reconciler is the production tool for the same question at scale.
package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// Logged is one row of a topic table with where it landed.
type Logged struct {
	ID          string
	CommitLSN   int64
	Seq         int32
	CommitTime  time.Time // source commit time
	Source      string    // appId of the relay that wrote it ("" in rows of older releases)
	Version     int64     // Delta version that added it
	VersionTime time.Time // that version's commit timestamp
}

// ReadTopic returns a topic's rows in version order, and within a version
// in (commit_lsn, seq) order: the change feed from version 0 of the table
// that holds it (its own, or its group's, of which it reads the topic's
// rows only). When maintenance has cleaned up the log or vacuumed the
// files early versions added, it reads the latest snapshot instead, in
// (commit_lsn, seq) order, with Version -1.
func ReadTopic(ctx context.Context, root storage.Store, name string) ([]Logged, error) {
	p, err := catalog.Locate(ctx, root, name)
	if err != nil {
		return nil, err
	}
	rows, err := readChanges(ctx, root, p)
	if errors.Is(err, delta.ErrLogCleaned) || errors.Is(err, storage.ErrNotFound) {
		return readSnapshot(ctx, root, p)
	}
	return rows, err
}

// holds returns whether a row of topic belongs to the placement's topic.
func holds(p catalog.Placement, topic string) bool { return !p.Shared() || topic == p.Topic }

// readSnapshot reads the rows of the latest snapshot's files.
func readSnapshot(ctx context.Context, root storage.Store, p catalog.Placement) ([]Logged, error) {
	name, st := p.Topic, storage.Sub(root, p.Table)
	snap, err := delta.LoadSnapshot(ctx, st, -1)
	if err != nil {
		return nil, fmt.Errorf("topic %q: %w", name, err)
	}
	var rows []Logged
	for _, add := range snap.Files {
		if p.Shared() && !topic.MayHold(add.Stats, name) {
			continue
		}
		err := topic.ReadEvents(ctx, st, add, func(e outbox.Event) error {
			if holds(p, e.Topic) {
				rows = append(rows, Logged{ID: e.ID, CommitLSN: e.CommitLSN, Seq: e.Seq, CommitTime: e.CommitTime, Source: e.Source, Version: -1})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("topic %q file %s: %w", name, add.Path, err)
		}
	}
	sortRows(rows)
	return rows, nil
}

func readChanges(ctx context.Context, root storage.Store, p catalog.Placement) ([]Logged, error) {
	name, st := p.Topic, storage.Sub(root, p.Table)
	var rows []Logged
	err := delta.ReadChanges(ctx, st, 0, -1, func(cf delta.ChangeFile) error {
		if cf.ChangeType != "insert" {
			return fmt.Errorf("topic %q version %d: unexpected change type %q", name, cf.Version, cf.ChangeType)
		}
		if p.Shared() && !topic.MayHold(cf.Stats, name) {
			return nil
		}
		err := topic.ReadEvents(ctx, st, delta.Add{Path: cf.Path}, func(e outbox.Event) error {
			if holds(p, e.Topic) {
				rows = append(rows, Logged{ID: e.ID, CommitLSN: e.CommitLSN, Seq: e.Seq, CommitTime: e.CommitTime, Source: e.Source,
					Version: cf.Version, VersionTime: cf.Timestamp})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("topic %q version %d file %s: %w", name, cf.Version, cf.Path, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortRows(rows)
	return rows, nil
}

// sortRows orders rows by version, then (commit_lsn, seq).
func sortRows(rows []Logged) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.CommitLSN != b.CommitLSN {
			return a.CommitLSN < b.CommitLSN
		}
		return a.Seq < b.Seq
	})
}

// Report is the outcome of Compare.
type Report struct {
	SourceRows int64
	Topics     map[string][]Logged
	// Phantoms are the events, by topic, that a fork record
	// (catalog.Fork) names: published from a timeline the source later
	// abandoned. They are not in the source, and they are not problems.
	Phantoms  map[string][]string
	Problems  []string // empty when the log is an exact account of the source
	Latencies []time.Duration
}

// OK reports whether no problem was found.
func (r Report) OK() bool { return len(r.Problems) == 0 }

const maxProblems = 50

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else if len(r.Problems) == maxProblems {
		r.Problems = append(r.Problems, "... more problems omitted")
	}
}

// Compare reads every row of the outbox table and every registered topic
// table and reports each difference.
func Compare(ctx context.Context, conn *pgx.Conn, outboxTable string, root storage.Store) (Report, error) {
	rep := Report{Topics: map[string][]Logged{}, Phantoms: map[string][]string{}}
	want, err := sourceRows(ctx, conn, outboxTable)
	if err != nil {
		return rep, err
	}
	phantoms, err := recordedPhantoms(ctx, root)
	if err != nil {
		return rep, err
	}
	rep.SourceRows = int64(len(want))
	names, err := catalog.ListTopics(ctx, root)
	if err != nil {
		return rep, err
	}
	seen := make(map[string]string, len(want)) // id -> topic it was found in
	for _, name := range names {
		rows, err := ReadTopic(ctx, root, name)
		if err != nil {
			return rep, err
		}
		rep.Topics[name] = rows
		checkTopic(&rep, name, rows, want, seen, phantoms)
	}
	for id, t := range want {
		if _, ok := seen[id]; !ok {
			rep.problem("event %s (topic %q) is missing from the log", id, t)
		}
	}
	return rep, nil
}

// phantomKey names an event of one source.
type phantomKey struct{ source, id string }

// recordedPhantoms returns every event the store's fork records name.
func recordedPhantoms(ctx context.Context, root storage.Store) (map[phantomKey]bool, error) {
	forks, err := catalog.ListForks(ctx, root)
	if err != nil {
		return nil, err
	}
	out := map[phantomKey]bool{}
	for _, f := range forks {
		for _, p := range f.Phantoms {
			for _, id := range p.IDs {
				out[phantomKey{f.AppID, id}] = true
			}
		}
	}
	return out, nil
}

func checkTopic(rep *Report, name string, rows []Logged, want map[string]string, seen map[string]string, phantoms map[phantomKey]bool) {
	var prev *Logged
	for i := range rows {
		r := &rows[i]
		if prev, dup := seen[r.ID]; dup {
			rep.problem("event %s is in the log twice (topics %q and %q)", r.ID, prev, name)
		}
		seen[r.ID] = name
		wantTopic, ok := want[r.ID]
		if phantoms[phantomKey{r.Source, r.ID}] {
			if ok {
				rep.problem("event %s in topic %q is recorded as a phantom but is in the source", r.ID, name)
			}
			rep.Phantoms[name] = append(rep.Phantoms[name], r.ID)
			continue // published from an abandoned timeline: outside the source's commit order
		}
		switch {
		case !ok:
			rep.problem("event %s in topic %q is not in the source", r.ID, name)
		case name == outbox.DeadLetterTopic:
			if outbox.ValidTopic(wantTopic) == nil {
				rep.problem("event %s with valid topic %q went to %s", r.ID, wantTopic, name)
			}
		case wantTopic != name:
			rep.problem("event %s belongs to topic %q but is in %q", r.ID, wantTopic, name)
		}
		if p := prev; p != nil && (p.CommitLSN > r.CommitLSN || (p.CommitLSN == r.CommitLSN && p.Seq >= r.Seq)) {
			rep.problem("topic %q out of source commit order: (%d,%d) at version %d after (%d,%d) at version %d",
				name, r.CommitLSN, r.Seq, r.Version, p.CommitLSN, p.Seq, p.Version)
		}
		prev = r
		if !r.CommitTime.IsZero() && !r.VersionTime.IsZero() {
			rep.Latencies = append(rep.Latencies, r.VersionTime.Sub(r.CommitTime))
		}
	}
}

func sourceRows(ctx context.Context, conn *pgx.Conn, table string) (map[string]string, error) {
	rows, err := conn.Query(ctx, "SELECT id::text, topic FROM "+table)
	if err != nil {
		return nil, fmt.Errorf("read source rows: %w", err)
	}
	want := map[string]string{}
	for rows.Next() {
		var id, t string
		if err := rows.Scan(&id, &t); err != nil {
			return nil, err
		}
		want[id] = t
	}
	return want, rows.Err()
}

// Percentile returns the p-th percentile (0..100) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
