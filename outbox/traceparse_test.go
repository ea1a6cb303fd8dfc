package outbox_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/deltabus/deltabus/outbox"
)

func BenchmarkProducerSpan(b *testing.B) {
	h := `{"tenant": "t3", "traceparent": "00-c4ca4238a0b923820dcc509a6f75849b-6512bd43d9caa6e0-01"}`
	b.ReportAllocs()
	for b.Loop() {
		if !outbox.ProducerSpan(h).IsValid() {
			b.Fatal("invalid")
		}
	}
}

// TestProducerSpanAgreesWithPropagator: the allocation-free reader the
// relay uses finds the same producer span as the W3C propagator
// (TraceContext) on well-formed, tricky and hostile headers.
func TestProducerSpanAgreesWithPropagator(t *testing.T) {
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cases := []struct {
		headers string
		valid   bool
	}{
		{`{"traceparent": "` + tp + `"}`, true},
		{` {"a":1,"traceparent":"` + tp + `","tracestate":"vendor=abc,other=x"}`, true},
		{`{"x": {"traceparent": "` + tp + `"}}`, false},
		{`{"x": ["traceparent", "` + tp + `"]}`, false},
		{`{"x": "traceparent", "y": "` + tp + `"}`, false},
		{`{"x": "a \"traceparent\": ", "traceparent": "` + tp + `"}`, true},
		{`{"traceparent": "` + strings.ToUpper(tp) + `"}`, false},
		{`{"traceparent": "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`, false},
		{`{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}`, false},
		{`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}`, false},
		{`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"}`, false},
		{`{"traceparent": "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra"}`, true},
		{`{"traceparent": 42}`, false},
		{`["traceparent", "` + tp + `"]`, false},
		{`{"traceparent": "` + tp, false},
		{`{"traceparent"`, false},
		{``, false},
	}
	for _, c := range cases {
		fast := outbox.ProducerSpan(c.headers)
		slow := trace.SpanContextFromContext(outbox.TraceContext(context.Background(), c.headers))
		if fast.IsValid() != c.valid || !fast.Equal(slow) {
			t.Errorf("%s: ProducerSpan %v (valid %t), propagator %v; want valid %t", c.headers, fast, fast.IsValid(), slow, c.valid)
		}
	}
}
