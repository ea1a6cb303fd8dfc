package relay

import (
	"fmt"
	"time"

	"github.com/deltabus/deltabus/sink"
)

// pacer spaces the commits of each table (a topic's own, or a topic
// group's) at least an interval apart (Config.TopicCommitInterval, or the
// group's catalog.Group.CommitInterval): on S3 each commit costs two PUTs
// (a data file and the commit), so a table that commits more often than
// that has its rows carried into the next batch and committed together.
// A table that has been quiet for an interval commits at once. With
// interval 0 it carries nothing and batches behave as they always did.
// A table whose state has grown large is paced whatever its interval
// (pace_state.go), so that the relay's memory stays bounded.
type pacer struct {
	delay    time.Duration // Config.BatchMaxDelay
	interval time.Duration
	tables   map[string]time.Duration // intervals of tables that have their own (groups)
	last     map[string]time.Time     // when each table's latest commit was handed over
	state    *statePace               // tables paced because their state is large (pace_state.go)
}

func newPacer(c Config) *pacer {
	return &pacer{delay: c.BatchMaxDelay, interval: max(c.TopicCommitInterval, 0), tables: map[string]time.Duration{},
		last: map[string]time.Time{}}
}

// setInterval gives table its own interval.
func (p *pacer) setInterval(table string, d time.Duration) { p.tables[table] = max(d, 0) }

// intervalOf returns the table's interval: its own or the relay's, or
// the longer one its state calls for.
func (p *pacer) intervalOf(table string) time.Duration {
	d, ok := p.tables[table]
	if !ok {
		d = p.interval
	}
	return max(d, p.state.interval(table))
}

// readyAt is when a table whose oldest pending row arrived at since may be
// committed.
func (p *pacer) readyAt(table string, since time.Time) time.Time {
	t := since.Add(p.delay)
	if iv := p.intervalOf(table); iv > 0 {
		if l, ok := p.last[table]; ok && l.Add(iv).After(t) {
			t = l.Add(iv)
		}
	}
	return t
}

// limited reports whether the table committed less than an interval ago.
func (p *pacer) limited(table string, now time.Time) bool {
	l, ok := p.last[table]
	iv := p.intervalOf(table)
	return iv > 0 && ok && now.Before(l.Add(iv))
}

// split readies b for the committer at now: paced tables that committed
// less than an interval ago are carried into the returned next batch
// (unless all is set: a full batch or a forced handoff commits every
// table), and the others are recorded as committed now.
func (p *pacer) split(s sink.Sink, b *batch, now time.Time, all bool) (*batch, error) {
	p.state.refresh(now)
	next := newBatch(s, b.seq+1, b.endLSN, b.trace.tracer)
	keep := b.order[:0]
	for _, name := range b.order {
		if all || !p.limited(name, now) {
			keep = append(keep, name)
			if p.intervalOf(name) > 0 {
				p.last[name] = now
			}
			continue
		}
		sh := b.shares[name]
		if err := b.sb.Carry(name, next.sb); err != nil {
			return nil, fmt.Errorf("carry table %q to the next batch: %w", name, err)
		}
		delete(b.shares, name)
		b.trace.carry(name, &next.trace, sh.since)
		b.events -= sh.events
		b.bytes -= sh.bytes
		if !b.capped || sh.ackCap < b.ackCap {
			b.ackCap, b.capped = sh.ackCap, true
		}
		next.adopt(name, sh, p.readyAt(name, sh.since))
		next.events += sh.events
		next.bytes += sh.bytes
	}
	b.order = keep
	if len(next.order) > 0 {
		// Carried rows commit at the position of their last transaction
		// even if no other transaction joins them.
		next.lastLSN, next.endLSN, next.lastTime = b.lastLSN, b.endLSN, b.lastTime
		next.openedAt = now
	}
	return next, nil
}
