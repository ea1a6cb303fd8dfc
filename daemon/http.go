package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness reports whether the process is ready, and why not.
type Readiness func() (bool, string)

// HTTPOptions configure Serve.
type HTTPOptions struct {
	Addr     string
	Gatherer prometheus.Gatherer // /metrics; nil serves no metrics
	Ready    Readiness           // /readyz; nil is always ready
	Pprof    bool                // serve /debug/pprof/ (off by default: it exposes internals)
	Log      *slog.Logger
	// Page, if set, serves every other path: the operator's page at "/"
	// and /api/status (package statuspage).
	Page http.Handler
	// Token, when set, guards the page, /api/status and /debug/pprof/
	// (and /metrics with MetricsToken): see requireToken. /healthz and
	// /readyz stay open.
	Token        string
	MetricsToken bool
}

// Serve serves /healthz (the process answers), /readyz (Ready), /metrics,
// the operator's page (Page) and, when asked, /debug/pprof/ on addr, the
// page and pprof behind Token when one is set. It returns the bound
// address and a function that stops the server.
func Serve(o HTTPOptions) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-addr %s: %w (use another address, or empty to disable)", o.Addr, err)
	}
	if o.MetricsToken && o.Token == "" {
		return "", nil, fmt.Errorf("the metrics token switch needs a status token")
	}
	guard := func(h http.Handler) http.Handler {
		if o.Token == "" {
			return h
		}
		return requireToken(o.Token, h)
	}
	mux := http.NewServeMux()
	if o.Gatherer != nil {
		var h http.Handler = promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})
		if o.MetricsToken {
			h = guard(h)
		}
		mux.Handle("/metrics", h)
	}
	if o.Pprof {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	}
	if o.Page != nil {
		mux.Handle("/", guard(o.Page))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := true, "ready"
		if o.Ready != nil {
			ok, why = o.Ready()
		}
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	if w := openWarning(ln.Addr().String(), o); w != "" {
		log.Warn(w)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
