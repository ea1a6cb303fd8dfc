package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	prombridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newResource describes the process: service.name (Options.Service unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one), service.version,
// the SDK.
func newResource(ctx context.Context, opts Options) (*resource.Resource, error) {
	service := opts.Service
	if service == "" {
		service = "deltabus"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if opts.Version != "" {
		attrs = append(attrs, attribute.String("service.version", opts.Version))
	}
	// Later detectors win: the environment overrides the defaults.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w (want key1=value1,key2=value2, values percent-encoded)", err)
	}
	return res, nil
}

// otlpMetricReader pushes every instrument, and the runtime collectors of
// runtime, by OTLP/HTTP.
func otlpMetricReader(ctx context.Context, runtime prometheus.Gatherer) (sdkmetric.Reader, error) {
	exp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	return sdkmetric.NewPeriodicReader(exp, sdkmetric.WithProducer(prombridge.NewMetricProducer(prombridge.WithGatherer(runtime)))), nil
}

// newTracerProvider exports spans by OTLP/HTTP through a batch span
// processor; the sampler comes from OTEL_TRACES_SAMPLER (checked by
// checkSampler).
func newTracerProvider(ctx context.Context, res *resource.Resource) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// checkSampler refuses a sampler the SDK would replace by its default
// without a word.
func checkSampler(getenv func(string) string) error {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	switch name {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		if arg == "" {
			return nil // ratio 1
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%s: want a ratio between 0 and 1, e.g. 0.1", arg)
		}
		return nil
	}
	return fmt.Errorf("OTEL_TRACES_SAMPLER=%s: not supported; use always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// LogErrors sends the SDK's errors (failed exports, dropped spans) to log,
// at most one line a minute with the count of those not logged. It sets
// the process-wide OTel error handler: call it once, from main.
func LogErrors(log *slog.Logger) {
	h := &errorLog{log: log}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(h.handle))
}

type errorLog struct {
	log     *slog.Logger
	mu      sync.Mutex
	last    time.Time
	skipped int
}

func (h *errorLog) handle(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.last) < time.Minute {
		h.skipped++
		return
	}
	h.log.Warn("telemetry: export failed (relaying goes on)", "err", err, "not_logged_since_last", h.skipped)
	h.last, h.skipped = time.Now(), 0
}
