package serve_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/members/memberstest"
	"github.com/deltabus/deltabus/subscribe/serve"
)

// TestMetricsPerGroup: the groups' gauges carry group and topic and say
// what the group holds: members, events in flight, events waiting behind
// their key.
func TestMetricsPerGroup(t *testing.T) {
	root := localRoot(t)
	tp := memberstest.NewTopic(t, root, "orders")
	tp.Commit(memberstest.Event{ID: "a1", Key: "a"}, memberstest.Event{ID: "a2", Key: "a"}, memberstest.Event{ID: "b1", Key: "b"})
	gs := members.New(root, members.Options{PollInterval: 10 * time.Millisecond})
	defer gs.Close()
	reader := sdkmetric.NewManualReader()
	if err := serve.RegisterMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), gs); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msgs, err := gs.Receive(ctx, "g", "orders", members.ReceiveRequest{Member: "m1", Max: 10, Wait: 5 * time.Second})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[float64])
			if !ok {
				continue
			}
			for _, dp := range g.DataPoints {
				group, _ := dp.Attributes.Value("group")
				topic, _ := dp.Attributes.Value("topic")
				if group.AsString() == "g" && topic.AsString() == "orders" {
					got[m.Name] = dp.Value
				}
			}
		}
	}
	for name, want := range map[string]float64{"deltabus_members_members": 1, "deltabus_members_in_flight": 2,
		"deltabus_members_waiting": 1, "deltabus_members_unacked": 3, "deltabus_members_delivered": 2, "deltabus_members_stopped": 0} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %t), want %v; all: %v", name, v, ok, want, got)
		}
	}
	if _, ok := got["deltabus_members_oldest_unacked_seconds"]; !ok {
		t.Errorf("no oldest_unacked_seconds: %v", got)
	}
}
