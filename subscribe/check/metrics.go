package check

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the rows as Prometheus gauges, labelled by group and topic
// (one series per row, as in the table).
type Metrics struct {
	lagVersions, lagSeconds          *prometheus.GaugeVec
	headroomVersions, headroomSecs   *prometheus.GaugeVec
	completeness, duplicates, breach *prometheus.GaugeVec
}

// NewMetrics registers the gauges on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "deltabus_consumer_" + name, Help: help}, []string{"group", "topic"})
		reg.MustRegister(v)
		return v
	}
	return &Metrics{
		lagVersions:      g("lag_versions", "Delta versions between the group's position and the newest commit."),
		lagSeconds:       g("lag_seconds", "Seconds between the newest commit and the group's last consumed commit."),
		headroomVersions: g("retention_headroom_versions", "The group's position minus the earliest version the log holds (negative: retention passed it)."),
		headroomSecs:     g("retention_headroom_seconds", "Time left before log clean-up passes the group's position."),
		completeness:     g("completeness_ratio", "Business keys of closed periods present in the group's table, over those in the topic."),
		duplicates:       g("duplicate_ratio", "Rows beyond the first per business key, over the rows checked."),
		breach:           g("breach", "1 when the row breaches a threshold or could not be checked."),
	}
}

// Set replaces the gauges with rows.
func (m *Metrics) Set(rows []Row) {
	if m == nil {
		return
	}
	for _, v := range []*prometheus.GaugeVec{m.lagVersions, m.lagSeconds, m.headroomVersions, m.headroomSecs, m.completeness, m.duplicates, m.breach} {
		v.Reset()
	}
	for _, r := range rows {
		l := prometheus.Labels{"group": r.Group, "topic": r.Topic}
		m.lagVersions.With(l).Set(float64(r.LagVersions))
		m.lagSeconds.With(l).Set(r.LagSeconds)
		m.headroomVersions.With(l).Set(float64(r.HeadroomVersions))
		m.headroomSecs.With(l).Set(r.HeadroomSeconds)
		if c := r.Completeness; c != nil {
			m.completeness.With(l).Set(c.Ratio)
			m.duplicates.With(l).Set(c.DuplicateRate)
		}
		b := 0.0
		if len(r.Breaches) > 0 {
			b = 1
		}
		m.breach.With(l).Set(b)
	}
}
