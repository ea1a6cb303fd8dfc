package bootstrap

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are the snapshot's metrics; nil records nothing. A second
// bootstrap in the same process gets the same instruments (the meter
// returns an instrument already created under a name).
type metrics struct {
	rows      metric.Int64Counter
	estimated metric.Int64Gauge
	added     metric.Int64Counter // by topic
	skipped   metric.Int64Counter // by topic
}

// newMetrics creates the instruments from mp (nil = none). It never fails
// a bootstrap: an instrument the SDK refuses records nothing.
func newMetrics(mp metric.MeterProvider) *metrics {
	if mp == nil {
		return nil
	}
	meter := mp.Meter("github.com/deltabus/deltabus/bootstrap")
	m := &metrics{}
	var errs [4]error
	m.rows, errs[0] = meter.Int64Counter("deltabus_bootstrap_rows_read_total",
		metric.WithDescription("Outbox rows read from bootstrap snapshots."))
	m.estimated, errs[1] = meter.Int64Gauge("deltabus_bootstrap_rows_estimated",
		metric.WithDescription("Estimated outbox rows of the running bootstrap snapshot (pg_class.reltuples)."))
	m.added, errs[2] = meter.Int64Counter("deltabus_bootstrap_events_added_total",
		metric.WithDescription("Events committed by bootstrap snapshots, by topic."))
	m.skipped, errs[3] = meter.Int64Counter("deltabus_bootstrap_events_skipped_total",
		metric.WithDescription("Snapshot events not written because their topic already held them, by topic."))
	if err := errors.Join(errs[:]...); err != nil {
		otel.Handle(err)
	}
	m.addRows(0) // shown from the start, as the Prometheus counters were
	m.setEstimate(0)
	return m
}

func (m *metrics) addRows(n int64) {
	if m != nil {
		m.rows.Add(context.Background(), n)
	}
}

func (m *metrics) setEstimate(n int64) {
	if m != nil {
		m.estimated.Record(context.Background(), n)
	}
}

func (m *metrics) topicDone(name string, added, skipped int64) {
	if m != nil {
		attr := metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", name)))
		m.added.Add(context.Background(), added, attr)
		m.skipped.Add(context.Background(), skipped, attr)
	}
}
