package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/deltabus/deltabus/keepalive"
)

// maxBufferedBody is the largest request body the HTTP layer may read into
// memory to replay it on retries. Object uploads never are (they carry
// GetBody, see payload.replay); this is for the XML bodies of other
// requests (a complete of 10000 parts is under 1 MiB), and a guard against
// an upload that lost its GetBody.
const maxBufferedBody = 4 << 20

// bufferedUploads switches uploads to the old path (one PutObject whose
// body the HTTP layer reads into memory). Only the memory benchmark sets it.
var bufferedUploads atomic.Bool

// newHTTPClient returns the *http.Client the SDK uses: go-retryablehttp
// retries connection errors, stalls, 429 and 5xx with capped exponential
// backoff (each retry logged through rlog, rate-limited), every attempt is
// watched for stalls (stallTransport), and request bodies are re-read from
// their source for every attempt, never buffered whole (replayTransport).
func newHTTPClient(cfg S3Config, transport http.RoundTripper, rlog *retryLog) *http.Client {
	rc := retryablehttp.NewClient()
	stall := cfg.HTTPTimeout
	if stall <= 0 {
		stall = defaultHTTPTimeout
	}
	rc.HTTPClient = &http.Client{Transport: stallTransport{next: hardenTransport(transport, stall), limit: stall}}
	rc.RetryMax = cfg.HTTPRetries
	switch {
	case cfg.HTTPRetries == 0:
		rc.RetryMax = defaultHTTPRetries
	case cfg.HTTPRetries < 0:
		rc.RetryMax = 0
	}
	rc.RetryWaitMin = 100 * time.Millisecond
	rc.RetryWaitMax = 5 * time.Second
	rc.Logger = nil // per-request chatter off; retries are logged by CheckRetry
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		retry, cerr := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
		if retry {
			rlog.failed(resp, err)
		}
		return retry, cerr
	}
	// Hand the last response (e.g. a 503 with its S3 error body) to the SDK
	// instead of replacing it with "giving up after N attempts".
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &http.Client{Transport: replayTransport{rc}}
}

// idleConnTimeout closes pooled connections idle this long: S3 closes
// them after about 20 s itself, and an idle connection whose peer vanished
// costs the next request a failed attempt.
const idleConnTimeout = 30 * time.Second

// hardenTransport makes an *http.Transport (the SDK's, or the pooled
// default) notice a dead server within bounds of its own, below the stall
// watchdog: every connection dials with TCP keepalives and
// TCP_USER_TIMEOUT (package keepalive: unacknowledged writes fail after
// 30 s, not the kernel's fifteen minutes), the dial times out after stall
// and the wait for the response headers after twice that (a backstop: the
// stall watchdog ends a silent attempt first, with its StallError, which
// a timeout equal to the watchdog's raced and sometimes beat), and idle
// pooled connections are closed after idleConnTimeout. Another RoundTripper (a test's) is
// returned as it is.
func hardenTransport(rt http.RoundTripper, stall time.Duration) http.RoundTripper {
	t, ok := rt.(*http.Transport)
	if !ok {
		return rt
	}
	t = t.Clone()
	t.DialContext = keepalive.Default.Dialer(stall).DialContext
	t.ResponseHeaderTimeout = 2 * stall
	if t.IdleConnTimeout == 0 || t.IdleConnTimeout > idleConnTimeout {
		t.IdleConnTimeout = idleConnTimeout
	}
	return t
}

// replayTransport runs a request through go-retryablehttp, giving it a body
// it can re-read for every attempt: req.GetBody when set (every object
// upload sets it), else the body itself, which retryablehttp reads into
// memory: allowed for small bodies only.
type replayTransport struct{ rc *retryablehttp.Client }

