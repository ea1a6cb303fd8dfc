// Package pgsource is the source PostgreSQL as the relay and its tools see
// it: connections that fail with one clear line, DSNs with their passwords
// redacted wherever they may be printed, the server checks the relay needs
// (wal_level) and the replication slot's state.
//
// Guarantees:
//   - No error or log line built here contains a password: DSNs pass through
//     Redact, and connection failures are reduced to their root cause
//     ("connection refused", "password authentication failed for user
//     \"relay\"") with the host and port they were for.
//   - Passwords need not be in the DSN: pgx reads PGPASSWORD and PGPASSFILE
//     (default ~/.pgpass) like libpq.
//   - Every connection has a connect timeout (10 s unless the DSN sets
//     connect_timeout) and names itself in pg_stat_activity
//     (application_name), so an operator sees which process holds a slot.
//   - Every connection dials with TCP keepalives and TCP_USER_TIMEOUT
//     (package keepalive; libpq's keepalives, keepalives_idle,
//     keepalives_interval, keepalives_count and tcp_user_timeout in the
//     DSN change them, with libpq's meaning): a host that vanished fails a
//     connection within about 30 s, not after the kernel's fifteen
//     minutes.
//   - A bounded connection (ConnectBounded) also fails any read the server
//     leaves unanswered for its bound, which keepalives cannot see (a
//     frozen backend whose kernel still acknowledges): the relay's own
//     short queries and `relay status` use one, so none of them waits on
//     the network without a deadline.
package pgsource
