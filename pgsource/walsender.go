package pgsource

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WalSenderTimeout returns wal_sender_timeout as conn's session sees it
// (postgresql.conf, ALTER ROLE or DATABASE ... SET, or the DSN's
// options=-c wal_sender_timeout=...): a walsender ends a connection that
// sent it nothing for that long, and asks for a reply (a keepalive with
// reply requested) after half of it. 0 means disabled.
//
// It reads current_setting (the value with its unit, "1min", "500ms",
// "0"), which PostgreSQL's interval input parses, rather than pg_settings:
// that view builds a row for every setting, 4-5 ms of a fresh backend at
// every session's start against 1 ms.
func WalSenderTimeout(ctx context.Context, conn *pgx.Conn) (time.Duration, error) {
	var ms int64
	err := conn.QueryRow(ctx, `SELECT (extract(epoch FROM current_setting('wal_sender_timeout')::interval) * 1000)::bigint`).Scan(&ms)
	if err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
