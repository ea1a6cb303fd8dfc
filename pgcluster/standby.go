package pgcluster

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// StandbyOptions says how a standby streams from its primary.
type StandbyOptions struct {
	// Slot is the physical replication slot the standby streams through,
	// created on the primary by NewStandby (it keeps the WAL the standby
	// has not received). Default "standby1".
	Slot string
	// SyncSlots makes the standby synchronise the primary's failover
	// logical slots (PostgreSQL 17 and later: sync_replication_slots,
	// hot_standby_feedback, a dbname in primary_conninfo).
	SyncSlots bool
	// ExtraConf lines are appended to the standby's postgresql.conf.
	ExtraConf []string
}

// NewStandby makes a hot standby of s while s runs, as pg_basebackup
// would, without needing pg_basebackup (the embedded server packages lack
// it): a physical slot reserving WAL, the low-level backup API around a
// copy of the data directory (without pg_wal's files, pg_replslot's slots
// or the primary's pid file), the backup label, standby.signal and
// primary_conninfo. The standby starts on a port of its own and streams
// asynchronously; Stop removes its files.
func (s *Server) NewStandby(ctx context.Context, opts StandbyOptions) (*Server, error) {
	if opts.Slot == "" {
		opts.Slot = "standby1"
	}
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return nil, fmt.Errorf("connect to the primary: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", opts.Slot); err != nil {
		return nil, fmt.Errorf("create physical slot %q: %w", opts.Slot, err)
	}
	major, err := serverMajor(ctx, conn)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "deltabus-pg-standby-")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	sb := &Server{Dir: dir, DataDir: filepath.Join(dir, "data"), Port: port, bin: s.bin}
	label, err := backup(ctx, conn, major, func() error { return copyDataDir(s.DataDir, sb.DataDir) })
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := sb.configureStandby(s, label, major, opts); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := chownTree(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := sb.start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return sb, nil
}

// backup runs copy between the low-level API's start and stop and returns
// the backup label the copy needs.
func backup(ctx context.Context, conn *pgx.Conn, major int, copy func() error) (string, error) {
	start, stop := "SELECT pg_backup_start('deltabus-standby', true)", "SELECT labelfile FROM pg_backup_stop(true)"
	if major < 15 {
		start, stop = "SELECT pg_start_backup('deltabus-standby', true, false)", "SELECT labelfile FROM pg_stop_backup(false, true)"
	}
	if _, err := conn.Exec(ctx, start); err != nil {
		return "", fmt.Errorf("start the base backup: %w", err)
	}
	copyErr := copy()
	var label string
	if err := conn.QueryRow(ctx, stop).Scan(&label); err != nil {
		return "", fmt.Errorf("stop the base backup: %w", err)
	}
	if copyErr != nil {
		return "", fmt.Errorf("copy the data directory: %w", copyErr)
	}
	return label, nil
}

// configureStandby writes what makes the copy a standby of primary.
func (sb *Server) configureStandby(primary *Server, label string, major int, opts StandbyOptions) error {
	if err := os.WriteFile(filepath.Join(sb.DataDir, "backup_label"), []byte(label), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sb.DataDir, "standby.signal"), nil, 0o600); err != nil {
		return err
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.Port, opts.Slot)
	conf := []string{
		"port = " + strconv.Itoa(sb.Port),
		"unix_socket_directories = '" + sb.Dir + "'",
		"hot_standby = on",
		"primary_slot_name = '" + opts.Slot + "'",
	}
	if opts.SyncSlots {
		if major < 17 {
			return fmt.Errorf("slot synchronisation needs PostgreSQL 17 or later, this is %d", major)
		}
		conninfo += " dbname=postgres"
		conf = append(conf, "sync_replication_slots = on", "hot_standby_feedback = on")
	}
	conf = append(conf, "primary_conninfo = '"+conninfo+"'")
	conf = append(conf, opts.ExtraConf...)
	return appendConf(sb.DataDir, conf)
}

// Promote promotes a standby to primary and waits until it accepts
// writes.
func (s *Server) Promote(ctx context.Context) error {
	out, err := s.pgRun(ctx, "pg_ctl", "-D", s.DataDir, "-w", "-t", "60", "promote")
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %w: %s", err, out)
	}
	return nil
}

// StopReceiving makes a standby stop streaming from its primary (its
// primary_conninfo emptied, the configuration reloaded) and waits until
// its WAL receiver is gone: from then on it falls behind, as an
// asynchronous standby cut off by a network partition does. It returns the
// last WAL position the standby received.
func (s *Server) StopReceiving(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to the standby: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return "", err
	}
	for {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&n); err != nil {
			return "", err
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	var received string
	err = conn.QueryRow(ctx, "SELECT pg_last_wal_receive_lsn()::text").Scan(&received)
	return received, err
}

// WaitCaughtUp waits until standby has replayed everything s (its
// primary) has written so far.
func (s *Server) WaitCaughtUp(ctx context.Context, standby *Server) error {
	pc, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer pc.Close(context.WithoutCancel(ctx))
	var target string
	if err := pc.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return err
	}
	sc, err := pgx.Connect(ctx, standby.DSN("postgres"))
	if err != nil {
		return err
	}
	defer sc.Close(context.WithoutCancel(ctx))
	for {
		var done bool
		if err := sc.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", target).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby has not replayed %s: %w", target, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func serverMajor(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0, fmt.Errorf("read the server version: %w", err)
	}
	return v / 10000, nil
}

// copyDataDir copies a running cluster's data directory as a base backup
// does: without the WAL files (the standby streams them through its
// slot), the replication slots, the pid and options files, the
// configuration written by ALTER SYSTEM is kept. Files that vanish while
// copied are skipped (the backup's WAL replay makes the copy consistent).
func copyDataDir(src, dst string) error {
	skipContents := map[string]bool{"pg_wal": true, "pg_replslot": true, "pg_stat_tmp": true, "pg_notify": true, "pg_snapshots": true, "pg_dynshmem": true, "pg_serial": true, "pg_subtrans": true}
	skipFiles := map[string]bool{"postmaster.pid": true, "postmaster.opts": true, "backup_label": true, "tablespace_map": true}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			if skipContents[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		if skipFiles[rel] || !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func appendConf(dataDir string, lines []string) error {
	f, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("\n" + strings.Join(lines, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// chownTree gives the postgres user every file under dir when we are root.
func chownTree(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, gid, err := postgresIDs()
	if err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(uid), int(gid))
	})
}
