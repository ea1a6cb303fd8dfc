package pgsource

import (
	"context"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
)

// Identity is what a source's server says of itself: which source it is,
// the timeline it writes on and where its WAL ends.
type Identity struct {
	catalog.Source
	// Timeline is the server's current timeline; 0 on a server in
	// recovery (a standby), whose timeline is its primary's.
	Timeline uint32
	// WALEnd is the server's WAL insert position (on a standby, the last
	// position replayed): every transaction the server ever committed on
	// its timeline's history commits below it.
	WALEnd pglogrepl.LSN
}

// Identify returns the identity of the source a relay on slot reads through
// conn: the cluster's system identifier, the connection's database and the
// slot, with the server's timeline and WAL end. pg_control_system() and
// the WAL position functions are executable by any role; the timeline is
// the first eight hex digits of the current WAL file's name.
func Identify(ctx context.Context, conn *pgx.Conn, slot string) (Identity, error) {
	id := Identity{Source: catalog.Source{Slot: slot}}
	var tl int64
	var end string
	err := conn.QueryRow(ctx, `SELECT system_identifier::text, current_database(),
		CASE WHEN pg_is_in_recovery() THEN 0 ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint END,
		(CASE WHEN pg_is_in_recovery() THEN coalesce(pg_last_wal_replay_lsn(), '0/0') ELSE pg_current_wal_insert_lsn() END)::text
		FROM pg_control_system()`).Scan(&id.SystemID, &id.Database, &tl, &end)
	if err != nil {
		return id, fmt.Errorf("identify the source database: %w", err)
	}
	id.Timeline = uint32(tl)
	if id.WALEnd, err = pglogrepl.ParseLSN(end); err != nil {
		return id, fmt.Errorf("identify the source database: WAL position %q: %w", end, err)
	}
	return id, nil
}
