package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deltabus/deltabus/daemon"
	"github.com/deltabus/deltabus/pii"
	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/subscribe/members"
	"github.com/deltabus/deltabus/subscribe/serve"
)

func cmdServe(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "serve", "--addr HOST:PORT --store URL [--token-file F] [--tls-cert F --tls-key F] [--kek URL]")
	addr := fs.String("addr", envOr(env, "DELTABUS_SERVE_ADDR", "127.0.0.1:8089"), "listen here (env DELTABUS_SERVE_ADDR); without --token-file only a loopback address")
	storeURL := fs.String("store", env.getenv("DELTABUS_STORE"), "store URL: file:///path or s3://bucket/prefix (env DELTABUS_STORE)")
	tokenFile := fs.String("token-file", env.getenv("DELTABUS_SERVE_TOKEN_FILE"), "bearer tokens, one per line: TOKEN [name=N] [groups=a,b*] [topics=t,u*] [reveal] (env DELTABUS_SERVE_TOKEN_FILE; docs/consumers.md)")
	tlsCert := fs.String("tls-cert", env.getenv("DELTABUS_SERVE_TLS_CERT"), "serve HTTPS with this certificate (PEM; env DELTABUS_SERVE_TLS_CERT)")
	tlsKey := fs.String("tls-key", env.getenv("DELTABUS_SERVE_TLS_KEY"), "and this private key (PEM; env DELTABUS_SERVE_TLS_KEY)")
	var o members.Options
	fs.DurationVar(&o.PollInterval, "poll-interval", 0, "wait between looks at a topic's log once a group read everything (default 100ms on local disk, 1s on S3: each look is a LIST)")
	fs.IntVar(&o.MaxBuffered, "max-buffered", members.DefaultMaxBuffered, "events a group holds from its position on (bounds memory, and how far other keys run ahead of a stalled one)")
	maxMB := fs.Int64("max-buffered-mb", members.DefaultMaxBufferedMB, "the same bound in MiB of events (about)")
	fs.IntVar(&o.Dedup, "dedup", members.DefaultDedup, "event ids each group remembers to drop duplicates by (negative: off)")
	logFormat := fs.String("log-format", envOr(env, "DELTABUS_LOG_FORMAT", "text"), "log format (stderr): text or json")
	logLevel := fs.String("log-level", envOr(env, "DELTABUS_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	var pf piiFlags
	pf.register(fs, env)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	log, err := newLogger(env.stderr, *logFormat, *logLevel)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	o.Logger, o.MaxBufferedBytes = log, *maxMB<<20
	cfg := serve.Config{Logger: log}
	if *tokenFile != "" {
		if cfg.Tokens, err = serve.LoadTokens(*tokenFile); err != nil {
			return fail(env, exitUsage, err)
		}
	} else if err := loopbackOnly(*addr); err != nil {
		return fail(env, exitUsage, err)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return fail(env, exitUsage, errors.New("give --tls-cert and --tls-key together"))
	}
	var tlsCfg *tls.Config
	if *tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			return fail(env, exitUsage, fmt.Errorf("--tls-cert/--tls-key: %w", err))
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	store, err := daemon.OpenStore(ctx, *storeURL, storage.S3Options{Logger: log})
	if err != nil {
		return fail(env, exitUsage, err)
	}
	if pf.kek != "" { // personal fields decrypted for tokens granted reveal
		pf.source = env.getenv("DELTABUS_SOURCE")
		r, err := pii.OpenRevealer(ctx, pf.configFor(store))
		if err != nil {
			return fail(env, exitUsage, err)
		}
		defer r.Keys().Close()
		o.Reveal, cfg.Reveal = r, true
	}
	tel, flush, err := startTelemetry(ctx, "deltabus-serve", true, 10*time.Second, log)
	if err != nil {
		return fail(env, exitUsage, err)
	}
	defer flush()
	o.Upcasts = members.NewStoreUpcasts(store) // for members declaring want_version
	gs := members.New(store, o)
	defer gs.Close()
	if err := serve.RegisterMetrics(tel.Meter, gs); err != nil {
		return fail(env, exitFailure, err)
	}
	cfg.Groups, cfg.Store, cfg.Metrics = gs, store, promhttp.HandlerFor(tel.Gatherer, promhttp.HandlerOpts{})
	return runServer(ctx, env, *addr, tlsCfg, serve.New(cfg), log, cfg.Tokens != nil)
}

// runServer listens on addr and serves h until ctx ends (SIGTERM), then
// stops within 10 s: long polls in flight are cut.
func runServer(ctx context.Context, env *cliEnv, addr string, tlsCfg *tls.Config, h http.Handler, log *slog.Logger, tokens bool) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fail(env, exitUsage, fmt.Errorf("--addr %s: %w", addr, err))
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: members.MaxWait + 30*time.Second, IdleTimeout: 2 * time.Minute, TLSConfig: tlsCfg}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsCfg)
	} else if tokens && !isLoopback(ln.Addr()) {
		log.Warn("serve: bearer tokens travel in clear text: give --tls-cert and --tls-key, or keep the address private")
	}
	log.Info("serve: listening", "url", scheme+"://"+ln.Addr().String(), "tokens", tokens)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fail(env, exitFailure, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return exitOK
}

// loopbackOnly refuses an address reachable from other machines: without
// tokens anyone who reaches the port reads every group.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q is not HOST:PORT: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address and no --token-file is given: anyone reaching it would read every group; listen on 127.0.0.1, or give --token-file (and --tls-cert/--tls-key)", addr)
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
