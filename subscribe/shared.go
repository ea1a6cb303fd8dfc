package subscribe

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/sink/delta"
	"github.com/deltabus/deltabus/sink/topic"
	"github.com/deltabus/deltabus/storage"
)

// A topic of a group (catalog.Group) shares its group's table with other
// topics: a subscription of it reads that table's log, skips the data
// files whose topic bounds exclude it (never opened), and of the files it
// reads keeps the rows whose topic column is its name. Positions count the
// topic's events only: offset k of version v is the topic's k-th event in
// v, and a version without any is passed like a compaction's.

// locate reads where the subscription's topic lives and scopes s.tbl to
// that table: its registry entry, else the first group whose patterns
// match it (catalog.ReadPlacement), else its own table.
func (s *subscription) locate(ctx context.Context) error {
	p, err := catalog.ReadPlacement(ctx, s.root, s.topic, nil)
	if err == nil && !p.Registered {
		if s.groups, err = catalog.ListGroups(ctx, s.root); err == nil {
			p, err = catalog.ReadPlacement(ctx, s.root, s.topic, s.groups)
		}
	}
	if err != nil {
		return fmt.Errorf("topic %q: %w", s.topic, err)
	}
	s.place, s.tbl = p, storage.Sub(s.root, p.Table)
	return nil
}

// noTable explains a topic whose table has no log.
func (s *subscription) noTable() error {
	if s.place.Shared() {
		return fmt.Errorf("topic %q belongs to group %q, whose table %s has no _delta_log yet: check the topic name and the store",
			s.topic, s.place.Group(), s.tbl)
	}
	return fmt.Errorf("topic %q has no table in %s (no _delta_log): check the topic name and the store", s.topic, s.tbl)
}

// checkPlacement, while the topic is not registered and a group's
// patterns chose its table, reads its registry entry again (one Get per
// round): a topic placed elsewhere than this subscription reads (a group
// created meanwhile) stops it, since its events will never be in this
// table. A topic whose own table exists stays there.
func (s *subscription) checkPlacement(ctx context.Context) error {
	if s.place.Registered || !s.place.Shared() {
		return nil
	}
	p, err := catalog.ReadPlacement(ctx, s.root, s.topic, s.groups)
	if err != nil {
		return fmt.Errorf("topic %q: %w", s.topic, err)
	}
	if !p.Registered {
		return nil
	}
	if p.Table != s.place.Table {
		return fmt.Errorf("topic %q was placed in table %q while this subscription read %q for it (a group was created meanwhile): "+
			"reset the group (relay consume --topic %s --group %s --from-version 0)", s.topic, p.Table, s.place.Table, s.topic, s.group)
	}
	s.place.Registered = true
	return nil
}

// fileRows says how a data file of the subscription's table counts: may
// is false for a file of other topics only (skipped unread), and rows is
// the number of the topic's events in it when known: every row of a
// file of the topic's own table or of a group file of this topic alone,
// unknown (ok=false) for a group file that mixes topics.
func (s *subscription) fileRows(stats string) (may bool, rows int64, ok bool) {
	if !s.place.Shared() {
		rows, ok = delta.StatsNumRecords(stats)
		return true, rows, ok
	}
	if !topic.MayHold(stats, s.topic) {
		return false, 0, true
	}
	if !topic.OnlyTopic(stats, s.topic) {
		return true, 0, false
	}
	rows, ok = delta.StatsNumRecords(stats)
	return true, rows, ok
}

// keepTopic reduces the chunk, in place, to its events of topic name, in
// order. A dictionary-encoded topic column gives repeated values one
// range of the column's text, so a run of one topic costs one string
// comparison; the kept events' values are moved, never copied.
func (c *chunk) keepTopic(name string) {
	if c.events != nil {
		kept := c.events[:0]
		for _, e := range c.events {
			if e.Topic == name {
				kept = append(kept, e)
			}
		}
		clear(c.events[len(kept):])
		c.events, c.n = kept, len(kept)
		return
	}
	text, starts, ends := c.text[cTopic], c.starts[cTopic], c.ends[cTopic]
	var from, to int32 = -1, -1 // the range last compared
	match, j := false, 0
	for k := range c.n {
		if starts[k] != from || ends[k] != to {
			from, to = starts[k], ends[k]
			match = !c.null[cTopic][k] && text[from:to] == name
		}
		if !match {
			continue
		}
		if j != k {
			c.move(k, j)
		}
		j++
	}
	c.n = j
}

// move copies event k's column values to slot j (j < k).
func (c *chunk) move(k, j int) {
	for i := range eventColumns {
		c.null[i][j] = c.null[i][k]
		if eventColumns[i].typ == parquet.Types.ByteArray {
			c.starts[i][j], c.ends[i][j] = c.starts[i][k], c.ends[i][k]
		} else {
			c.nums[i][j] = c.nums[i][k]
		}
	}
	c.headers[j] = c.headers[k]
}
