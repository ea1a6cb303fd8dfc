package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics expose the last result per topic for scheduled runs (--every).
type Metrics struct {
	status     *prometheus.GaugeVec // 1 for the topic's worst status of the last run
	missing    *prometheus.GaugeVec
	unexpected *prometheus.GaugeVec
	duplicates *prometheus.GaugeVec
	source     *prometheus.GaugeVec
	log        *prometheus.GaugeVec
	lastRun    prometheus.Gauge
	lastExit   prometheus.Gauge
	skipped    prometheus.Gauge
}

// NewMetrics registers the reconciler's gauges on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "deltabus", Subsystem: "reconcile", Name: name, Help: help}, []string{"topic"})
		reg.MustRegister(v)
		return v
	}
	one := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "deltabus", Subsystem: "reconcile", Name: name, Help: help})
		reg.MustRegister(v)
		return v
	}
	m := &Metrics{
		missing:    g("missing_events", "events in the source but not in the log, last run, summed over checked windows"),
		unexpected: g("unexpected_events", "events in the log but not in the source (nor explained by clean-up), last run"),
		duplicates: g("duplicate_events", "extra copies of events in the log, last run"),
		source:     g("source_events", "source rows in the checked windows, last run"),
		log:        g("log_events", "log events in the checked readable windows, last run"),
		lastRun:    one("last_run_timestamp_seconds", "server time of the last completed run"),
		lastExit:   one("last_exit_code", "0 clean, 1 divergence or unreadable, 2 could not run"),
		skipped:    one("skipped_windows", "windows skipped as open or beyond retention, last run"),
	}
	m.status = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "deltabus", Subsystem: "reconcile", Name: "topic_status",
		Help: "1 for the topic's worst status in the last run (label status: clean, diverged, unreadable, error)"}, []string{"topic", "status"})
	reg.MustRegister(m.status)
	return m
}

// Observe replaces the gauges with the report's figures.
func (m *Metrics) Observe(rep *Report) {
	if m == nil {
		return
	}
	for _, v := range []*prometheus.GaugeVec{m.missing, m.unexpected, m.duplicates, m.source, m.log, m.status} {
		v.Reset()
	}
	worst := map[string]Status{}
	rank := map[Status]int{StatusClean: 0, StatusDiverged: 3, StatusUnreadable: 2, StatusError: 1}
	for _, r := range rep.Results {
		m.missing.WithLabelValues(r.Topic).Add(float64(r.MissingCount))
		m.unexpected.WithLabelValues(r.Topic).Add(float64(r.UnexpectedCount))
		m.duplicates.WithLabelValues(r.Topic).Add(float64(r.DuplicateCount))
		m.source.WithLabelValues(r.Topic).Add(float64(r.SourceCount))
		if r.LogCount != nil {
			m.log.WithLabelValues(r.Topic).Add(float64(*r.LogCount))
		}
		if w, ok := worst[r.Topic]; !ok || rank[r.Status] > rank[w] {
			worst[r.Topic] = r.Status
		}
	}
	for t, s := range worst {
		m.status.WithLabelValues(t, string(s)).Set(1)
	}
	m.lastRun.Set(float64(rep.RunAt.Unix()))
	m.lastExit.Set(float64(rep.ExitCode()))
	m.skipped.Set(float64(len(rep.Skipped)))
}

// ObserveFailure records a run that could not be made.
func (m *Metrics) ObserveFailure() {
	if m != nil {
		m.lastExit.Set(ExitCannotRun)
	}
}
