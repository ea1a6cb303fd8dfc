package catalog

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"
)

// PGSnapshot is a parsed pg_current_snapshot(): which transactions were
// visible when it was taken.
type PGSnapshot struct {
	Xmin, Xmax uint64
	Xip        []uint64
}

// ParsePGSnapshot parses the text form "xmin:xmax:xip1,xip2,...".
func ParsePGSnapshot(s string) (PGSnapshot, error) {
	var p PGSnapshot
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return p, fmt.Errorf("snapshot %q: want xmin:xmax:xip", s)
	}
	var err error
	if p.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return p, fmt.Errorf("snapshot %q: xmin: %w", s, err)
	}
	if p.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return p, fmt.Errorf("snapshot %q: xmax: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return p, fmt.Errorf("snapshot %q: xip: %w", s, err)
			}
			p.Xip = append(p.Xip, v)
		}
	}
	return p, nil
}

// Visible reports whether a committed transaction with this 32-bit xid (as
// pgoutput sends it) is visible in the snapshot. The xid must lie within
// 2^31 transactions of the snapshot, which holds for every transaction that
// commits near it.
func (p PGSnapshot) Visible(xid uint32) bool {
	if int32(xid-uint32(p.Xmax)) >= 0 {
		return false // started after the snapshot
	}
	if int32(xid-uint32(p.Xmin)) < 0 {
		return true // ended before the oldest transaction in progress
	}
	for _, x := range p.Xip {
		if uint32(x) == xid {
			return false
		}
	}
	return true
}

// Seam drops, for a rebuilt topic, the streamed transactions whose rows its
// snapshot already holds.
type Seam struct {
	From, To pglogrepl.LSN // [From, To): commit LSNs to check
	Snap     PGSnapshot
}

// Covers reports whether a row of a transaction came with the snapshot.
// A nil Seam covers nothing.
func (s *Seam) Covers(commitLSN pglogrepl.LSN, xid uint32) bool {
	return s != nil && commitLSN >= s.From && commitLSN < s.To && s.Snap.Visible(xid)
}

// Seam returns the record's seam for a table whose txn version is
// txnVersion, or nil when the rebuild is not in the table yet or the
// stream cannot meet a transaction of the seam any more. pos maps the
// source's commit LSNs to its positions (the txn versions).
func (r RebuildRecord) Seam(txnVersion int64, pos Positions) (*Seam, error) {
	if txnVersion < r.TxnVersion {
		return nil, nil
	}
	to, err := pglogrepl.ParseLSN(r.SeamEnd)
	if err != nil {
		return nil, fmt.Errorf("rebuild record of topic %q: seamEnd: %w", r.Topic, err)
	}
	if pos.Pos(to) <= txnVersion {
		return nil, nil
	}
	snap, err := ParsePGSnapshot(r.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("rebuild record of topic %q: %w", r.Topic, err)
	}
	return &Seam{From: pglogrepl.LSN(pos.Through(r.TxnVersion) + 1), To: to, Snap: snap}, nil
}
