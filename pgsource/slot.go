package pgsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/usererr"
)

// Slot is a replication slot as pg_replication_slots reports it. JSON field
// names follow the CLI's convention: camelCase, LSNs as text.
type Slot struct {
	Name      string `json:"name"`
	Exists    bool   `json:"exists"`
	Plugin    string `json:"plugin,omitempty"`
	Database  string `json:"database,omitempty"`
	ActivePID *int32 `json:"activePid,omitempty"`
	// Holder describes the process streaming from the slot (its
	// application_name and client address), "" when inactive.
	Holder       string        `json:"holder,omitempty"`
	WALStatus    string        `json:"walStatus,omitempty"` // reserved, extended, unreserved, lost
	ConfirmedLSN pglogrepl.LSN `json:"-"`
	RestartLSN   pglogrepl.LSN `json:"-"`
	// WALEnd is the server's WAL write position when the slot was read.
	// Read with a free slot, it is past every transaction any relay that
	// held the slot before could have received.
	WALEnd pglogrepl.LSN `json:"-"`
	// SafeWALSize is how many bytes of WAL may still be written before
	// PostgreSQL invalidates the slot; nil when unlimited.
	SafeWALSize   *int64 `json:"safeWalSizeBytes,omitempty"`
	RetainedBytes int64  `json:"retainedWalBytes"` // WAL held back by the slot
	// Failover says whether the slot is synchronised to standbys that
	// sync_replication_slots (PostgreSQL 17 and later); nil on older
	// servers. Synced marks a slot a standby synchronised from its primary
	// (after a promotion: the slot the relay streamed from on the old
	// primary).
	Failover *bool `json:"failover,omitempty"`
	Synced   *bool `json:"synced,omitempty"`
	// ReplyAge is how long ago the server last heard from the process
	// streaming from the slot (pg_stat_replication.reply_time): it grows
	// while that connection is dead. Nil when inactive, or hidden from a
	// role without pg_read_all_stats.
	ReplyAge *time.Duration `json:"-"`
}

// MarshalJSON renders LSNs as text ("0/16B3748"), the CLI's convention.
func (s Slot) MarshalJSON() ([]byte, error) {
	type plain Slot
	var reply *float64
	if s.ReplyAge != nil {
		v := s.ReplyAge.Seconds()
		reply = &v
	}
	return json.Marshal(struct {
		plain
		ConfirmedLSN string   `json:"confirmedLsn,omitempty"`
		RestartLSN   string   `json:"restartLsn,omitempty"`
		ReplyAge     *float64 `json:"holderReplyAgeSeconds,omitempty"`
	}{plain(s), lsnText(s.ConfirmedLSN), lsnText(s.RestartLSN), reply})
}

func lsnText(l pglogrepl.LSN) string {
	if l == 0 {
		return ""
	}
	return l.String()
}

