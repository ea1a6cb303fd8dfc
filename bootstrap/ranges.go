package bootstrap

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// blockRange is a range of heap blocks [from, to) of one table, read with a
// TID range scan; to < 0 means to the end of the table.
type blockRange struct{ from, to int64 }

// rangeBlocks bounds a unit: 8192 blocks are 64 MiB of heap with the
// default block size, so a unit's files stay small and a failure redoes
// little.
const rangeBlocks = 8192

// planRanges makes each table one unit, read by a sequential scan, when
// one connection reads the snapshot; with several, it splits every table
// into block ranges, at least one per connection for a table big enough,
// at most rangeBlocks each. Either way each heap page is read once,
// whatever the number of topics. Without TID range scans (PostgreSQL <
// 14) a ctid condition is a filter on a full scan, so each table is then
// one unit too.
func planRanges(ctx context.Context, conn *pgx.Conn, srcs []*source, conns int) ([]*unit, error) {
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, fmt.Errorf("read server version: %w", err)
	}
	var units []*unit
	for _, s := range srcs {
		var blocks int64
		err := conn.QueryRow(ctx, "SELECT pg_relation_size($1::oid) / current_setting('block_size')::bigint", s.rel.ID).Scan(&blocks)
		if err != nil {
			return nil, fmt.Errorf("read the size of %s: %w", s.qualified(), err)
		}
		per := min(max((blocks+int64(conns)-1)/int64(conns), 1), rangeBlocks)
		if version < 140000 || conns == 1 {
			per = blocks + 1
		}
		// The last range is open: pages added after the size was read hold
		// no row the snapshot sees, but reading them costs nothing.
		for from := int64(0); ; from += per {
			r := &blockRange{from: from, to: from + per}
			if r.to >= blocks {
				r.to = -1
			}
			units = append(units, &unit{index: len(units), parts: []*source{s}, rng: r})
			if r.to < 0 {
				break
			}
		}
	}
	return units, nil
}

// where is the ctid condition of a block range; the whole table has none
// (a sequential scan).
func (r *blockRange) where() string {
	if r.from == 0 && r.to < 0 {
		return "true"
	}
	w := fmt.Sprintf("ctid >= '(%d,0)'::tid", r.from)
	if r.to >= 0 {
		w += fmt.Sprintf(" AND ctid < '(%d,0)'::tid", r.to)
	}
	return w
}

func (r *blockRange) String() string {
	if r.to < 0 {
		return fmt.Sprintf("blocks %d-", r.from)
	}
	return fmt.Sprintf("blocks %d-%d", r.from, r.to-1)
}
