package relay

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/catalog"
)

// registerTimeline creates deltabus_source_timeline and
// deltabus_phantom_events.
func (m *Metrics) registerTimeline(meter metric.Meter) (error, error) {
	_, errT := meter.Int64ObservableGauge("deltabus_source_timeline",
		metric.WithDescription("The PostgreSQL timeline the relay's progress is made on: it grows by one at every promotion of a standby the relay follows."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			if tl := m.timeline.Load(); tl != 0 {
				o.Observe(int64(tl))
			}
			return nil
		}))
	_, errP := meter.Int64ObservableGauge("deltabus_phantom_events",
		metric.WithDescription("Events of this source a topic holds that the source lost at a failover (published from the old primary's timeline past the fork, absent from the new one), by topic: consumers may have acted on them; relay reconcile names them."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			m.mu.Lock()
			defer m.mu.Unlock()
			for t, n := range m.phantoms {
				o.Observe(int64(n), metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", t))))
			}
			return nil
		}))
	return errT, errP
}

// forks records the source's timeline and the phantoms its forks left.
func (m *Metrics) forks(timeline uint32, appID string, forks []catalog.Fork) {
	if m == nil {
		return
	}
	m.timeline.Store(timeline)
	byTopic := map[string]int{}
	for _, f := range forks {
		if f.AppID != appID {
			continue
		}
		for t, p := range f.Phantoms {
			byTopic[t] += len(p.IDs)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.phantoms = byTopic
}
