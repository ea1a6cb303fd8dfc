package check

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are the rows as gauges, labelled by group and topic (one series
// per row, as in the table). Each Set replaces the previous rows' series.
type Metrics struct {
	mu   sync.Mutex
	rows []Row
}

var rowGauges = []struct {
	name, help string
	value      func(r *Row) (float64, bool)
}{
	{"lag_versions", "Delta versions between the group's position and the newest commit.",
		func(r *Row) (float64, bool) { return float64(r.LagVersions), true }},
	{"lag_seconds", "Seconds between the newest commit and the group's last consumed commit.",
		func(r *Row) (float64, bool) { return r.LagSeconds, true }},
	{"retention_headroom_versions", "The group's position minus the earliest version the log holds (negative: retention passed it).",
		func(r *Row) (float64, bool) { return float64(r.HeadroomVersions), true }},
	{"retention_headroom_seconds", "Time left before log clean-up passes the group's position.",
		func(r *Row) (float64, bool) { return r.HeadroomSeconds, true }},
	{"completeness_ratio", "Business keys of closed periods present in the group's table, over those in the topic.",
		func(r *Row) (float64, bool) {
			if r.Completeness == nil {
				return 0, false
			}
			return r.Completeness.Ratio, true
		}},
	{"duplicate_ratio", "Rows beyond the first per business key, over the rows checked.",
		func(r *Row) (float64, bool) {
			if r.Completeness == nil {
				return 0, false
			}
			return r.Completeness.DuplicateRate, true
		}},
	{"breach", "1 when the row breaches a threshold or could not be checked.",
		func(r *Row) (float64, bool) {
			if len(r.Breaches) > 0 {
				return 1, true
			}
			return 0, true
		}},
}

// NewMetrics creates the gauges from mp.
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	meter := mp.Meter("github.com/deltabus/deltabus/subscribe/check")
	m := &Metrics{}
	var errs []error
	for _, g := range rowGauges {
		_, err := meter.Float64ObservableGauge("deltabus_consumer_"+g.name, metric.WithDescription(g.help),
			metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
				m.mu.Lock()
				defer m.mu.Unlock()
				for i := range m.rows {
					r := &m.rows[i]
					if v, ok := g.value(r); ok {
						o.Observe(v, metric.WithAttributeSet(attribute.NewSet(attribute.String("group", r.Group), attribute.String("topic", r.Topic))))
					}
				}
				return nil
			}))
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Set replaces the gauges with rows.
func (m *Metrics) Set(rows []Row) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.rows = append(m.rows[:0], rows...)
	m.mu.Unlock()
}