// ReadSlot returns the slot's state; Exists is false when there is none.
//
// The holder of an active slot is read by a second query: the joins to
// pg_stat_activity and pg_stat_replication cost a fresh backend some 7 ms
// (their views' rules are loaded and planned), and at a session's start
// the slot is free. A holder that has gone between the two leaves Holder
// and ReplyAge empty, as if it had gone before.
func ReadSlot(ctx context.Context, conn *pgx.Conn, name string) (Slot, error) {
	s := Slot{Name: name}
	var plugin, confirmed, restart, db *string
	var end string
	err := conn.QueryRow(ctx, `
		SELECT s.plugin, s.database, s.active_pid, coalesce(s.wal_status, ''), s.confirmed_flush_lsn::text, s.restart_lsn::text,
		       s.safe_wal_size, coalesce(pg_wal_lsn_diff(w.lsn, s.restart_lsn), 0)::bigint,
		       (to_jsonb(s) ->> 'failover')::bool, (to_jsonb(s) ->> 'synced')::bool, w.lsn::text
		FROM (SELECT CASE WHEN pg_is_in_recovery() THEN coalesce(pg_last_wal_replay_lsn(), '0/0') ELSE pg_current_wal_lsn() END AS lsn) w
		LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, name).
		Scan(&plugin, &db, &s.ActivePID, &s.WALStatus, &confirmed, &restart, &s.SafeWALSize, &s.RetainedBytes, &s.Failover, &s.Synced, &end)
	if err == nil {
		s.WALEnd, err = pglogrepl.ParseLSN(end)
	}
	if err == nil && plugin == nil {
		return s, nil // no such slot
	}
	if err != nil {
		return s, fmt.Errorf("read replication slot %q: %w", name, err)
	}
	s.Exists, s.Plugin = true, *plugin
	if db != nil {
		s.Database = *db
	}
	if confirmed != nil {
		s.ConfirmedLSN, _ = pglogrepl.ParseLSN(*confirmed)
	}
	if restart != nil {
		s.RestartLSN, _ = pglogrepl.ParseLSN(*restart)
	}
	if s.ActivePID != nil {
		if err := readHolder(ctx, conn, &s); err != nil {
			return s, fmt.Errorf("read the holder of replication slot %q: %w", name, err)
		}
	}
	return s, nil
}

// readHolder fills s.Holder and s.ReplyAge from the activity of the
// process holding the slot.
func readHolder(ctx context.Context, conn *pgx.Conn, s *Slot) error {
	var replyMs *float64
	err := conn.QueryRow(ctx, `
		SELECT coalesce(nullif(a.application_name, '') || coalesce(' from ' || host(a.client_addr), ''), ''),
		       (SELECT extract(epoch FROM clock_timestamp() - r.reply_time) * 1000 FROM pg_stat_replication r WHERE r.pid = a.pid)
		FROM pg_stat_activity a WHERE a.pid = $1`, *s.ActivePID).Scan(&s.Holder, &replyMs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if replyMs != nil {
		d := time.Duration(max(*replyMs, 0) * float64(time.Millisecond))
		s.ReplyAge = &d
	}
	return nil
}

// HolderText names the process holding the slot for messages.
func (s Slot) HolderText() string {
	if s.ActivePID == nil {
		return "no process"
	}
	if s.Holder == "" {
		return fmt.Sprintf("pid %d", *s.ActivePID)
	}
	return fmt.Sprintf("pid %d (%s)", *s.ActivePID, s.Holder)
}

// CheckUsable turns a slot's state into a one-line error, or nil.
func (s Slot) CheckUsable(currentDB string) error {
	switch {
	case s.Plugin != "pgoutput":
		return usererr.New(nil, "replication slot %q uses plugin %q, DeltaBus needs pgoutput: choose another --slot name", s.Name, s.Plugin)
	case s.Database != currentDB:
		return usererr.New(nil, "replication slot %q belongs to database %q, not %q: choose another --slot name", s.Name, s.Database, currentDB)
	case s.WALStatus == "lost":
		return usererr.New(nil, "replication slot %q is invalidated (wal_status=lost): PostgreSQL removed WAL the relay had not read, so events may be missing; run `relay bootstrap --recover` to re-read the outbox into the topics and resume", s.Name)
	}
	return nil
}

// CheckWALLevel fails unless the server decodes logically.
func CheckWALLevel(ctx context.Context, conn *pgx.Conn) error {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return usererr.New(nil, "wal_level is %q, logical replication needs wal_level = logical: set it in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL", level)
	}
	return nil
}

// ErrSlotBusy is wrapped by the error of WaitSlotFree without standby.
var ErrSlotBusy = errors.New("replication slot in use")

// WaitSlotFree returns the slot's state once no process streams from it.
// Without standby it fails at once with a retryable one-line error naming
// the holder; with standby it polls every interval until the holder goes
// away or ctx ends, calling waiting on each poll that finds it held.
func WaitSlotFree(ctx context.Context, conn *pgx.Conn, name string, standby bool, interval time.Duration, waiting func(Slot)) (Slot, error) {
	for {
		s, err := ReadSlot(ctx, conn, name)
		if err != nil {
			return s, err
		}
		if !s.Exists || s.ActivePID == nil {
			return s, nil
		}
		if !standby {
			return s, usererr.Retry(ErrSlotBusy, "replication slot %q is in use by %s, probably another relay: stop it, or start this one with --standby to wait and take over", name, s.HolderText())
		}
		waiting(s)
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// EndWalsender ends the walsender with backend pid pid when it holds slot
// and names itself app (pg_stat_activity.application_name), then waits up
// to wait for the slot to be released. It reports whether it ended one;
// (false, nil) when that walsender no longer holds the slot. The caller
// must know the walsender is its own, abandoned connection: the server
// would otherwise keep the slot busy until its wal_sender_timeout.
// Ending a backend of the same role needs no privilege beyond the
// relay's.
func EndWalsender(ctx context.Context, conn *pgx.Conn, slot string, pid int32, app string, wait time.Duration) (bool, error) {
	var signalled bool
	err := conn.QueryRow(ctx, `SELECT pg_terminate_backend(s.active_pid)
		FROM pg_replication_slots s JOIN pg_stat_activity a ON a.pid = s.active_pid
		WHERE s.slot_name = $1 AND s.active_pid = $2 AND a.application_name = $3`, slot, pid, app).Scan(&signalled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("end walsender %d: %w", pid, err)
	}
	if !signalled {
		return false, nil // gone meanwhile
	}
	deadline := time.Now().Add(wait)
	for {
		s, err := ReadSlot(ctx, conn, slot)
		if err != nil {
			return false, err
		}
		if s.ActivePID == nil || *s.ActivePID != pid {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("walsender %d still holds slot %q %s after it was told to end (a stopped process ends when it runs again)", pid, slot, wait)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
