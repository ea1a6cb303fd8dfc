package storage_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deltabus/deltabus/storage"
	"github.com/deltabus/deltabus/tests/s3test"
)

// faultTransport sits under the retrying HTTP client: it records every
// request as "METHOD STATUS" ("PUT?" for conditional puts, CREATE, PART,
// COMPLETE and ABORT for multipart requests, "ERR" for transport errors)
// and lets a test take over conditional PUT number n, or any request.
type faultTransport struct {
	// fault handles conditional PUTs; it returns (nil, nil) to pass through.
	fault func(req *http.Request, n int, next http.RoundTripper) (*http.Response, error)
	// faultAny handles every request, labelled as in the log, with its
	// 1-based number among requests of that label.
	faultAny func(req *http.Request, label string, n int, next http.RoundTripper) (*http.Response, error)

	mu     sync.Mutex
	counts map[string]int
	log    []string
}

// label names a request for the log.
func label(req *http.Request) string {
	q := req.URL.Query()
	switch {
	case req.Method == http.MethodPut && req.Header.Get("If-None-Match") == "*":
		return "PUT?"
	case req.Method == http.MethodPost && q.Has("uploads"):
		return "CREATE"
	case req.Method == http.MethodPut && q.Has("partNumber"):
		return "PART"
	case req.Method == http.MethodPost && q.Has("uploadId"):
		return "COMPLETE"
	case req.Method == http.MethodDelete && q.Has("uploadId"):
		return "ABORT"
	}
	return req.Method
}

func (f *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := http.DefaultTransport
	method := label(req)
	var resp *http.Response
	var err error
	f.mu.Lock()
	if f.counts == nil {
		f.counts = make(map[string]int)
	}
	f.counts[method]++
	n := f.counts[method]
	f.mu.Unlock()
	if f.faultAny != nil {
		resp, err = f.faultAny(req, method, n, next)
	}
	if method == "PUT?" && resp == nil && err == nil && f.fault != nil {
		resp, err = f.fault(req, n, next)
	}
	if resp == nil && err == nil {
		resp, err = next.RoundTrip(req)
	}
	entry := method + " ERR"
	if err == nil {
		entry = fmt.Sprintf("%s %d", method, resp.StatusCode)
	}
	f.mu.Lock()
	f.log = append(f.log, entry)
	f.mu.Unlock()
	return resp, err
}

func (f *faultTransport) want(t *testing.T, want ...string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.log, want) {
		t.Fatalf("HTTP exchanges = %q, want %q", f.log, want)
	}
}

// s3Error is a synthetic S3 error response.
func s3Error(req *http.Request, status int, code string) *http.Response {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+
		`<Error><Code>%s</Code><Message>injected by test</Message></Error>`, code)
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}
}

// landThen forwards the request (so the write lands), discards the real
// answer and returns fail's instead.
func landThen(fail func(req *http.Request) (*http.Response, error)) func(*http.Request, int, http.RoundTripper) (*http.Response, error) {
	return func(req *http.Request, n int, next http.RoundTripper) (*http.Response, error) {
		if n != 1 {
			return nil, nil
		}
		resp, err := next.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return fail(req)
	}
}

var errConnReset = errors.New("injected: connection reset by peer")

func faultyS3(t *testing.T, ft *faultTransport, retries int) (*storage.S3, *s3test.Bucket) {
	b := s3test.NewBucket(t)
	cfg := b.S3Config("p")
	cfg.Transport = ft
	cfg.HTTPRetries = retries
	return newS3(t, cfg), b
}

func putAndCheck(t *testing.T, s storage.Store, want error) {
	t.Helper()
	key := "_delta_log/00000000000000000001.json"
	err := s.PutIfAbsent(t.Context(), key, []byte("ours"))
	if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("PutIfAbsent = %v, want %v", err, want)
	}
}

