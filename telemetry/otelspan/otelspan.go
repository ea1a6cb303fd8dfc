// Package otelspan ends OpenTelemetry spans with their outcome, in one way
// for every package that traces. It depends on the OTel API only, not on
// the SDK or exporters that package telemetry configures.
package otelspan

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Fail marks span failed with err (nothing when err is nil).
func Fail(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// End ends span with attrs, marked failed when err is not nil.
// Attributes are set only on a recording span.
func End(span trace.Span, err error, attrs ...attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		Fail(span, err)
	}
	span.End()
}
