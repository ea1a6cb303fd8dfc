package outbox

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Trace context in headers.
//
// Write records the caller's W3C trace context in each event's headers,
// so the trace of the request that produced an event continues through
// the relay to its consumers: the fields "traceparent", "tracestate" and
// "baggage" (W3C Trace Context and Baggage, as in HTTP), added to the
// event's headers JSON object. A field the caller set is never replaced;
// headers that are not a JSON object (an array, a string) are left as
// they are; an event without headers gets an object holding only the
// trace fields. Nothing is added when ctx carries no valid span context
// and no baggage. Writer.Propagator chooses another propagator; an empty
// composite (propagation.NewCompositeTextMapPropagator()) records nothing.
//
// The relay keeps headers unchanged; it links its topic-commit span to
// the producer spans it finds there (ProducerSpan). Consumers continue the
// trace with Event.TraceContext.

// w3c is Write's default propagator.
var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// traceFields returns the trace context of ctx as header fields, nil when
// there is none.
func (w Writer) traceFields(ctx context.Context) map[string]string {
	p := w.Propagator
	if p == nil {
		p = w3c
	}
	c := propagation.MapCarrier{}
	p.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// withTraceFields returns headers (JSON text, nil for none) with the
// fields it does not hold yet; headers that are not an object unchanged.
func withTraceFields(headers *string, fields map[string]string) *string {
	if len(fields) == 0 {
		return headers
	}
	var present map[string]json.RawMessage
	body := "}"
	if headers != nil {
		h := strings.TrimSpace(*headers)
		if !strings.HasPrefix(h, "{") || json.Unmarshal([]byte(h), &present) != nil {
			return headers // JSON null, an array, a scalar: not ours to change
		}
		body = strings.TrimSpace(h[1:])
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if _, ok := present[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return headers
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(fields[k])
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	if body != "}" {
		b.WriteByte(',')
	}
	b.WriteString(body)
	out := b.String()
	return &out
}

// HasTraceContext reports, without parsing, whether headers (JSON text)
// may carry a producer's trace context.
func HasTraceContext(headers string) bool {
	return strings.Contains(headers, `"traceparent"`)
}

// TraceContext returns ctx carrying the producer's trace context that
// headers (an event's headers, JSON text) hold in their top-level fields
// traceparent, tracestate and baggage: its span as the remote parent
// (trace.SpanContextFromContext) and its baggage. ctx comes back
// unchanged when headers hold no valid traceparent.
func TraceContext(ctx context.Context, headers string) context.Context {
	c := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate", "baggage"} {
		if v, ok := headerField(headers, k); ok {
			c[k] = v
		}
	}
	if c["traceparent"] == "" {
		return ctx
	}
	return w3c.Extract(ctx, c)
}

// ProducerSpan returns the span context of the producer recorded in
// headers (the one TraceContext returns), invalid when there is none. It
// reads the headers once and allocates only for a tracestate.
func ProducerSpan(headers string) trace.SpanContext {
	v, ok := headerField(headers, "traceparent")
	if !ok {
		return trace.SpanContext{}
	}
	sc, ok := parseTraceparent(v)
	if !ok {
		return trace.SpanContext{}
	}
	if ts, ok := headerField(headers, "tracestate"); ok && ts != "" {
		if state, err := trace.ParseTraceState(ts); err == nil {
			sc = sc.WithTraceState(state)
		}
	}
	return sc
}

// TraceContext returns ctx carrying the producer's trace context from the
// event's headers (see the package function): start the span that handles
// the event from it to continue the producer's trace.
func (e *Event) TraceContext(ctx context.Context) context.Context {
	if e.Headers == nil {
		return ctx
	}
	return TraceContext(ctx, *e.Headers)
}
