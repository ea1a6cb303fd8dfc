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
func WalSenderTimeout(ctx context.Context, conn *pgx.Conn) (time.Duration, error) {
	var ms int64
	err := conn.QueryRow(ctx, `SELECT CASE unit WHEN 's' THEN setting::bigint * 1000 ELSE setting::bigint END
		FROM pg_settings WHERE name = 'wal_sender_timeout'`).Scan(&ms)
	if err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
