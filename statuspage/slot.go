package statuspage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/pgsource"
)

// SlotMonitor reads the replication slot every interval over a connection
// of its own and exports what it read as gauges: the slot lag and WAL
// headroom the alert rules watch (deploy/prometheus).
type SlotMonitor struct {
	dsn, slot string
	every     time.Duration
	log       *slog.Logger

	mu   sync.Mutex
	last *Slot
}

// NewSlotMonitor creates the monitor and its gauges (mp may be nil).
func NewSlotMonitor(dsn, slot string, every time.Duration, mp metric.MeterProvider, log *slog.Logger) (*SlotMonitor, error) {
	if every <= 0 {
		every = 5 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	m := &SlotMonitor{dsn: dsn, slot: slot, every: every, log: log}
	if mp == nil {
		return m, nil
	}
	meter := mp.Meter("github.com/deltabus/deltabus/statuspage")
	gauges := []struct {
		name, help string
		value      func(s *Slot) (float64, bool)
	}{
		{"deltabus_slot_lag_bytes", "WAL between the server's current position and the slot's confirmed position: what the relay has not acknowledged yet.",
			func(s *Slot) (float64, bool) { return float64(s.LagBytes), s.Exists }},
		{"deltabus_slot_retained_wal_bytes", "WAL the slot keeps on the server's disk (current position - restart_lsn).",
			func(s *Slot) (float64, bool) { return float64(s.Retained), s.Exists }},
		{"deltabus_slot_wal_headroom_bytes", "WAL that may still be written before PostgreSQL invalidates the slot (safe_wal_size); absent when max_slot_wal_keep_size is unlimited.",
			func(s *Slot) (float64, bool) {
				if s.Headroom == nil {
					return 0, false
				}
				return float64(*s.Headroom), s.Exists
			}},
		{"deltabus_slot_active", "1 while a process streams from the slot, 0 when none does; absent when the slot does not exist.",
			func(s *Slot) (float64, bool) {
				if s.Active {
					return 1, s.Exists
				}
				return 0, s.Exists
			}},
	}
	var errs []error
	for _, g := range gauges {
		_, err := meter.Float64ObservableGauge(g.name, metric.WithDescription(g.help), metric.WithFloat64Callback(
			func(_ context.Context, o metric.Float64Observer) error {
				if s := m.Last(); s != nil && s.Error == "" {
					if v, ok := g.value(s); ok {
						o.Observe(v)
					}
				}
				return nil
			}))
		errs = append(errs, err)
	}
	return m, errors.Join(errs...)
}

// Last returns the last reading (nil before the first).
func (m *SlotMonitor) Last() *Slot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return nil
	}
	c := *m.last
	return &c
}

// Run reads the slot until ctx ends. A failed reading is kept (with its
// error) and logged once until a reading succeeds again.
func (m *SlotMonitor) Run(ctx context.Context) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	failing := false
	for {
		s, err := m.read(ctx, &conn)
		if err != nil && ctx.Err() == nil {
			s.Error = pgsource.Redact(err.Error())
			if !failing {
				m.log.Warn("status: cannot read the replication slot; the page and the slot gauges show the last reading", "err", s.Error)
			}
			failing = true
			if conn != nil {
				conn.Close(context.Background())
				conn = nil
			}
		} else if err == nil {
			failing = false
		}
		m.mu.Lock()
		if err == nil || m.last == nil {
			m.last = &s
		} else {
			m.last.Error, m.last.ReadAt = s.Error, s.ReadAt
		}
		m.mu.Unlock()
		wait := m.every
		if err == nil && !s.Exists {
			wait = min(wait, 500*time.Millisecond) // a first start creates it any moment
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (m *SlotMonitor) read(ctx context.Context, conn **pgx.Conn) (Slot, error) {
	out := Slot{Name: m.slot, ReadAt: time.Now().UTC()}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *conn == nil {
		c, err := pgsource.Connect(qctx, m.dsn)
		if err != nil {
			return out, err
		}
		*conn = c
	}
	s, err := pgsource.ReadSlot(qctx, *conn, m.slot)
	if err != nil {
		return out, err
	}
	var cur string
	var lag *int64
	if err := (*conn).QueryRow(qctx, `SELECT pg_current_wal_lsn()::text, (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1)`, m.slot).Scan(&cur, &lag); err != nil {
		return out, err
	}
	out.Exists, out.Active, out.Holder, out.WALStatus = s.Exists, s.ActivePID != nil, s.HolderText(), s.WALStatus
	if s.ActivePID == nil {
		out.Holder = ""
	}
	if s.ConfirmedLSN != 0 {
		out.Confirmed = s.ConfirmedLSN.String()
	}
	out.CurrentWAL, out.Retained, out.Headroom = cur, s.RetainedBytes, s.SafeWALSize
	if lag != nil {
		out.LagBytes = *lag
	}
	return out, nil
}
