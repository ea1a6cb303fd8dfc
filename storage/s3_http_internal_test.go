package storage

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/deltabus/deltabus/keepalive"
)

// TestReplayTransportRefusesLargeBufferedBody: a large body without
// GetBody is refused rather than read into memory.
func TestReplayTransportRefusesLargeBufferedBody(t *testing.T) {
	rt := replayTransport{rc: retryablehttp.NewClient()}
	n := int64(maxBufferedBody + 1)
	req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:1/b/k", io.NopCloser(bytes.NewReader(make([]byte, n))))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "refusing to hold") {
		t.Fatalf("RoundTrip of a %d-byte body without GetBody: %v, want a refusal", n, err)
	}
}

// TestS3ConnectionsHaveKeepalives: the HTTP client the S3 store uses dials
// every connection with TCP keepalives and TCP_USER_TIMEOUT, and waits for
// response headers no longer than twice its stall limit.
func TestS3ConnectionsHaveKeepalives(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(2 * time.Second)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := newHTTPClient(S3Config{HTTPTimeout: 500 * time.Millisecond, HTTPRetries: -1}, cleanhttp.DefaultPooledTransport(), newRetryLog(slog.Default(), "test"))
	var conn net.Conn
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/k", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if conn == nil {
		t.Fatal("no connection traced")
	}
	got, err := keepalive.Inspect(conn)
	if err != nil {
		t.Fatal(err)
	}
	if got != keepalive.Default {
		t.Fatalf("S3 connection socket has %+v, want %+v", got, keepalive.Default)
	}
	tr := hardenTransport(cleanhttp.DefaultPooledTransport(), 500*time.Millisecond).(*http.Transport)
	began := time.Now()
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/slow", nil)
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("a response whose headers took 2s arrived through a 1s header timeout (twice the 500ms stall limit)")
	}
	if took := time.Since(began); took > 1500*time.Millisecond {
		t.Fatalf("the header timeout fired after %s, want 500ms", took)
	}
}
