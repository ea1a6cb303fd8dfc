package telemetry

import (
	"context"
	"strings"
	"testing"
)

func TestReadEnv(t *testing.T) {
	cases := []struct {
		env             map[string]string
		traces, metrics bool
		err             string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, traces: true, metrics: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, traces: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_METRICS_EXPORTER": "prometheus"}, traces: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, metrics: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, traces: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER=zipkin: not supported"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "only http/protobuf"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}, traces: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "10%"}, err: "want a ratio between 0 and 1"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "OTEL_TRACES_SAMPLER=jaeger_remote: not supported"},
	}
	for _, c := range cases {
		s, err := readEnv(func(k string) string { return c.env[k] })
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.env, err, c.err)
			}
			continue
		}
		if err != nil || s.traces != c.traces || s.metrics != c.metrics {
			t.Errorf("%v: traces %t metrics %t err %v; want %t %t", c.env, s.traces, s.metrics, err, c.traces, c.metrics)
		}
	}
}

// TestNewWithoutEnvironment: with no OTEL_* variable, nothing is exported
// and spans are no-ops.
func TestNewWithoutEnvironment(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		t.Setenv(k, "")
	}
	tel, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Tracing || tel.Pushing {
		t.Fatalf("tracing %t pushing %t without any OTEL_* variable", tel.Tracing, tel.Pushing)
	}
	_, span := tel.Tracer.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("a span records while tracing is off")
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBadResourceAttributes(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "no-equals-sign")
	if _, err := New(context.Background(), Options{}); err == nil || !strings.Contains(err.Error(), "OTEL_RESOURCE_ATTRIBUTES") {
		t.Fatalf("error %v, want one naming OTEL_RESOURCE_ATTRIBUTES", err)
	}
}
