package maintain

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/deltabus/deltabus/telemetry/otelspan"
)

// Spans: a run is "deltabus.maintenance", each table a child
// "deltabus.maintenance.table" (attributes deltabus.table and, of a
// group's table, deltabus.group), each step of it (compact, cleanup,
// vacuum) a child of that, with what the step did. Options.Tracer nil
// records none.

func (o Options) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	tp := o.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/deltabus/deltabus/maintain").Start(ctx, "deltabus.maintenance"+name, trace.WithAttributes(attrs...))
}

// endSpan ends s, marking it failed when err is not nil.
func endSpan(s trace.Span, err error, attrs ...attribute.KeyValue) {
	otelspan.End(s, err, attrs...)
}