func (t replayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body any
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case req.GetBody != nil:
		req.Body.Close() // each attempt opens its own body
		body = retryablehttp.ReaderFunc(func() (io.Reader, error) { return req.GetBody() })
	case req.ContentLength > maxBufferedBody && !bufferedUploads.Load():
		req.Body.Close()
		return nil, fmt.Errorf("s3 http %s %s: refusing to hold a %d-byte request body in memory for retries",
			req.Method, req.URL.Path, req.ContentLength)
	default:
		body = req.Body
	}
	r := *req // SetBody writes to the request: keep the caller's intact
	rr := &retryablehttp.Request{Request: &r}
	if err := rr.SetBody(body); err != nil {
		return nil, err
	}
	r.ContentLength = req.ContentLength
	resp, err := t.rc.Do(rr)
	var ue *url.Error
	if errors.As(err, &ue) { // http.Client wraps it again
		return resp, ue.Err
	}
	return resp, err
}

// stallTransport fails an HTTP attempt that makes no progress for limit:
// no request body byte taken by the connection, no response yet, or no
// response body byte read. A slow but moving transfer is never cut, a
// silent peer always is. The error is a *StallError.
type stallTransport struct {
	next  http.RoundTripper
	limit time.Duration
}

// StallError is the error of an S3 HTTP attempt that made no progress for
// the configured HTTPTimeout. Such attempts are retried like connection
// errors.
type StallError struct {
	Method, Path string
	Limit        time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("s3 http %s %s: no progress for %v (HTTPTimeout)", e.Method, e.Path, e.Limit)
}

// Timeout reports true, as net.Error timeouts do.
func (e *StallError) Timeout() bool { return true }

func (t stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := newWatchdog(t.limit, func() {
		cancel(&StallError{Method: req.Method, Path: req.URL.Path, Limit: t.limit})
	})
	r := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		r.Body = &progressReader{rc: req.Body, w: w}
	}
	if req.GetBody != nil {
		r.GetBody = func() (io.ReadCloser, error) {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			return &progressReader{rc: b, w: w}, nil
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		w.stop()
		cancel(nil)
		return nil, stallCause(ctx, err)
	}
	w.touch()
	resp.Body = &progressBody{progressReader: progressReader{rc: resp.Body, w: w}, ctx: ctx, cancel: cancel}
	return resp, nil
}

// stallCause returns the stall error when the watchdog ended the attempt.
func stallCause(ctx context.Context, err error) error {
	var se *StallError
	if errors.As(context.Cause(ctx), &se) {
		return se
	}
	return err
}

// watchdog calls fire once when touch has not been called for limit.
type watchdog struct {
	limit time.Duration
	start time.Time
	last  atomic.Int64 // time since start of the last touch
	done  atomic.Bool
	fire  func()
	timer *time.Timer
}

func newWatchdog(limit time.Duration, fire func()) *watchdog {
	w := &watchdog{limit: limit, start: time.Now(), fire: fire}
	w.timer = time.AfterFunc(limit, w.check)
	return w
}

func (w *watchdog) touch() { w.last.Store(int64(time.Since(w.start))) }

func (w *watchdog) check() {
	if w.done.Load() {
		return
	}
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	if idle < w.limit {
		w.timer.Reset(w.limit - idle)
		return
	}
	w.done.Store(true)
	w.fire()
}

func (w *watchdog) stop() {
	w.done.Store(true)
	w.timer.Stop()
}

// progressReader touches its watchdog on every byte read.
type progressReader struct {
	rc io.ReadCloser
	w  *watchdog
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.rc.Read(b)
	if n > 0 {
		p.w.touch()
	}
	return n, err
}

func (p *progressReader) Close() error { return p.rc.Close() }

// progressBody is a response body: reading it is progress, a stall turns
// its read error into the StallError, and closing it ends the attempt.
type progressBody struct {
	progressReader
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (p *progressBody) Read(b []byte) (int, error) {
	n, err := p.progressReader.Read(b)
	if err != nil && err != io.EOF {
		err = stallCause(p.ctx, err)
	}
	return n, err
}

func (p *progressBody) Close() error {
	p.w.stop()
	err := p.rc.Close()
	p.cancel(nil)
	return err
}
