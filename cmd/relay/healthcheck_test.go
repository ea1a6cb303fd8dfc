package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runHealthcheck runs `relay healthcheck args...` with DELTABUS_METRICS_ADDR
// set to envAddr and returns the exit code and what it printed.
func runHealthcheck(t *testing.T, envAddr string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errOut, getenv: func(k string) string {
		if k == "DELTABUS_METRICS_ADDR" {
			return envAddr
		}
		return ""
	}}
	code = runCLI(context.Background(), env, append([]string{"healthcheck"}, args...))
	return code, out.String(), errOut.String()
}

func oneLineOf(t *testing.T, s string) string {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Fatalf("want exactly one line, got %q", s)
	}
	return s
}

// TestHealthcheckAnswers runs the healthcheck against a real HTTP server
// answering /readyz as `relay run` does, in each state.
func TestHealthcheckAnswers(t *testing.T) {
	var ready atomic.Bool
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready.Load() {
			http.Error(w, "not streaming yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "streaming")
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	code, out, errOut := runHealthcheck(t, "", "--addr", addr)
	if code != 1 || out != "" || !strings.Contains(oneLineOf(t, errOut), "503 Service Unavailable: not streaming yet") {
		t.Fatalf("not streaming: exit %d, stdout %q, stderr %q; want 1 and the 503 in one line", code, out, errOut)
	}
	ready.Store(true)
	code, out, errOut = runHealthcheck(t, "", "--addr", addr)
	if code != 0 || errOut != "" || oneLineOf(t, out) != "relay healthcheck: ready (streaming)\n" {
		t.Fatalf("streaming: exit %d, stdout %q, stderr %q; want 0 and one line", code, out, errOut)
	}
	// Without --addr it asks DELTABUS_METRICS_ADDR, a wildcard listen address
	// reached on loopback (httptest listens on 127.0.0.1).
	_, port, _ := net.SplitHostPort(addr)
	for _, listen := range []string{"0.0.0.0:" + port, ":" + port, "127.0.0.1:" + port} {
		if code, out, errOut := runHealthcheck(t, listen); code != 0 {
			t.Fatalf("DELTABUS_METRICS_ADDR=%s: exit %d, stdout %q, stderr %q; want 0", listen, code, out, errOut)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range paths {
		if p != "GET /readyz" {
			t.Fatalf("healthcheck sent %q; want only GET /readyz", p)
		}
	}
}

// TestHealthcheckFailsFast covers a relay that does not answer: nothing
// listening, and a server that accepts but never replies (the timeout).
func TestHealthcheckFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	code, out, errOut := runHealthcheck(t, closedAddr)
	if code != 1 || out != "" || !strings.Contains(oneLineOf(t, errOut), "connection refused") {
		t.Fatalf("nothing listening: exit %d, stdout %q, stderr %q; want 1 naming the refusal", code, out, errOut)
	}

	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	start := time.Now()
	code, out, errOut = runHealthcheck(t, "", "--addr", srv.Listener.Addr().String(), "--timeout", "200ms")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("healthcheck took %v with --timeout 200ms", took)
	}
	if code != 1 || out != "" || !strings.Contains(oneLineOf(t, errOut), "no answer within 200ms") {
		t.Fatalf("hanging server: exit %d, stdout %q, stderr %q; want 1 naming the timeout", code, out, errOut)
	}
}

// TestHealthcheckBadInput: one clear line and exit 1 (never 2, which Docker
// reserves), also for an answer that is not a short line of text.
func TestHealthcheckBadInput(t *testing.T) {
	for _, args := range [][]string{{"--addr", "9464"}, {"--addr", "localhost:"}, {"--timeout", "0s", "--addr", "127.0.0.1:1"}, {"--nope"}, {"extra"}} {
		code, out, errOut := runHealthcheck(t, "127.0.0.1:1", args...)
		if code != 1 || out != "" || errOut == "" {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want 1 and a message", args, code, out, errOut)
		}
	}
	huge := strings.Repeat("x\x1b[2J", 100000) + "\nsecond line"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, huge, http.StatusInternalServerError)
	}))
	defer srv.Close()
	code, _, errOut := runHealthcheck(t, srv.Listener.Addr().String())
	line := oneLineOf(t, errOut)
	if code != 1 || len(line) > 1024 || strings.ContainsAny(line, "\x1b") || strings.Contains(line, "second line") {
		t.Fatalf("hostile answer: exit %d, %d bytes %q; want 1 and one short printable line", code, len(line), line)
	}
}
