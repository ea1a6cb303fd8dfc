package maintain

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/storage"
)

// Metrics are the maintenance counters. A nil *Metrics records nothing.
type Metrics struct {
	runs, errors, compacted, logDeleted, filesDeleted, releases metric.Int64Counter
	lastRun                                                     metric.Float64Gauge
}

// NewMetrics creates the maintenance instruments from mp.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter("github.com/deltabus/deltabus/maintain")
	var errs [7]error
	c := func(i int, name, help string) metric.Int64Counter {
		var ctr metric.Int64Counter
		ctr, errs[i] = meter.Int64Counter("deltabus_maintenance_"+name, metric.WithDescription(help))
		return ctr
	}
	m := &Metrics{
		runs:         c(0, "runs_total", "Maintenance runs over every table."),
		errors:       c(1, "errors_total", "Maintenance steps that failed (retried at the next run)."),
		compacted:    c(2, "files_compacted_total", "Small data files rewritten into larger ones."),
		logDeleted:   c(3, "log_files_deleted_total", "Expired log files deleted."),
		filesDeleted: c(4, "data_files_deleted_total", "Unreferenced data files deleted by VACUUM."),
		releases: c(6, "consumer_releases_total",
			"Protected consumer groups released past their maximum hold: what they had not acknowledged is deleted as the retention says."),
	}
	m.lastRun, errs[5] = meter.Float64Gauge("deltabus_maintenance_last_run_timestamp_seconds",
		metric.WithDescription("Unix time the last maintenance run ended."), metric.WithUnit("s"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	m.add(Report{}) // every series shown from the start, at 0
	m.runs.Add(context.Background(), 0)
	m.lastRun.Record(context.Background(), 0)
	return m, nil
}

func (m *Metrics) add(r Report) {
	ctx := context.Background()
	var errs, compacted, logs, files, released int
	for _, t := range r.Tables {
		errs, compacted = errs+len(t.Errors), compacted+t.Compacted
		logs, files, released = logs+t.LogDeleted, files+t.FilesDeleted, released+len(t.Released)
	}
	m.releases.Add(ctx, int64(released))
	m.errors.Add(ctx, int64(errs))
	m.compacted.Add(ctx, int64(compacted))
	m.logDeleted.Add(ctx, int64(logs))
	m.filesDeleted.Add(ctx, int64(files))
}

func (m *Metrics) observe(r Report) {
	if m == nil {
		return
	}
	m.runs.Add(context.Background(), 1)
	m.lastRun.Record(context.Background(), float64(time.Now().UnixNano())/1e9)
	m.add(r)
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
		for _, t := range rep.Tables {
			compacted, logs, files = compacted+t.Compacted, logs+t.LogDeleted, files+t.FilesDeleted
		}
		opts.Logger.Info("maintenance", "tables", len(rep.Tables), "files_compacted", compacted,
			"log_files_deleted", logs, "data_files_deleted", files, "took", rep.Took.Round(time.Millisecond))
	}
}
