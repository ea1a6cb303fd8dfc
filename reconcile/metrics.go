package reconcile

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics expose the last result per topic for scheduled runs (--every).
// Each run replaces the previous run's series: a topic absent from the
// last run has none.
type Metrics struct {
	mu   sync.Mutex
	last reconcileFigures
}

// reconcileFigures is what the gauges show, per topic and for the run.
type reconcileFigures struct {
	perTopic                   map[string]*[5]float64 // missing, unexpected, duplicates, source, log
	hasLog                     map[string]bool
	status                     map[string]Status // the topic's worst status
	lastRun, lastExit, skipped float64
}

var topicGauges = [5]struct{ name, help string }{
	{"missing_events", "events in the source but not in the log, last run, summed over checked windows"},
	{"unexpected_events", "events in the log but not in the source (nor explained by clean-up), last run"},
	{"duplicate_events", "extra copies of events in the log, last run"},
	{"source_events", "source rows in the checked windows, last run"},
	{"log_events", "log events in the checked readable windows, last run"},
}

// NewMetrics creates the reconciler's gauges from mp.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter("github.com/deltabus/deltabus/reconcile")
	m := &Metrics{}
	var errs []error
	gauge := func(name, help string, cb metric.Float64Callback) {
		_, err := meter.Float64ObservableGauge("deltabus_reconcile_"+name, metric.WithDescription(help), metric.WithFloat64Callback(cb))
		errs = append(errs, err)
	}
	for i, g := range topicGauges {
		gauge(g.name, g.help, func(_ context.Context, o metric.Float64Observer) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			for topic, v := range m.last.perTopic {
				if i == 4 && !m.last.hasLog[topic] {
					continue
				}
				o.Observe(v[i], metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", topic))))
			}
			return nil
		})
	}
	gauge("topic_status", "1 for the topic's worst status in the last run (label status: clean, diverged, unreadable, error)",
		func(_ context.Context, o metric.Float64Observer) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			for topic, s := range m.last.status {
				o.Observe(1, metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", topic), attribute.String("status", string(s)))))
			}
			return nil
		})
	one := func(name, help string, v *float64) {
		gauge(name, help, func(_ context.Context, o metric.Float64Observer) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			o.Observe(*v)
			return nil
		})
	}
	one("last_run_timestamp_seconds", "server time of the last completed run", &m.last.lastRun)
	one("last_exit_code", "0 clean, 1 divergence or unreadable, 2 could not run", &m.last.lastExit)
	one("skipped_windows", "windows skipped as open or beyond retention, last run", &m.last.skipped)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe replaces the gauges with the report's figures.
func (m *Metrics) Observe(rep *Report) {
	if m == nil {
		return
	}
	f := reconcileFigures{perTopic: map[string]*[5]float64{}, hasLog: map[string]bool{}, status: map[string]Status{},
		lastRun: float64(rep.RunAt.Unix()), lastExit: float64(rep.ExitCode()), skipped: float64(len(rep.Skipped))}
	rank := map[Status]int{StatusClean: 0, StatusDiverged: 3, StatusUnreadable: 2, StatusError: 1}
	for _, r := range rep.Results {
		v := f.perTopic[r.Topic]
		if v == nil {
			v = new([5]float64)
			f.perTopic[r.Topic] = v
		}
		v[0] += float64(r.MissingCount)
		v[1] += float64(r.UnexpectedCount)
		v[2] += float64(r.DuplicateCount)
		v[3] += float64(r.SourceCount)
		if r.LogCount != nil {
			v[4] += float64(*r.LogCount)
			f.hasLog[r.Topic] = true
		}
		if w, ok := f.status[r.Topic]; !ok || rank[r.Status] > rank[w] {
			f.status[r.Topic] = r.Status
		}
	}
	m.mu.Lock()
	m.last = f
	m.mu.Unlock()
}

// ObserveFailure records a run that could not be made.
func (m *Metrics) ObserveFailure() {
	if m != nil {
		m.mu.Lock()
		m.last.lastExit = ExitCannotRun
		m.mu.Unlock()
	}
}
