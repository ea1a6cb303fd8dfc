package relay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	Events       *prometheus.CounterVec // events committed, by topic
	DeadLetters  prometheus.Counter
	Skipped      prometheus.Counter // events dropped because their topic already held them
	Commits      *prometheus.CounterVec
	BatchSeconds prometheus.Histogram
	Latency      prometheus.Histogram // source commit -> Delta commit, per batch's last transaction
	DurableLSN   prometheus.Gauge
	ReceivedLSN  prometheus.Gauge
	Reconnects   prometheus.Counter
	LastCommit   *prometheus.GaugeVec // unix seconds of the last commit, by topic
	// PausedSince is the pause watermark LSN of a topic waiting for its
	// rebuild (the slot is held there), by topic; absent when not paused.
	PausedSince *prometheus.GaugeVec
	// WatermarksIgnored counts rebuild watermarks without a matching
	// intent in the store (forged, or malformed).
	WatermarksIgnored prometheus.Counter
}

// NewMetrics registers the relay's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Events:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltabus_events_committed_total", Help: "Events committed to Delta topic tables."}, []string{"topic"}),
		DeadLetters: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltabus_dead_letters_total", Help: "Outbox rows sent to the _dead_letter topic."}),
		Skipped:     prometheus.NewCounter(prometheus.CounterOpts{Name: "deltabus_events_skipped_total", Help: "Events re-sent by PostgreSQL after a restart and dropped because their topic already holds them."}),
		Commits:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "deltabus_delta_commits_total", Help: "Delta commits, by topic."}, []string{"topic"}),
		BatchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deltabus_batch_commit_seconds", Help: "Time to commit one batch to every topic.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 14)}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "deltabus_end_to_end_seconds", Help: "Source commit to Delta commit, for the last transaction of each batch.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		DurableLSN:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltabus_durable_lsn", Help: "Highest LSN acknowledged to PostgreSQL (all events below it are in Delta)."}),
		ReceivedLSN:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "deltabus_received_lsn", Help: "Highest LSN received from PostgreSQL."}),
		Reconnects:        prometheus.NewCounter(prometheus.CounterOpts{Name: "deltabus_reconnects_total", Help: "Replication sessions restarted after an error."}),
		LastCommit:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltabus_last_commit_timestamp_seconds", Help: "Unix time of the last Delta commit, by topic."}, []string{"topic"}),
		PausedSince:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltabus_rebuild_paused_since_lsn", Help: "Position a held topic (waiting for its rebuild, or whose table is missing or incompatible) holds the slot at."}, []string{"topic"}),
		WatermarksIgnored: prometheus.NewCounter(prometheus.CounterOpts{Name: "deltabus_watermarks_ignored_total", Help: "Rebuild watermarks ignored: malformed, or without a matching intent in the store."}),
	}
	if reg != nil {
		reg.MustRegister(m.Events, m.DeadLetters, m.Skipped, m.Commits, m.BatchSeconds, m.Latency,
			m.DurableLSN, m.ReceivedLSN, m.Reconnects, m.LastCommit, m.PausedSince, m.WatermarksIgnored)
	}
	return m
}

func (m *Metrics) batchCommitted(b *batch, took time.Duration) {
	if m == nil {
		return
	}
	m.BatchSeconds.Observe(took.Seconds())
	if !b.lastTime.IsZero() && b.events > 0 {
		m.Latency.Observe(time.Since(b.lastTime).Seconds())
	}
}

func (m *Metrics) acknowledged(lsn uint64) {
	if m != nil {
		m.DurableLSN.Set(float64(lsn))
	}
}

func (m *Metrics) watermarkIgnored() {
	if m != nil {
		m.WatermarksIgnored.Inc()
	}
}

func (m *Metrics) topicCommitted(topic string, events int) {
	if m == nil {
		return
	}
	m.Events.WithLabelValues(topic).Add(float64(events))
	m.Commits.WithLabelValues(topic).Inc()
	m.LastCommit.WithLabelValues(topic).SetToCurrentTime()
}

func (m *Metrics) deadLetter() {
	if m != nil {
		m.DeadLetters.Inc()
	}
}

func (m *Metrics) skipped() {
	if m != nil {
		m.Skipped.Inc()
	}
}

func (m *Metrics) received(lsn uint64) {
	if m != nil {
		m.ReceivedLSN.Set(float64(lsn))
	}
}

func (m *Metrics) reconnect() {
	if m != nil {
		m.Reconnects.Inc()
	}
}

func (m *Metrics) paused(topic string, since uint64, on bool) {
	if m == nil {
		return
	}
	if on {
		m.PausedSince.WithLabelValues(topic).Set(float64(since))
	} else {
		m.PausedSince.DeleteLabelValues(topic)
	}
}
