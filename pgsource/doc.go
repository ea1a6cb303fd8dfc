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
package pgsource
