package contract

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics count what contracts refused and what was registered
// (OpenTelemetry instruments, served on /metrics under their Prometheus
// names). A nil *Metrics records nothing.
//
// Labels never carry row values the registry does not know: a rejected
// event's type is its label only when the type has contracts, and its
// version only when registered (else "unregistered"), so a hostile row
// cannot grow the series.
type Metrics struct {
	rejections    metric.Int64Counter // topic, type, version, where, problem
	registrations metric.Int64Counter // topic, type, outcome (Registry.Register)
	seen          metric.Int64Counter // topic, type: versions a Cache saw appear
	where         string
}

// NewMetrics creates the instruments from mp. where labels the rejections
// ("relay", "producer", "consumer").
func NewMetrics(mp metric.MeterProvider, where string) (*Metrics, error) {
	meter := mp.Meter("github.com/deltabus/deltabus/contract")
	m := &Metrics{where: where}
	var err1, err2, err3 error
	m.rejections, err1 = meter.Int64Counter("deltabus_contract_rejections_total",
		metric.WithDescription("Events refused by their contract, by topic, type, version, where (relay, producer, consumer) and problem (invalid, unregistered-version, no-contract)."))
	m.registrations, err2 = meter.Int64Counter("deltabus_contract_registrations_total",
		metric.WithDescription("Contract registrations, by topic, type and outcome (registered, unchanged, incompatible, refused, failed)."))
	m.seen, err3 = meter.Int64Counter("deltabus_contract_versions_seen_total",
		metric.WithDescription("Contract versions this process saw registered while running, by topic and type: consumers are about to see them."))
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) rejected(v *Violation, known bool) {
	if m == nil {
		return
	}
	typ, version := "(no contract)", "unregistered"
	if known {
		typ = v.Type
		if v.Problem == Invalid {
			version = strconv.Itoa(int(v.Version))
		}
	}
	m.rejections.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String("topic", v.Topic), attribute.String("type", typ), attribute.String("version", version),
		attribute.String("where", m.where), attribute.String("problem", string(v.Problem)))))
}

func (m *Metrics) registration(topic, typ, outcome string) {
	if m == nil {
		return
	}
	m.registrations.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String("topic", topic), attribute.String("type", typ), attribute.String("outcome", outcome))))
}

func (m *Metrics) versionSeen(topic, typ string) {
	if m == nil {
		return
	}
	m.seen.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String("topic", topic), attribute.String("type", typ))))
}
