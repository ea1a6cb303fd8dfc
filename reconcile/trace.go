package reconcile

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/deltabus/deltabus/telemetry/otelspan"
)

// Spans: a run is "deltabus.reconcile" (windows checked and skipped, exit
// code), each checked (topic, window) a child "deltabus.reconcile.window"
// with its status and counts. Options.Tracer nil records none.

func (o Options) tracer() trace.Tracer {
	tp := o.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer("github.com/deltabus/deltabus/reconcile")
}

func (c *checker) startWindow(ctx context.Context, res *Result) (context.Context, trace.Span) {
	return c.opts.tracer().Start(ctx, "deltabus.reconcile.window", trace.WithAttributes(attribute.String("deltabus.topic", res.Topic),
		attribute.String("deltabus.window.start", res.Window.Start.Format(time.RFC3339)),
		attribute.String("deltabus.window.end", res.Window.End.Format(time.RFC3339))))
}

func endWindow(span trace.Span, res *Result, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("deltabus.status", string(res.Status)), attribute.String("deltabus.check", res.Check),
			attribute.Int64("deltabus.source_events", res.SourceCount), attribute.Int64("deltabus.missing", res.MissingCount),
			attribute.Int64("deltabus.unexpected", res.UnexpectedCount), attribute.Int64("deltabus.duplicates", res.DuplicateCount))
		if res.LogCount != nil {
			span.SetAttributes(attribute.Int64("deltabus.log_events", *res.LogCount))
		}
		switch {
		case err != nil:
			otelspan.Fail(span, err)
		case res.Status != StatusClean:
			span.SetStatus(codes.Error, string(res.Status))
		}
	}
	span.End()
}

// endRun ends a run's span with its outcome.
func endRun(span trace.Span, rep *Report, err error) {
	if span.IsRecording() {
		if rep != nil {
			span.SetAttributes(attribute.Int("deltabus.windows_checked", len(rep.Results)),
				attribute.Int("deltabus.windows_skipped", len(rep.Skipped)), attribute.Int("deltabus.exit_code", rep.ExitCode()))
		}
		otelspan.Fail(span, err)
	}
	span.End()
}
