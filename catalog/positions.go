package catalog

import (
	"fmt"
	"math"

	"github.com/jackc/pglogrepl"
)

// Epoch is where a source's positions begin anew: from the commit LSN
// Start on, the position of an LSN is the LSN plus Offset. A source has a
// new epoch when its LSNs went back below the positions its topics already
// hold: a failover to a standby that had not received everything the
// relay published (a fork of the timelines), or a recovery onto a source
// restored to an earlier state. See Positions.
type Epoch struct {
	// Timeline is the PostgreSQL timeline the epoch began on.
	Timeline uint32 `json:"timeline"`
	// Start is the first commit LSN of the epoch, as text ("0/16B3748").
	Start string `json:"start"`
	// Offset is added to every commit LSN of the epoch.
	Offset int64 `json:"offset"`
}

// Positions maps a source's commit LSNs to its positions: the Delta txn
// versions its topics record (step 3 of the exactly-once argument compares
// them). Without an epoch (the zero value, every source that never forked)
// a position is its commit LSN. After a fork whose old timeline published
// past the fork point, the commit LSNs of the new timeline restart below
// positions the topics hold; the new epoch's offset lifts them above every
// one of them, so positions keep growing with the source's commit order
// and no transaction of the new timeline is taken for one a topic holds.
//
// Positions describes the history of the source's current timeline: its
// epochs' starts increase, their offsets never decrease, and so Pos is
// monotone.
type Positions struct {
	epochs []epoch
}

type epoch struct {
	start  pglogrepl.LSN
	offset int64
}

// NewPositions returns the positions of a source whose epochs are es (in
// the order they began).
func NewPositions(es []Epoch) (Positions, error) {
	var p Positions
	for _, e := range es {
		start, err := pglogrepl.ParseLSN(e.Start)
		if err != nil {
			return Positions{}, fmt.Errorf("epoch of timeline %d: start %q: %w", e.Timeline, e.Start, err)
		}
		if n := len(p.epochs); n > 0 && (start <= p.epochs[n-1].start || e.Offset < p.epochs[n-1].offset) {
			return Positions{}, fmt.Errorf("epoch of timeline %d at %s does not follow the one before it", e.Timeline, e.Start)
		}
		if e.Offset < 0 || start > math.MaxInt64/2 || e.Offset > math.MaxInt64/2 {
			return Positions{}, fmt.Errorf("epoch of timeline %d at %s: offset %d is out of range", e.Timeline, e.Start, e.Offset)
		}
		p.epochs = append(p.epochs, epoch{start: start, offset: e.Offset})
	}
	return p, nil
}

// Identity reports whether every position is its commit LSN.
func (p Positions) Identity() bool { return len(p.epochs) == 0 }

// Offset returns the offset of the last epoch: the one new transactions
// are in.
func (p Positions) Offset() int64 {
	if len(p.epochs) == 0 {
		return 0
	}
	return p.epochs[len(p.epochs)-1].offset
}

// Pos returns the position of commit LSN lsn of the current timeline.
func (p Positions) Pos(lsn pglogrepl.LSN) int64 {
	for i := len(p.epochs) - 1; i >= 0; i-- {
		if lsn >= p.epochs[i].start {
			return int64(lsn) + p.epochs[i].offset
		}
	}
	return int64(lsn)
}

// Through returns the last commit LSN of the current timeline whose
// position is at most v: a topic whose position is v holds every
// transaction that commits at or below it, and none after. It is -1 when
// no LSN's position is at most v (v < 0).
//
// A v between two epochs (a position the old timeline reached past the
// fork) holds the whole shared history before the fork and nothing of the
// new timeline.
func (p Positions) Through(v int64) int64 {
	next := int64(math.MaxInt64)
	for i := len(p.epochs) - 1; i >= 0; i-- {
		e := p.epochs[i]
		if lo := int64(e.start) + e.offset; v >= lo {
			return min(v-e.offset, next-1)
		}
		next = int64(e.start)
	}
	if v < 0 {
		return -1
	}
	return min(v, next-1)
}

// Next returns the epochs of a source whose new timeline tl forked from
// the one its positions were made on at commit LSN fork, when its topics
// hold positions up to highest: unchanged when highest is below the
// position of fork (the new timeline's transactions are above everything
// published), otherwise with an epoch from fork on whose offset lifts the
// fork to highest + 1.
func Next(es []Epoch, tl uint32, fork pglogrepl.LSN, highest int64) ([]Epoch, error) {
	p, err := NewPositions(es)
	if err != nil {
		return nil, err
	}
	if highest < p.Pos(fork) {
		return es, nil
	}
	n := len(p.epochs)
	offset := highest + 1 - int64(fork)
	next := append([]Epoch(nil), es...)
	if n > 0 && p.epochs[n-1].start >= fork {
		// A later epoch began at or after the new fork: it was an epoch of
		// the abandoned timeline, never part of the new one's history.
		return nil, fmt.Errorf("timeline %d forked at %s, before the source's last epoch began (%s): the positions cannot be ordered", tl, fork, p.epochs[n-1].start)
	}
	return append(next, Epoch{Timeline: tl, Start: fork.String(), Offset: offset}), nil
}
