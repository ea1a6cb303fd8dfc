package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/deltabus/deltabus/telemetry"
)

// startTelemetry builds the command's providers (package telemetry) from
// the OTEL_* environment, logging the SDK's export errors, and returns a
// flush for the end of the command: it ends within what remains of grace
// after ctx ended (the SIGTERM), at most 10 s (an unreachable collector
// must not hold the exit), at least 2 s.
func startTelemetry(ctx context.Context, service string, runtime bool, grace time.Duration, log *slog.Logger) (*telemetry.Telemetry, func(), error) {
	tel, err := telemetry.New(ctx, telemetry.Options{Service: service, Version: Version, Runtime: runtime})
	if err != nil {
		return nil, nil, err
	}
	telemetry.LogErrors(log)
	if tel.Tracing || tel.Pushing {
		log.Info("telemetry: OTLP export", "traces", tel.Tracing, "metrics", tel.Pushing)
	}
	var stoppedAt atomic.Int64
	stopWatch := context.AfterFunc(ctx, func() { stoppedAt.Store(time.Now().UnixNano()) })
	flush := func() {
		stopWatch()
		deadline := time.Now().Add(grace)
		if at := stoppedAt.Load(); at != 0 {
			deadline = time.Unix(0, at).Add(grace)
		}
		left := min(max(time.Until(deadline), 2*time.Second), 10*time.Second)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), left)
		defer cancel()
		if err := tel.Shutdown(fctx); err != nil {
			log.Warn("telemetry: flush at exit failed", "err", err)
		}
	}
	return tel, flush, nil
}
