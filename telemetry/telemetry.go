// Package telemetry builds DeltaBus's OpenTelemetry providers, in one place
// for every command (relay run, reconcile, check consumers, the demo).
//
// # Metrics
//
// Instruments are created through the OTel metric API (package
// go.opentelemetry.io/otel/metric) from Telemetry.Meter. They are always
// served on the /metrics endpoint (Telemetry.Gatherer) by the OTel
// Prometheus exporter, configured so the exposition is exactly what the
// relay served before it used OpenTelemetry: instrument names are the
// Prometheus names (no unit or _total suffix added), no otel_scope_*
// labels, no target_info family. The Go runtime and process collectors of
// prometheus/client_golang (go_*, process_*) are registered beside it
// (Options.Runtime), unchanged; with OTLP push on, they are pushed too
// (through the Prometheus bridge).
//
// Every instrument keeps at most CardinalityLimit attribute sets
// (DefaultCardinalityLimit, 1,000): per-topic series come from
// producer-chosen topic names, so a flood of topics cannot grow the
// process or the scrape without bound. Measurements for further attribute
// sets are aggregated into one overflow series labelled
// otel_metric_overflow="true" (without the topic label).
//
// With OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
// or OTEL_METRICS_EXPORTER=otlp) set, metrics are also pushed by OTLP/HTTP
// every OTEL_METRIC_EXPORT_INTERVAL (default 60 s). OTEL_METRICS_EXPORTER=none
// or =prometheus pushes nothing (/metrics is served anyway).
//
// # Traces
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp) is set:
// Telemetry.Tracer is then a no-op provider, whose spans cost nothing and
// record nothing, and the relay does not read event headers. When on,
// spans are exported by OTLP/HTTP through a batch span processor
// (OTEL_BSP_* variables), sampled by OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on; the relay's
// batches are root spans, so parentbased_traceidratio with 0.1 keeps one
// batch in ten).
//
// # Standard variables
//
// The exporters read OTEL_EXPORTER_OTLP_{,TRACES_,METRICS_}ENDPOINT,
// _HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE and
// _CLIENT_KEY themselves; the resource takes OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name defaults to Options.Service).
// OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf (the default): grpc is
// refused with one line saying so. OTEL_SDK_DISABLED=true turns tracing
// and OTLP push off; /metrics stays.
//
// Shutdown flushes both within its context's deadline.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/otlptranslator"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultCardinalityLimit is how many attribute sets (series) an instrument
// keeps unless Options.CardinalityLimit says otherwise.
const DefaultCardinalityLimit = 1000

// Options configure New.
type Options struct {
	// Service is the default service.name (OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it); empty means "deltabus".
	Service string
	// Version is service.version.
	Version string
	// Runtime registers the Go runtime and process collectors (go_*,
	// process_*) on /metrics.
	Runtime bool
	// CardinalityLimit bounds the attribute sets of each instrument; 0
	// means DefaultCardinalityLimit, negative means no limit.
	CardinalityLimit int
}

// Telemetry holds the providers New built.
type Telemetry struct {
	// Meter creates the instruments; never nil.
	Meter metric.MeterProvider
	// Tracer creates spans; a no-op provider when tracing is off.
	Tracer trace.TracerProvider
	// Gatherer is what /metrics serves.
	Gatherer prometheus.Gatherer
	// Tracing reports whether spans are exported.
	Tracing bool
	// Pushing reports whether metrics are pushed by OTLP.
	Pushing bool

	shutdown []func(context.Context) error
}

// New builds the providers from opts and the standard OTEL_* environment
// variables. A variable with a value it cannot honour is an error naming
// the variable and the accepted values.
func New(ctx context.Context, opts Options) (*Telemetry, error) {
	env, err := readEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, opts)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{Tracer: noop.NewTracerProvider()}
	otelReg, runtimeReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	if opts.Runtime {
		runtimeReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	prom, err := promexporter.New(promexporter.WithRegisterer(otelReg), promexporter.WithoutScopeInfo(),
		promexporter.WithoutTargetInfo(),
		promexporter.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.Gatherer = prometheus.Gatherers{otelReg, runtimeReg}
	limit := opts.CardinalityLimit
	if limit == 0 {
		limit = DefaultCardinalityLimit
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(prom), sdkmetric.WithCardinalityLimit(limit)}
	if env.metrics {
		reader, err := otlpMetricReader(ctx, runtimeReg)
		if err != nil {
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(reader))
		t.Pushing = true
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	t.Meter = mp
	t.shutdown = append(t.shutdown, mp.Shutdown)
	if env.traces {
		tp, err := newTracerProvider(ctx, res)
		if err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
		t.Tracer, t.Tracing = tp, true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	return t, nil
}

// Shutdown flushes and stops the providers (spans still queued, a last
// OTLP metric export) within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for i := len(t.shutdown) - 1; i >= 0; i-- {
		if err := t.shutdown[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	t.shutdown = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry shutdown: %w", err)
	}
	return nil
}

// settings is what the environment asks for.
type settings struct {
	traces, metrics bool
}

// readEnv decides which signals are exported, and refuses values that
// would silently export nothing.
func readEnv(getenv func(string) string) (settings, error) {
	var s settings
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return s, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(k)); v != "" && v != "http/protobuf" {
			return s, fmt.Errorf("%s=%s: only http/protobuf is supported; unset it or point the endpoint at the collector's OTLP/HTTP port (4318)", k, v)
		}
	}
	var err error
	endpoint := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	if s.traces, err = wanted(getenv, "OTEL_TRACES_EXPORTER", endpoint || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", "otlp, none"); err != nil {
		return s, err
	}
	if s.metrics, err = wanted(getenv, "OTEL_METRICS_EXPORTER", endpoint || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "", "otlp, prometheus (served on /metrics), none"); err != nil {
		return s, err
	}
	if s.traces {
		if err := checkSampler(getenv); err != nil {
			return s, err
		}
	}
	return s, nil
}

// wanted reads OTEL_<SIGNAL>_EXPORTER: unset means OTLP when an endpoint
// is configured.
func wanted(getenv func(string) string, key string, endpoint bool, accepted string) (bool, error) {
	v := strings.ToLower(strings.TrimSpace(getenv(key)))
	switch v {
	case "":
		return endpoint, nil
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "prometheus":
		if key == "OTEL_METRICS_EXPORTER" {
			return false, nil
		}
	}
	return false, fmt.Errorf("%s=%s: not supported; use one of: %s", key, v, accepted)
}
