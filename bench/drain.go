package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deltabus/deltabus/catalog"
	"github.com/deltabus/deltabus/storage"
)

// payloadSQL builds a ~213-byte JSON payload per row, like the measurements
// in the design notes.
const payloadSQL = `jsonb_build_object('order_id', g, 'customer', 'customer-' || (g % 9973), 'amount', (g % 1000) * 1.25,
	'currency', 'EUR', 'lines', jsonb_build_array(jsonb_build_object('sku', 'sku-' || (g % 777), 'qty', g % 5 + 1)),
	'note', 'a realistic order created event with some padding text')`

const insertRowsSQL = `INSERT INTO outbox (topic, key, type, payload)
	SELECT (ARRAY['orders','payments','tenants','ingestion','quality'])[1 + g % 5], 'k' || (g % 1000), 'Created', ` + payloadSQL + `
	FROM generate_series($1::bigint, $2::bigint) g`

// drainBatched: events in 1000-row transactions, relay vs pg_recvlogical.
func (b *bench) drainBatched(ctx context.Context) error {
	return b.drain(ctx, "drain_1000row_tx", b.o.Events, func(ctx context.Context, dsn string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for i := 0; i < b.o.Events; i += 1000 {
			if _, err := conn.Exec(ctx, insertRowsSQL, i, min(i+999, b.o.Events-1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// drainSingle: single-row transactions (the usual outbox shape).
func (b *bench) drainSingle(ctx context.Context) error {
	return b.drain(ctx, "drain_single_row_tx", b.o.Single, func(ctx context.Context, dsn string) error {
		return loadSingle(ctx, dsn, b.o.Single, 4, 0, 0)
	})
}

// loadSingle inserts n single-row transactions from `workers` connections,
// paced to rate per second when rate > 0 (or for at most d).
func loadSingle(ctx context.Context, dsn string, n, workers, rate int, d time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for i := w; i < n; i += workers {
				if rate > 0 {
					due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
					if d > 0 && time.Since(start) > d {
						return
					}
					time.Sleep(time.Until(due))
				}
				if _, err := conn.Exec(ctx, insertRowsSQL, i, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// drain loads `events` rows after both slots exist, then times
// pg_recvlogical and the relay draining the same WAL.
func (b *bench) drain(ctx context.Context, name string, events int, load func(context.Context, string) error) error {
	dsn, drop, err := b.freshDB(ctx)
	if err != nil {
		return err
	}
	defer drop()
	store := b.storeDir(name)
	defer os.RemoveAll(store)
	if err := b.createRelaySlot(ctx, dsn, store); err != nil {
		return err
	}
	if err := execSQL(ctx, dsn, `SELECT pg_create_logical_replication_slot('ref', 'pgoutput')`); err != nil {
		return err
	}
	t0 := time.Now()
	if err := load(ctx, dsn); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	end, err := walInsertLSN(ctx, dsn)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "# %s: loaded %d events in %.1fs; WAL to drain ends at %s\n", name, events, time.Since(t0).Seconds(), end)
	refSecs, err := b.recvlogical(ctx, dsn, end)
	if err != nil {
		return err
	}
	relaySecs, rss, err := b.relayDrain(ctx, dsn, store, end)
	if err != nil {
		return err
	}
	b.line(name, float64(events)/relaySecs, float64(events)/refSecs, "ev/s")
	fmt.Fprintf(b.out, "%s_peak_rss relay=%.0fMiB reference=200MiB ratio=%.2f\n", name, rss, rss/200)
	return nil
}

func (b *bench) storeDir(name string) string {
	dir, _ := os.MkdirTemp("", "deltabus-bench-"+name+"-")
	return dir
}

// createRelaySlot lets the relay make its slot (first start) on the empty
// outbox, then stops it: the slot then holds the WAL of the load.
func (b *bench) createRelaySlot(ctx context.Context, dsn, store string) error {
	p, err := b.startRelay(dsn, store)
	if err != nil {
		return err
	}
	if err := waitFirstStart(ctx, dsn, store); err != nil {
		_ = p.Process.Kill()
		return err
	}
	_ = p.Process.Signal(syscall.SIGTERM)
	_ = p.Wait()
	return waitSlot(ctx, dsn, "deltabus", false, time.Minute)
}

func (b *bench) startRelay(dsn, store string) (*exec.Cmd, error) {
	if !strings.Contains(store, "://") {
		store = "file://" + store
	}
	// DELTABUS_BENCH_METRICS=host:port exposes the measured relay's
	// /metrics and /debug/pprof for profiling a run.
	args := append([]string{"run", "--metrics-addr", os.Getenv("DELTABUS_BENCH_METRICS"), "--log-level", "warn"}, strings.Fields(b.o.RelayArgs)...)
	cmd := exec.Command(b.self, args...)
	cmd.Env = append(os.Environ(), "DELTABUS_SOURCE="+dsn, "DELTABUS_STORE="+store)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

// recvlogical times pg_recvlogical draining slot "ref" to end.
func (b *bench) recvlogical(ctx context.Context, dsn, end string) (float64, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, b.o.RecvlogicalBin, "-d", dsn, "-S", "ref", "--start", "--endpos="+end, "--no-loop",
		"-o", "proto_version=1", "-o", "publication_names=deltabus", "-f", "/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pg_recvlogical: %v: %s", err, out)
	}
	return time.Since(start).Seconds(), nil
}

// relayDrain times a relay process from start until the slot confirmed end;
// it returns the seconds and the process's peak RSS in MiB.
func (b *bench) relayDrain(ctx context.Context, dsn, store, end string) (float64, float64, error) {
	start := time.Now()
	p, err := b.startRelay(dsn, store)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	for {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $1::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = 'deltabus'`, end).Scan(&ok)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			break
		}
		if p.ProcessState != nil {
			return 0, 0, fmt.Errorf("relay exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	secs := time.Since(start).Seconds()
	rss := peakRSS(p.Process.Pid)
	fmt.Fprintf(b.out, "# relay: %.1fs wall, %.1fs CPU\n", secs, cpuSeconds(p.Process.Pid))
	_ = p.Process.Signal(syscall.SIGTERM)
	return secs, rss, nil
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

// peakRSS reads VmHWM (MiB) of a process.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
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
func waitFirstStart(ctx context.Context, dsn, store string) error {
	if err := waitSlot(ctx, dsn, "deltabus", true, time.Minute); err != nil {
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
		if _, ok, err := catalog.ReadMarker(ctx, st, catalog.AppID("deltabus")); ok && err == nil {
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