// Landed, then 503: the HTTP layer retries the PUT, which now gets 412; the
// read-back finds our bytes, so the outcome is success.
func TestS3AmbiguousLandedThen503(t *testing.T) {
	ft := &faultTransport{fault: landThen(func(req *http.Request) (*http.Response, error) {
		return s3Error(req, http.StatusServiceUnavailable, "ServiceUnavailable"), nil
	})}
	s, _ := faultyS3(t, ft, 0)
	putAndCheck(t, s, nil)
	ft.want(t, "PUT? 503", "PUT? 412", "GET 200")
}

// Landed, then the connection drops and nothing retries at the HTTP layer:
// the read-back resolves it.
func TestS3AmbiguousLandedThenConnError(t *testing.T) {
	ft := &faultTransport{fault: landThen(func(*http.Request) (*http.Response, error) {
		return nil, errConnReset
	})}
	s, _ := faultyS3(t, ft, -1)
	putAndCheck(t, s, nil)
	ft.want(t, "PUT? ERR", "GET 200")
}

// Landed, then the attempt times out (HTTPTimeout), retried by the HTTP layer.
func TestS3AmbiguousLandedThenTimeout(t *testing.T) {
	ft := &faultTransport{fault: landThen(func(req *http.Request) (*http.Response, error) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	})}
	b := s3test.NewBucket(t)
	cfg := b.S3Config("p")
	cfg.Transport, cfg.HTTPTimeout = ft, 300*time.Millisecond
	putAndCheck(t, newS3(t, cfg), nil)
	ft.want(t, "PUT? ERR", "PUT? 412", "GET 200")
}

// Not landed, error: the read-back finds nothing, so the PUT is tried again.
func TestS3AmbiguousNotLanded(t *testing.T) {
	ft := &faultTransport{fault: func(_ *http.Request, n int, _ http.RoundTripper) (*http.Response, error) {
		if n == 1 {
			return nil, errConnReset
		}
		return nil, nil
	}}
	s, _ := faultyS3(t, ft, -1)
	putAndCheck(t, s, nil)
	ft.want(t, "PUT? ERR", "GET 404", "PUT? 200")
}

// Not landed, and meanwhile another writer took the key: ErrExists.
func TestS3AmbiguousOtherWriterWon(t *testing.T) {
	var other storage.Store
	ft := &faultTransport{fault: func(req *http.Request, n int, _ http.RoundTripper) (*http.Response, error) {
		if n != 1 {
			return nil, nil
		}
		if err := other.PutIfAbsent(req.Context(), "_delta_log/00000000000000000001.json", []byte("theirs")); err != nil {
			return nil, err
		}
		return nil, errConnReset
	}}
	s, b := faultyS3(t, ft, -1)
	other = newS3(t, b.S3Config("p"))
	putAndCheck(t, s, storage.ErrExists)
	ft.want(t, "PUT? ERR", "GET 200")
}

// 409 ConditionalRequestConflict: retried by PutIfAbsent itself.
func TestS3ConflictRetried(t *testing.T) {
	ft := &faultTransport{fault: func(req *http.Request, n int, _ http.RoundTripper) (*http.Response, error) {
		if n <= 2 {
			return s3Error(req, http.StatusConflict, "ConditionalRequestConflict"), nil
		}
		return nil, nil
	}}
	s, _ := faultyS3(t, ft, 0)
	putAndCheck(t, s, nil)
	ft.want(t, "PUT? 409", "PUT? 409", "PUT? 200")
}

// A retried request resends the whole body: the first attempt is consumed
// and answered 503 without reaching the server.
func TestS3RetryResendsBody(t *testing.T) {
	ft := &faultTransport{fault: func(req *http.Request, n int, _ http.RoundTripper) (*http.Response, error) {
		if n != 1 {
			return nil, nil
		}
		io.Copy(io.Discard, req.Body)
		return s3Error(req, http.StatusInternalServerError, "InternalError"), nil
	}}
	s, _ := faultyS3(t, ft, 0)
	data := []byte(strings.Repeat("0123456789", 10000))
	if err := s.PutIfAbsent(t.Context(), "big", data); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "big")
	if err != nil || string(got) != string(data) {
		t.Fatalf("Get after retried PUT: %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	ft.want(t, "PUT? 500", "PUT? 200", "GET 200")
}
