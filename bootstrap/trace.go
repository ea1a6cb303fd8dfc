package bootstrap

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/deltabus/deltabus/telemetry/otelspan"
)

// Spans: a bootstrap is "deltabus.bootstrap" with one child per phase
// (drop_slot, existing_ids, create_slot, copy, commit, marker); a rebuild
// is "deltabus.rebuild" with pause, wait_relay, wait_transactions, copy,
// record, commit_watermark and wait_commit. Options.Tracer nil records
// none.

// span is a phase's span; end records the phase's outcome.
type span struct{ trace.Span }

// startSpan starts name ("deltabus.<name>") as a child of ctx's span.
func (o Options) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, span) {
	tp := o.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	ctx, s := tp.Tracer("github.com/deltabus/deltabus/bootstrap").Start(ctx, "deltabus."+name, trace.WithAttributes(attrs...))
	return ctx, span{s}
}

// end ends the span, marking it failed when err is not nil.
func (s span) end(err error, attrs ...attribute.KeyValue) {
	otelspan.End(s.Span, err, attrs...)
}
