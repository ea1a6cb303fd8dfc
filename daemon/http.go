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
}

// Serve serves /healthz (the process answers), /readyz (Ready), /metrics,
// the operator's page (Page) and, when asked, /debug/pprof/ on addr. It returns the bound address and
// a function that stops the server.
func Serve(o HTTPOptions) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return "", nil, fmt.Errorf("--metrics-addr %s: %w (use another address, or empty to disable)", o.Addr, err)
	}
	mux := http.NewServeMux()
	if o.Gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	}
	if o.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if o.Page != nil {
		mux.Handle("/", o.Page)
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
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}
