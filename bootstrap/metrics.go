package bootstrap

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the snapshot's Prometheus metrics; nil records nothing.
type metrics struct {
	rows      prometheus.Counter
	estimated prometheus.Gauge
	added     *prometheus.CounterVec
	skipped   *prometheus.CounterVec
}

// newMetrics registers the metrics on reg (nil = none). Registering twice
// (a second bootstrap in the same process) reuses the first collectors.
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		rows: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltabus_bootstrap_rows_read_total",
			Help: "Outbox rows read from bootstrap snapshots."}),
		estimated: prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltabus_bootstrap_rows_estimated",
			Help: "Estimated outbox rows of the running bootstrap snapshot (pg_class.reltuples)."}),
		added: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltabus_bootstrap_events_added_total",
			Help: "Events committed by bootstrap snapshots, by topic."}, []string{"topic"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltabus_bootstrap_events_skipped_total",
			Help: "Snapshot events not written because their topic already held them, by topic."}, []string{"topic"}),
	}
	m.rows = register(reg, m.rows)
	m.estimated = register(reg, m.estimated)
	m.added = register(reg, m.added)
	m.skipped = register(reg, m.skipped)
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) addRows(n int64) {
	if m != nil {
		m.rows.Add(float64(n))
	}
}

func (m *metrics) setEstimate(n int64) {
	if m != nil {
		m.estimated.Set(float64(n))
	}
}

func (m *metrics) topicDone(name string, added, skipped int64) {
	if m != nil {
		m.added.WithLabelValues(name).Add(float64(added))
		m.skipped.WithLabelValues(name).Add(float64(skipped))
	}
}
