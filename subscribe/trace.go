package subscribe

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/telemetry/otelspan"
)

// MaxProducerLinks bounds the producer links of one handler span.
const MaxProducerLinks = 128

// handle runs the handler on b in the span "deltabus.subscribe.handle"
// (topic, group, events, positions), a child of ctx's span linked to the
// producer spans whose trace context the events carry in their headers
// (outbox.TraceContext; at most MaxProducerLinks, the rest counted in
// deltabus.producer_links.dropped). Headers are read only when the span
// records. A handler that wants a span per event continues each
// producer's trace with Event.TraceContext.
func (s *subscription) handle(ctx context.Context, b *Batch) error {
	tp := s.o.Tracer
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	ctx, span := tp.Tracer("github.com/deltabus/deltabus/subscribe").Start(ctx, "deltabus.subscribe.handle",
		trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	if span.IsRecording() {
		n, headers := len(b.Events), func(i int) *string { return b.Events[i].Headers }
		if b.Columns != nil {
			n, headers = b.Columns.Len(), b.Columns.Headers
		}
		span.SetAttributes(attribute.String("deltabus.topic", b.Topic), attribute.String("messaging.destination.name", b.Topic),
			attribute.String("deltabus.group", b.Group), attribute.Int("deltabus.events", n),
			attribute.String("deltabus.from", b.From.String()), attribute.String("deltabus.to", b.To.String()))
		linkProducers(span, n, headers)
	}
	err := s.h(ctx, b)
	otelspan.Fail(span, err)
	return err
}

// linkProducers links span to the producer spans of n events (their
// headers), once per producer call in a row.
func linkProducers(span trace.Span, n int, headers func(int) *string) {
	var last trace.SpanContext
	links, dropped := 0, 0
	for i := range n {
		h := headers(i)
		if h == nil || !outbox.HasTraceContext(*h) {
			continue
		}
		if links >= MaxProducerLinks {
			dropped++
			continue
		}
		sc := outbox.ProducerSpan(*h)
		if !sc.IsValid() || sc.Equal(last) {
			continue
		}
		span.AddLink(trace.Link{SpanContext: sc})
		last, links = sc, links+1
	}
	if dropped > 0 {
		span.SetAttributes(attribute.Int("deltabus.producer_links.dropped", dropped))
	}
}
