package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deltabus/deltabus/bootstrap"
	"github.com/deltabus/deltabus/outbox"
	"github.com/deltabus/deltabus/relay"
	"github.com/deltabus/deltabus/storage"
)

// sourceFlags are the flags every command that talks to PostgreSQL and the
// store shares; each defaults from its environment variable.
type sourceFlags struct {
	source, store, slot, publication, mapping string
	logFormat, logLevel                       string
}

func (f *sourceFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&f.source, "source", env.getenv("DELTABUS_SOURCE"), "PostgreSQL DSN (env DELTABUS_SOURCE)")
	fs.StringVar(&f.store, "store", env.getenv("DELTABUS_STORE"), "store URL: file:///path or s3://bucket/prefix (env DELTABUS_STORE)")
	fs.StringVar(&f.slot, "slot", envOr(env, "DELTABUS_SLOT", "deltabus"), "replication slot (env DELTABUS_SLOT)")
	fs.StringVar(&f.publication, "publication", envOr(env, "DELTABUS_PUBLICATION", "deltabus"), "publication (env DELTABUS_PUBLICATION)")
	fs.StringVar(&f.mapping, "mapping", envOr(env, "DELTABUS_MAPPING", "deltabus"),
		"outbox column mapping: a preset (deltabus, debezium) or field=column pairs, e.g. topic=aggregatetype,key=aggregateid")
	fs.StringVar(&f.logFormat, "log-format", envOr(env, "DELTABUS_LOG_FORMAT", "text"), "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", envOr(env, "DELTABUS_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
}

func envOr(env *cliEnv, key, def string) string {
	if v := env.getenv(key); v != "" {
		return v
	}
	return def
}

func openStore(ctx context.Context, raw string) (storage.Store, error) {
	if err := relay.ValidateStoreURL(raw); err != nil {
		return nil, err
	}
	st, err := storage.Open(ctx, raw, storage.S3Options{})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", raw, err)
	}
	return st, nil
}

func cmdRun(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "run", "[flags]")
	var sf sourceFlags
	sf.register(fs, env)
	d := relay.DefaultConfig()
	cfg := relay.Config{}
	fs.IntVar(&cfg.BatchMaxEvents, "batch-max-events", d.BatchMaxEvents, "close a batch after this many events")
	fs.Int64Var(&cfg.BatchMaxBytes, "batch-max-bytes", d.BatchMaxBytes, "close a batch after this many payload bytes")
	fs.DurationVar(&cfg.BatchMaxDelay, "batch-max-delay", d.BatchMaxDelay, "close a batch when its oldest event is this old")
	fs.BoolVar(&cfg.Standby, "standby", false, "wait for the slot to be free instead of failing (hot standby)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", envOr(env, "DELTABUS_METRICS_ADDR", "127.0.0.1:9464"), "serve /metrics, /healthz and /readyz here (empty disables)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg.Source, cfg.Store, cfg.Slot, cfg.Publication = sf.source, sf.store, sf.slot, sf.publication
	log, err := newLogger(env.stderr, sf.logFormat, sf.logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return fail(env, exitUsage, err)
	}
	mappings, err := outbox.ParseMappings(sf.mapping, nil)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("--mapping: %w", err))
	}
	store, err := openStore(ctx, cfg.Store)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r := relay.New(cfg, store, mappings, log, relay.NewMetrics(reg))
	r.Bootstrap = bootstrap.FirstStartWith(bootstrap.Options{Log: log, Mappings: mappings, Metrics: reg})
	if cfg.MetricsAddr != "" {
		stopHTTP, err := serveMetrics(cfg.MetricsAddr, reg, r.Ready(), log)
		if err != nil {
			return fail(env, exitUsage, err)
		}
		defer stopHTTP()
	}
	if err := r.Run(ctx); err != nil {
		return fail(env, exitFailure, err)
	}
	return exitOK
}

// serveMetrics serves Prometheus metrics and health endpoints.
func serveMetrics(addr string, reg *prometheus.Registry, ready <-chan struct{}, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w (use another address, or empty to disable)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-ready:
			fmt.Fprintln(w, "streaming")
		default:
			http.Error(w, "not streaming yet", http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("metrics", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
