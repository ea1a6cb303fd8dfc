package faultproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// ServeHTTP judges one request against the current fault and forwards it
// or applies the fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, hit, release := p.judge()
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if !hit {
		p.forward.ServeHTTP(w, r)
		return
	}
	if f.AfterForward && f.Mode != Hang {
		p.forwardAndDiscard(r)
	}
	switch f.Mode {
	case Error500:
		s3Error(w, http.StatusInternalServerError, "InternalError")
	case SlowDown503:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown")
	case Hang:
		select {
		case <-release:
		case <-r.Context().Done():
		}
		closeConn(w, false)
	case Reset, Refuse: // Refuse: a request on a connection about to be closed
		closeConn(w, true)
	}
}

// judge counts the request and decides whether the fault applies to it.
func (p *Proxy) judge() (f Fault, hit bool, release <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests++
	p.seen++
	f = p.fault
	hit = f.Mode != Pass && (f.Every <= 1 || p.seen%f.Every == 0)
	if hit && f.Limit > 0 && p.hits >= f.Limit {
		hit = false
	}
	if hit {
		p.hits++
		p.stats.Faulted++
	}
	return f, hit, p.release
}

// forwardAndDiscard sends r to the target and drops the answer, so the
// request takes effect but its client never learns it.
func (p *Proxy) forwardAndDiscard(r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host
	resp, err := p.client.RoundTrip(out)
	if err != nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// s3Error answers like an S3 server in trouble.
func s3Error(w http.ResponseWriter, status int, code string) {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>injected by faultproxy</Message></Error>`, code)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// closeConn drops the request's connection without an answer: with a TCP
// reset (RST) when reset, else with an orderly close (FIN).
func closeConn(w http.ResponseWriter, reset bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	c, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := c.(*net.TCPConn); ok && reset {
		tc.SetLinger(0)
	}
	c.Close()
}
