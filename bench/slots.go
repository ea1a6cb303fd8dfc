package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// confirmed reports whether slot confirmed lsn.
func confirmed(ctx context.Context, dsn, slot, lsn string) (ok bool, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $2`, lsn, slot).Scan(&ok)
	return ok, err
}

// cpuSeconds reads a process's user+system CPU time.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // clock ticks (USER_HZ = 100)
}

func execSQL(ctx context.Context, dsn, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

func walInsertLSN(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var lsn string
	err = conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn)
	return lsn, err
}

// waitFirstStart waits until the relay's slot is active and its first-start
// bootstrap has finished (the relay marker exists in the store).
func waitFirstStart(ctx context.Context, dsn, store, slot string) error {
	if err := waitSlot(ctx, dsn, slot, true, time.Minute); err != nil {
		return err
	}
	if !strings.Contains(store, "://") {
		store = "file://" + store
	}
	st, err := storage.Open(ctx, store, storage.S3Options{})
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if markers, err := catalog.ListMarkers(ctx, st); err == nil && slices.ContainsFunc(markers, func(m catalog.Marker) bool { return m.Slot == slot }) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("relay did not finish its first start")
		}
	}
}

// waitSlot waits until the slot exists and is active (or inactive).
func waitSlot(ctx context.Context, dsn, slot string, active bool, timeout time.Duration) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var got *bool
		if err := conn.QueryRow(ctx, `SELECT bool_or(active) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&got); err != nil {
			return err
		}
		if got != nil && *got == active {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("slot %s did not become active=%v", slot, active)
}
