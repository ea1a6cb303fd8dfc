package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// backend is a real HTTP server the proxy forwards to: it echoes the
// method, Host header and body, and counts requests.
type backend struct {
	*httptest.Server
	hits atomic.Int64
}

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Host, body)
	}))
	t.Cleanup(b.Close)
	return b
}

func setup(t *testing.T) (*backend, *Proxy, *http.Client) {
	b := newBackend(t)
	p := New(t, b.Listener.Addr().String())
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	return b, p, c
}

func set(t *testing.T, p *Proxy, f Fault) {
	t.Helper()
	if err := p.Set(f); err != nil {
		t.Fatal(err)
	}
}

// do sends PUT body and returns "STATUS BODY" or "ERR".
func do(c *http.Client, p *Proxy, body string) string {
	req, _ := http.NewRequest(http.MethodPut, p.URL()+"/bucket/key", strings.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return "ERR"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

func TestPassKeepsHostAndBody(t *testing.T) {
	b, p, c := setup(t)
	want := "200 PUT " + p.Addr() + " hello"
	if got := do(c, p, "hello"); got != want {
		t.Fatalf("through the proxy: %q, want %q", got, want)
	}
	if b.hits.Load() != 1 || p.Stats() != (Stats{Requests: 1}) {
		t.Fatalf("backend hits %d, stats %+v", b.hits.Load(), p.Stats())
	}
}

func TestErrorAnswers(t *testing.T) {
	b, p, c := setup(t)
	for _, tc := range []struct {
		mode Mode
		want string
	}{{Error500, "500 "}, {SlowDown503, "503 "}} {
		set(t, p, Fault{Mode: tc.mode})
		got := do(c, p, "x")
		if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, "<Code>") {
			t.Fatalf("mode %v: %q, want status %q with an S3 error body", tc.mode, got, tc.want)
		}
	}
	if strings.Contains(do(c, p, "x"), "<Code>SlowDown</Code>") == false {
		t.Fatal("503 answer lacks the SlowDown code")
	}
	if b.hits.Load() != 0 {
		t.Fatalf("backend reached %d times by answered requests", b.hits.Load())
	}
}

func TestEveryAndLimit(t *testing.T) {
	_, p, c := setup(t)
	status := func(n int) string {
		var out []string
		for range n {
			out = append(out, do(c, p, "")[:3])
		}
		return strings.Join(out, ",")
	}
	set(t, p, Fault{Mode: SlowDown503, Every: 2})
	if got := status(5); got != "200,503,200,503,200" {
		t.Fatalf("Every 2: %s", got)
	}
	set(t, p, Fault{Mode: Error500, Limit: 2})
	if got := status(4); got != "500,500,200,200" {
		t.Fatalf("Limit 2: %s", got)
	}
	set(t, p, Fault{Mode: Error500, Every: 3, Limit: 1})
	if got := status(7); got != "200,200,500,200,200,200,200" {
		t.Fatalf("Every 3 Limit 1: %s", got)
	}
	if s := p.Stats(); s.Requests != 16 || s.Faulted != 5 {
		t.Fatalf("stats %+v, want 16 requests, 5 faulted", s)
	}
}

func TestAfterForward(t *testing.T) {
	b, p, c := setup(t)
	set(t, p, Fault{Mode: Error500, AfterForward: true})
	if got := do(c, p, "x"); !strings.HasPrefix(got, "500 ") {
		t.Fatalf("got %q, want 500", got)
	}
	set(t, p, Fault{Mode: Reset, AfterForward: true})
	if got := do(c, p, "y"); got != "ERR" {
		t.Fatalf("got %q, want a connection error", got)
	}
	if b.hits.Load() != 2 {
		t.Fatalf("backend hits %d, want 2 (both requests took effect)", b.hits.Load())
	}
}

func TestHangUntilSwitchedBack(t *testing.T) {
	b, p, c := setup(t)
	set(t, p, Fault{Mode: Hang})
	short := &http.Client{Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := short.Get(p.URL() + "/x")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("hung request: %v, want a client timeout", err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatal("hung request ended before the client's timeout")
	}
	// A request hung without a client timeout ends when the mode changes.
	done := make(chan string)
	go func() { done <- do(c, p, "held") }()
	waitFor(t, func() bool { return p.Stats().Requests == 2 })
	set(t, p, Fault{})
	select {
	case got := <-done:
		if got != "ERR" {
			t.Fatalf("released request: %q, want a connection error", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hung request not released by Set")
	}
	if got := do(c, p, "after"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("after switching back: %q", got)
	}
	if b.hits.Load() != 1 {
		t.Fatalf("backend hits %d, want 1 (hung requests are never forwarded)", b.hits.Load())
	}
}

func TestReset(t *testing.T) {
	_, p, c := setup(t)
	set(t, p, Fault{Mode: Reset})
	_, err := c.Get(p.URL() + "/x")
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reset request: %v, want ECONNRESET", err)
	}
}

func TestRefuseAndBack(t *testing.T) {
	_, p, c := setup(t)
	idle, err := net.Dial("tcp", p.Addr()) // an open connection is dropped
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.conns) == 1 })
	set(t, p, Fault{Mode: Refuse})
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while refusing: %v, want ECONNREFUSED", err)
	}
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("open connection while refusing: read %v, want EOF", err)
	}
	set(t, p, Fault{})
	if got := do(c, p, "back"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("after refusing: %q", got)
	}
}

func TestLatency(t *testing.T) {
	_, p, c := setup(t)
	set(t, p, Fault{Latency: 200 * time.Millisecond})
	start := time.Now()
	if got := do(c, p, "slow"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("slow request: %q", got)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("request took %v, want at least the 200ms latency", d)
	}
}

// TestConcurrentSet switches modes while requests flow (run with -race):
// every request ends, with an answer or an error, and Close returns.
func TestConcurrentSet(t *testing.T) {
	_, p, _ := setup(t)
	c := &http.Client{Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				do(c, p, "x")
			}
		})
	}
	modes := []Mode{Pass, Error500, Hang, Reset, Refuse, SlowDown503}
	for i := 0; ctx.Err() == nil; i++ {
		if err := p.Set(Fault{Mode: modes[i%len(modes)], Every: i % 3}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Stats().Requests == 0 {
		t.Fatal("no request reached the proxy")
	}
}

func TestStartBadTarget(t *testing.T) {
	for _, target := range []string{"https://127.0.0.1:1", "://x", "http://"} {
		if p, err := Start(target); err == nil {
			p.Close()
			t.Errorf("Start(%q) succeeded", target)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
