package maintain

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/deltabus/deltabus/storage"
)

// Metrics are the maintenance counters. A nil *Metrics records nothing.
type Metrics struct {
	Runs, Errors, Compacted, LogDeleted, FilesDeleted prometheus.Counter
	LastRun                                           prometheus.Gauge
}

// NewMetrics registers the maintenance metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "deltabus_maintenance_" + name, Help: help})
	}
	m := &Metrics{
		Runs:         c("runs_total", "Maintenance runs over every topic."),
		Errors:       c("errors_total", "Maintenance steps that failed (retried at the next run)."),
		Compacted:    c("files_compacted_total", "Small data files rewritten into larger ones."),
		LogDeleted:   c("log_files_deleted_total", "Expired log files deleted."),
		FilesDeleted: c("data_files_deleted_total", "Unreferenced data files deleted by VACUUM."),
		LastRun:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltabus_maintenance_last_run_timestamp_seconds", Help: "Unix time the last maintenance run ended."}),
	}
	if reg != nil {
		reg.MustRegister(m.Runs, m.Errors, m.Compacted, m.LogDeleted, m.FilesDeleted, m.LastRun)
	}
	return m
}

func (m *Metrics) observe(r Report) {
	if m == nil {
		return
	}
	m.Runs.Inc()
	m.LastRun.SetToCurrentTime()
	for _, t := range r.Topics {
		m.Errors.Add(float64(len(t.Errors)))
		m.Compacted.Add(float64(t.Compacted))
		m.LogDeleted.Add(float64(t.LogDeleted))
		m.FilesDeleted.Add(float64(t.FilesDeleted))
	}
}

// Loop runs Run every interval (the first run after a random part of it, so
// relays started together do not compact together) until ctx ends.
func Loop(ctx context.Context, root storage.Store, every time.Duration, opts Options, m *Metrics) {
	opts = opts.withDefaults()
	wait := every/4 + rand.N(every/4+1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = every
		rep, err := Run(ctx, root, opts)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			opts.Logger.Warn("maintenance run failed; next run in", "every", every, "err", err)
			continue
		}
		m.observe(rep)
		var compacted, logs, files int
		for _, t := range rep.Topics {
			compacted, logs, files = compacted+t.Compacted, logs+t.LogDeleted, files+t.FilesDeleted
		}
		opts.Logger.Info("maintenance", "topics", len(rep.Topics), "files_compacted", compacted,
			"log_files_deleted", logs, "data_files_deleted", files, "took", rep.Took.Round(time.Millisecond))
	}
}
