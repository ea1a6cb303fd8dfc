package faultproxy

import (
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mode is what the proxy does to a request a Fault selects.
type Mode int

const (
	// Pass forwards the request to the target.
	Pass Mode = iota
	// Error500 answers 500 InternalError.
	Error500
	// SlowDown503 answers 503 SlowDown (S3's throttling answer).
	SlowDown503
	// Hang takes the request and never answers, without reading its body,
	// until the next Set or Close; then the connection is closed. The
	// request is never forwarded.
	Hang
	// Reset closes the connection with a TCP reset, without answering.
	Reset
	// Refuse closes the listening socket, so new connections are refused,
	// and closes every open connection. Every, Limit and AfterForward do
	// not apply; the next Set listens again on the same port.
	Refuse
)

var modeNames = [...]string{"pass", "500", "503", "hang", "reset", "refuse"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return modeNames[m]
}

// Fault says which requests get which treatment. The zero Fault passes
// everything.
type Fault struct {
	Mode Mode
	// Every makes only every Every-th request since Set get Mode (the
	// Every-th, 2×Every-th, ...); the others pass. 0 or 1 = every request.
	Every int
	// Limit makes only the first Limit selected requests get Mode; later
	// ones pass. 0 = no limit.
	Limit int
	// AfterForward forwards a selected request to the target and discards
	// the answer before applying Mode (Error500, SlowDown503, Reset): the
	// request took effect, the client sees a failure.
	AfterForward bool
	// Latency delays every request, selected or not, before it is handled.
	Latency time.Duration
}

// Stats counts requests since the proxy started.
type Stats struct {
	Requests int // requests received (not counting refused connections)
	Faulted  int // requests that got a Mode other than Pass
}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	target  *url.URL
	addr    string // fixed at start: Refuse and back reuse it
	srv     *http.Server
	forward *httputil.ReverseProxy
	client  *http.Transport

	mu      sync.Mutex
	fault   Fault
	seen    int           // requests since the last Set
	hits    int           // selected requests since the last Set
	release chan struct{} // closed by the next Set: hung requests end
	ln      net.Listener  // nil while refusing
	conns   map[net.Conn]struct{}
	stats   Stats
	closed  bool
}

// New starts a proxy to target for the test and closes it when the test
// ends. It fails the test if the proxy cannot start.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Start starts a proxy on a free port of 127.0.0.1 forwarding to target,
// given as host:port or as an http:// URL (its path is ignored).
func Start(target string) (*Proxy, error) {
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("target %q: want host:port or http://host:port", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &Proxy{target: u, addr: ln.Addr().String(), release: make(chan struct{}),
		conns: make(map[net.Conn]struct{}), client: &http.Transport{}}
	quiet := log.New(discard{}, "", 0)
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = u.Scheme, u.Host
			r.Out.Host = r.In.Host // signed by the client: keep it
		},
		Transport: p.client,
		ErrorLog:  quiet,
	}
	p.srv = &http.Server{Handler: p, ConnState: p.track, ErrorLog: quiet}
	p.serve(ln)
	return p, nil
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL returns http://host:port of the proxy.
func (p *Proxy) URL() string { return "http://" + p.addr }

// Set replaces the current fault. Hung requests are released (their
// connections closed) and the request count behind Every and Limit starts
// again. Leaving Refuse listens again on the same port; the error says
// when that failed.
func (p *Proxy) Set(f Fault) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("faultproxy: closed")
	}
	p.fault, p.seen, p.hits = f, 0, 0
	close(p.release)
	p.release = make(chan struct{})
	if f.Mode == Refuse {
		p.refuseLocked()
		return nil
	}
	if p.ln == nil {
		return p.relistenLocked()
	}
	return nil
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops the proxy, releasing hung requests and closing every
// connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.release)
	p.mu.Unlock()
	err := p.srv.Close()
	p.client.CloseIdleConnections()
	return err
}

func (p *Proxy) serve(ln net.Listener) {
	p.ln = ln
	go p.srv.Serve(ln)
}

// refuseLocked stops listening and closes every open connection.
func (p *Proxy) refuseLocked() {
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// relistenLocked listens on the proxy's port again, retrying briefly in
// case the port lingers.
func (p *Proxy) relistenLocked() error {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("faultproxy: listen again on %s: %w", p.addr, err)
}

// track keeps the set of open connections for Refuse.
func (p *Proxy) track(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		if p.ln == nil || p.closed {
			c.Close() // accepted just before the listener closed
			return
		}
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}
