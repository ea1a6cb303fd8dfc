package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SlotInfo is the replication slot as pg_replication_slots reports it.
type SlotInfo struct {
	Name          string
	Exists        bool
	Plugin        string
	Database      string
	ActivePID     *int32
	WALStatus     string // reserved, extended, unreserved, lost ("" on old servers)
	ConfirmedLSN  pglogrepl.LSN
	RestartLSN    pglogrepl.LSN
	SafeWALSize   *int64 // bytes left before invalidation, nil when unlimited
	RetainedBytes int64  // WAL held back by the slot
}

// connectSQL opens a normal SQL connection with a one-line error for the
// usual failures.
func connectSQL(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, userErr(err, "source DSN is invalid: %s", redact(err.Error()))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		ue := userErr(err, "cannot connect to PostgreSQL at %s:%d: %s; check DELTABUS_SOURCE and that the server is running",
			cfg.Host, cfg.Port, redact(rootCause(err)))
		ue.Retryable = true
		return nil, ue
	}
	return conn, nil
}

func rootCause(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Message
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// CheckWALLevel fails unless the server decodes logically.
func CheckWALLevel(ctx context.Context, conn *pgx.Conn) error {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return userErr(nil, "wal_level is %q, logical replication needs wal_level = logical: set it in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL", level)
	}
	return nil
}

// ReadSlot returns the slot's state; Exists is false when there is none.
func ReadSlot(ctx context.Context, conn *pgx.Conn, name string) (SlotInfo, error) {
	s := SlotInfo{Name: name}
	var confirmed, restart *string
	var db *string
	err := conn.QueryRow(ctx, `
		SELECT plugin, database, active_pid, coalesce(wal_status, ''), confirmed_flush_lsn::text, restart_lsn::text,
		       safe_wal_size, coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, name).
		Scan(&s.Plugin, &db, &s.ActivePID, &s.WALStatus, &confirmed, &restart, &s.SafeWALSize, &s.RetainedBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read replication slot %q: %w", name, err)
	}
	s.Exists = true
	if db != nil {
		s.Database = *db
	}
	if confirmed != nil {
		s.ConfirmedLSN, _ = pglogrepl.ParseLSN(*confirmed)
	}
	if restart != nil {
		s.RestartLSN, _ = pglogrepl.ParseLSN(*restart)
	}
	return s, nil
}

// checkSlotUsable turns a slot's state into a one-line error, or nil.
func checkSlotUsable(s SlotInfo, currentDB string) error {
	switch {
	case s.Plugin != "pgoutput":
		return userErr(nil, "replication slot %q uses plugin %q, DeltaBus needs pgoutput: choose another --slot name", s.Name, s.Plugin)
	case s.Database != currentDB:
		return userErr(nil, "replication slot %q belongs to database %q, not %q: choose another --slot name", s.Name, s.Database, currentDB)
	case s.WALStatus == "lost":
		return userErr(nil, "replication slot %q is invalidated (wal_status=lost): PostgreSQL removed WAL the relay had not read, so events may be missing; run `relay bootstrap --recover` to re-read the outbox into the topics and resume", s.Name)
	}
	return nil
}

// waitSlotFree returns nil when the slot has no consumer. Without standby it
// fails at once with a clear error; with standby it polls until the active
// consumer goes away or ctx ends.
func waitSlotFree(ctx context.Context, conn *pgx.Conn, name string, standby bool, log func(pid int32)) error {
	for {
		s, err := ReadSlot(ctx, conn, name)
		if err != nil {
			return err
		}
		if !s.Exists || s.ActivePID == nil {
			return nil
		}
		if !standby {
			ue := userErr(nil, "replication slot %q is in use by another process (pid %d), probably another relay: stop it, or start this one with --standby to wait and take over", name, *s.ActivePID)
			ue.Retryable = true
			return ue
		}
		log(*s.ActivePID)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
