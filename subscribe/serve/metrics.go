package serve

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/deltabus/deltabus/subscribe/members"
)

// groupGauges are the per-group series of /metrics, labelled by group and
// topic. Keys are never labels: they are producers' data, of unbounded
// number; the status API and the operator's page name the oldest event's
// key.
var groupGauges = []struct {
	name, help string
	value      func(s *members.Status, now time.Time) (float64, bool)
}{
	{"members", "Members that asked for events in the last minute.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(len(s.Members)), true }},
	{"in_flight", "Events handed to a member whose lease has not ended.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.InFlight), true }},
	{"unacked", "Events read and not acknowledged, in flight or not.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Unacked), true }},
	{"waiting", "Events waiting behind an earlier event of their key (per-key waits).",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Waiting), true }},
	{"buffered", "Events the server holds from the group's position on.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Buffered), true }},
	{"oldest_unacked_seconds", "Age (since its commit) of the oldest event not acknowledged: its key holds the group's position back.",
		func(s *members.Status, now time.Time) (float64, bool) {
			if s.Oldest == nil || s.Oldest.CommitTime.IsZero() {
				return 0, true
			}
			return max(now.Sub(s.Oldest.CommitTime).Seconds(), 0), true
		}},
	{"oldest_unacked_deliveries", "Deliveries of the oldest event not acknowledged (high: a poison event).",
		func(s *members.Status, _ time.Time) (float64, bool) {
			if s.Oldest == nil {
				return 0, true
			}
			return float64(s.Oldest.Delivery), true
		}},
	{"acked_per_second", "Events acknowledged per second over the last minute (throughput).",
		func(s *members.Status, _ time.Time) (float64, bool) { return s.AckRate, true }},
	{"delivered", "Deliveries since the group was created.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Delivered), true }},
	{"redelivered", "Deliveries beyond an event's first since the group was created.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Redelivered), true }},
	{"acked", "Events acknowledged since the group was created.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Acked), true }},
	{"duplicates_skipped", "Duplicate events (by source and event_id) dropped since the group was created.",
		func(s *members.Status, _ time.Time) (float64, bool) { return float64(s.Skipped), true }},
	{"stopped", "1 when the group cannot read its topic until it is reset (retention passed it, its table was replaced).",
		func(s *members.Status, _ time.Time) (float64, bool) {
			if s.Error != "" {
				return 1, true
			}
			return 0, true
		}},
}

// RegisterMetrics adds the groups' gauges (deltabus_members_*) to mp,
// read from gs at each collection.
func RegisterMetrics(mp metric.MeterProvider, gs *members.Groups) error {
	meter := mp.Meter("github.com/deltabus/deltabus/subscribe/serve")
	insts := make([]metric.Float64ObservableGauge, len(groupGauges))
	obs := make([]metric.Observable, len(groupGauges))
	for i, g := range groupGauges {
		inst, err := meter.Float64ObservableGauge("deltabus_members_"+g.name, metric.WithDescription(g.help))
		if err != nil {
			return err
		}
		insts[i], obs[i] = inst, inst
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		now := time.Now()
		for _, s := range gs.Status() {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String("group", s.Group), attribute.String("topic", s.Topic)))
			for i, g := range groupGauges {
				if v, ok := g.value(&s, now); ok {
					o.ObserveFloat64(insts[i], v, set)
				}
			}
		}
		return nil
	}, obs...)
	return err
}
